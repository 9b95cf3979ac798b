import Foundation

// Everything lives in DemoMain so that the tests can run it; this file only hands over the arguments.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "main-queue" {
    // Needs the process's real main thread, so it is not one of DemoMain's commands (which the tests run in-process).
    let options = arguments.dropFirst()
    exit(MainQueueProbe.run(options.contains("--foundation") ? .foundation
                            : options.contains("--host-driver") ? .hostDriver : .loopKit))
}
exit(DemoMain.run(arguments: arguments))
