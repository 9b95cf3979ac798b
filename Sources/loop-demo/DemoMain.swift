import LoopKit

/// The program: parses the arguments, runs the command, and returns the exit status.
///
/// Exit statuses: 0 done, 1 a demo failed (a pipe, or the trace file, even when a signal ended the demo), 2 a usage
/// mistake (message and short usage on standard error), 128 + the signal's number when a signal ended it (130 for
/// Ctrl-C, 143 for SIGTERM), after printing what it saw.
enum DemoMain {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usageError: Int32 = 2

    /// The exit status of a demo that `signal` ended early, as a shell reports a process the signal killed.
    static func interrupted(by signal: CInt) -> Int32 { 128 + signal }

    /// The exit status of a demo that ran to its end or until `signal`: `failure` when it kept a trace it could not
    /// write at the end (the user asked for a file and has none), else `interrupted(by:)` or `success`.
    static func status(endedBy signal: CInt?, traceFailed: Bool) -> Int32 {
        if traceFailed { return Self.failure }
        return signal.map(Self.interrupted(by:)) ?? Self.success
    }

    /// Prints a demo's closing `text`, then which signal ended it early (if one did) and where its trace went (if it
    /// kept one), and returns the exit status (`status(endedBy:traceFailed:)`).
    static func finish(_ text: String, endedBy signal: CInt?, trace: DemoTrace?, palette: Palette) -> Int32 {
        var text = text
        if let signal {
            text += "\n" + palette.paint("Ended early by \(InterruptSignal.name(of: signal)).", .yellow)
        }
        let traceNote = trace?.finish()
        if let traceNote {
            text += "\n" + palette.paint(traceNote, .dim)
        }
        Terminal.write(text + "\n")
        return Self.status(endedBy: signal, traceFailed: trace != nil && traceNote == nil)
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
