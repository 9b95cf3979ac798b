import Foundation

// Everything lives in DemoMain so that the tests can run it; this file only makes the standard descriptors safe to
// use and hands over the arguments.
Terminal.openMissingStandardDescriptors()
// Output to a pipe whose reader has gone (`loop-demo --trace t.json | head -1`, `loop-demo echo 2>&1 | head -1`) fails
// with EPIPE, which `Terminal` takes as "drop the rest", instead of killing the demo before it writes its trace or
// drains its connections; the echo server's sockets send with MSG_NOSIGNAL besides.
signal(SIGPIPE, SIG_IGN)
exit(DemoMain.run(arguments: Array(CommandLine.arguments.dropFirst())))
