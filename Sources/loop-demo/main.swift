import Foundation

// Everything lives in DemoMain so that the tests can run it; this file only makes the standard descriptors safe to
// use and hands over the arguments.
Terminal.openMissingStandardDescriptors()
exit(DemoMain.run(arguments: Array(CommandLine.arguments.dropFirst())))
