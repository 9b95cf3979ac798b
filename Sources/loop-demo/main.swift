import Foundation

// Everything lives in DemoMain so that the tests can run it; this file only hands over the arguments.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "main-queue" {
    // Needs the process's real main thread, so it is not one of DemoMain's commands (which the tests run in-process).
    exit(MainQueueProbe.run(foundation: arguments.dropFirst().contains("--foundation")))
}
exit(DemoMain.run(arguments: arguments))
