import Synchronization

/// Delivers a process signal (SIGINT, SIGTERM, SIGHUP, ...) to a loop as a source.
///
/// While the source exists, the signal is caught by a handler that counts each delivery and writes to a pipe; a
/// descriptor source on that pipe calls `handler` on the loop's thread with the number of deliveries since its last
/// call. Signals that arrive close together coalesce into one call, but none that reaches the process is lost: the
/// count says how many (the kernel itself merges a standard signal sent again while still pending). The handler is
/// installed before `init` returns, so a signal raised right after is counted.
///
/// One source per signal at a time. `invalidate()` is safe from any thread; it gives the signal back the disposition it
/// had before (its default action, or `SIG_IGN` under nohup, or another handler).
// @unchecked Sendable: every stored property is immutable; `pipe` and `source` are themselves thread-safe.
public final class LoopSignalSource: @unchecked Sendable {
    /// The signal number.
    public let signal: CInt

    private let pipe: WakeupPipe
    private let source: LoopDescriptorSource

    /// Starts delivering `signal` to `loop` in `modes`. Any thread.
    ///
    /// - Parameters:
    ///   - signal: A catchable signal, e.g. `SIGINT` (not `SIGKILL` or `SIGSTOP`).
    ///   - loop: The loop whose thread runs `handler`.
    ///   - modes: Where the handler may run; `.common` by default, so that a drag does not hold off a Ctrl-C.
    ///   - handler: Runs on the loop's thread with the number of deliveries since its last call (at least 1).
    /// - Throws: `SystemCallError` when the pipe cannot be created, or `sigaction` refuses the signal (`EINVAL`: it
    ///   cannot be caught; `EBUSY`: another `LoopSignalSource` handles it).
    public init(
        signal: CInt,
        loop: Loop,
        modes: [LoopMode] = [.common],
        _ handler: @escaping (Int) -> Void
    ) throws(SystemCallError) {
        let pipe = try WakeupPipe()
        try ProcessSignals.install(signal, notifying: pipe)
        self.signal = signal
        self.pipe = pipe
        self.source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            pipe.drain()
            let count = ProcessSignals.takeCount(signal)
            if count > 0 {
                handler(count)
            }
        }
        for mode in modes {
            loop.add(self.source, forMode: mode)
        }
    }

    deinit {
        self.invalidate()
    }

    /// Stops delivering: the handler is not called again, and the signal gets back the disposition it had before.
    /// Any thread; twice does nothing.
    public func invalidate() {
        guard self.source.isValid else { return }
        ProcessSignals.uninstall(self.signal)
        self.source.invalidate()
    }

    /// Sends `signal` to this process (`kill(getpid(), signal)`: any thread that does not block it takes it).
    /// Any thread.
    public static func sendToThisProcess(_ signal: CInt) {
        ProcessSignals.raiseInProcess(signal)
    }
}
