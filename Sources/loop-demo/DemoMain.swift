import LoopKit

/// The program: parses the arguments, runs the command, and returns the exit status.
///
/// Exit statuses: 0 done, 1 a demo failed (a pipe, the trace file), 2 a usage mistake (message and short usage on
/// standard error), 130 ended by Ctrl-C (after printing what it saw).
enum DemoMain {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usageError: Int32 = 2
    static let interrupted: Int32 = 130

    /// Prints a demo's closing `text`, then whether Ctrl-C ended it and where its trace went (if it kept one), and
    /// returns the exit status: `interrupted` or `success`.
    static func finish(_ text: String, interrupted: Bool, trace: DemoTrace?, palette: Palette) -> Int32 {
        var text = text
        if interrupted {
            text += "\n" + palette.paint("Ended early by Ctrl-C.", .yellow)
        }
        if let note = trace?.finish() {
            text += "\n" + palette.paint(note, .dim)
        }
        Terminal.write(text + "\n")
        return interrupted ? Self.interrupted : Self.success
    }

    /// Runs `loop-demo` with `arguments` (without the program name) on the calling thread, which must be the main
    /// thread for the demos (they run `Loop.main`; `main-queue` needs the process's real main thread, so the tests run
    /// it in a child process); parse errors and help need no loop.
    @available(*, noasync)
    static func run(arguments: [String]) -> Int32 {
        let command: DemoCommand
        do {
            command = try DemoCommand.parse(arguments)
        } catch {
            Terminal.writeError("loop-demo: \(error)\n\(DemoHelp.usage)\nRun 'loop-demo --help' for more.\n")
            return self.usageError
        }
        do {
            switch command {
            case .help(let name):
                Terminal.write(DemoHelp.text(for: name) + "\n")
                return self.success
            case .tracking(let options):
                return try TrackingDemo(options: options).run()
            case .phases(let options):
                return try PhasesDemo(options: options).run()
            case .hitches(let options):
                return try HitchesDemo(options: options).run()
            case .echo(let options):
                return try EchoServer(options: options).run()
            case .mainQueue(let runner):
                return MainQueueProbe.run(runner)
            }
        } catch {
            Terminal.restore()
            Terminal.writeError("loop-demo: \(error)\n")
            return self.failure
        }
    }
}
