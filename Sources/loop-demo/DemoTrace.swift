import LoopKit

/// `--trace FILE`: a `LoopTracer` on the demo's loop, its file written when the demo ends.
///
/// The file is written once at the start too (an empty trace), so that an unwritable path fails before the demo
/// runs rather than after.
final class DemoTrace {
    let path: String
    let tracer: LoopTracer

    /// Starts tracing `loop` in the common modes (default and tracking) into `path`. Loop thread.
    ///
    /// - Throws: `DemoError` when `path` cannot be written.
    init(path: String, loop: Loop) throws(DemoError) {
        self.path = path
        self.tracer = LoopTracer(loop: loop, modes: [.common], threadName: "main")
        try self.write()
    }

    /// A trace into `path`, or none without a path (no `--trace`: no tracer, which then costs nothing).
    static func start(path: String?, loop: Loop) throws(DemoError) -> DemoTrace? {
        guard let path else { return nil }
        return try DemoTrace(path: path, loop: loop)
    }

    /// Writes what was recorded so far to the file, replacing it. Any thread.
    func write() throws(DemoError) {
        do {
            try self.tracer.write(toFile: self.path)
        } catch {
            throw DemoError("cannot write the trace to \(self.path): \(error)")
        }
    }

    /// Stops recording and writes the file; reports a failure on standard error.
    ///
    /// - Returns: A line for the user saying where the trace is, or `nil` after a failure.
    func finish() -> String? {
        self.tracer.invalidate()
        do {
            try self.write()
        } catch {
            Terminal.writeError("loop-demo: \(error)\n")
            return nil
        }
        return "Trace: \(self.tracer.eventCount) events in \(self.path).\n"
            + "Open it in ui.perfetto.dev (\"Open trace file\") or chrome://tracing (\"Load\")."
    }
}
