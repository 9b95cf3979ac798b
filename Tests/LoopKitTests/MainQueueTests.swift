import Foundation
import Testing

/// The main queue and `@MainActor` on a main thread that runs `Loop.main`, checked in a process of its own (the test
/// runner's main thread is not the test's): `loop-demo main-queue` beside the same program on Foundation's
/// `RunLoop.main`.
@Suite("The main queue on the main loop", .serialized, .timeLimit(.minutes(1)))
struct MainQueueTests {
    private func runProbe(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = try DemoProcess.executable()
        process.arguments = ["main-queue"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        process.killIfStillRunning(after: 120, "loop-demo main-queue \(arguments)")  // it gives up by itself at 20 s
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    @Test func mainQueueWorkAndMainActorCodeRunOnTheMainLoopAsOnFoundationsMainRunLoop() throws {
        let loopKit = try self.runProbe([])
        let foundation = try self.runProbe(["--foundation"])
        let hostDriven = try self.runProbe(["--host-driver"])
        let expected = """
            DispatchQueue.main.async: ran
            MainActor.run: ran
            Task { @MainActor in }: ran
            added common run ended: ran
            modal run ended: ran
            nested run ended: ran
            only-the-main-queue run ended: ran
            returning run ended: ran
            main-queue work during a run of a mode that is not common: waited
            main-queue work during a run of a mode added to the common modes: ran
            main-queue work during a run nested in a main-queue block: waited
            the nested run meanwhile: slept
            a run nested in a main-queue block, returning after a source: the main queue is none
            a run nested in a main-queue block, of a mode holding only the main queue: finished

            """
        #expect(loopKit.status == 0)
        #expect(loopKit.output == expected)
        #expect(foundation.output == loopKit.output)
        #expect(hostDriven.status == 0)
        #expect(hostDriven.output == loopKit.output)  // through a poll(2) host loop and a LoopHostDriver
    }
}
