import Foundation

// Everything lives in DemoMain so that the tests can run it; this file only hands over the arguments.
exit(DemoMain.run(arguments: Array(CommandLine.arguments.dropFirst())))
