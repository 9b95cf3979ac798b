import Synchronization

/// Delivers a process signal (SIGINT, SIGTERM, SIGHUP, ...) to a loop as a source.
///
/// While the source is valid, the signal is caught by a handler that counts each delivery and writes to the source's
/// pipe; a descriptor source on that pipe calls `handler` on the loop's thread with the number of deliveries since its
/// last call. Signals that arrive close together coalesce into one call, but none that reaches the process is lost:
/// the count says how many (the kernel itself merges a standard signal sent again while still pending). The handler
/// is installed before `init` returns, so a signal raised right after is counted. `init` also unblocks the signal
/// on the calling thread: a process started with it blocked everywhere (a child spawned from one of Dispatch's
/// threads inherits such a mask) would otherwise never receive it.
///
/// Several sources may watch one signal, on one loop or on several: each sees every delivery. The loop keeps a valid
/// source alive, so `_ = try LoopSignalSource(...)` keeps working until `invalidate()`. When the last source of a
/// signal is invalidated, the signal gets back the disposition it had before the first (its default action, or
/// `SIG_IGN` under nohup, or another handler), unless the program installed a handler of its own since, which stays;
/// the threads that unblocked it keep it unblocked. `invalidate()` is safe from any thread. A source whose loop ends
/// (its thread exits, its `LoopThread` finishes) is invalidated with it, so an ended loop never swallows a signal; a
/// delivery that came after the loop's last pass is handed to `handler` first, on the loop's thread: during a
/// `LoopThread`'s final drain, where the handler may still queue work for the loop, or, for what comes after its last
/// round, in one last call once the loop has ended, which must not queue any (`perform` would trap).
// @unchecked Sendable: every stored property is immutable or a lock (a weak reference's loads are atomic); `pipe` and
// `source` are themselves thread-safe.
public final class LoopSignalSource: @unchecked Sendable {
    /// The signal number.
    public let signal: CInt

    private let pipe: WakeupPipe
    /// The handler's listener ticket (`ProcessSignals`); -1 when never installed.
    private let ticket: CInt
    private let isInstalled: LoopLock<Bool>
    /// The descriptor source on the pipe, held weakly: the loop holds it (and, through its handler and `live`, this
    /// source) while it is in a mode, so nothing holds this source once the loop lets go of it.
    private weak var source: LoopDescriptorSource?
    /// This source, as its descriptor source's handler sees it: the loop keeps a valid source alive through it.
    private let live: LoopLock<LoopSignalSource?>

    /// Starts delivering `signal` to `loop` in `modes`. Any thread.
    ///
    /// On a loop that has ended, the source comes back invalid (`isValid` is `false`), and the signal keeps the
    /// disposition it had: an ended loop never swallows a signal.
    ///
    /// - Parameters:
    ///   - signal: A catchable signal, e.g. `SIGINT`: not `SIGKILL` or `SIGSTOP`, and not one that a fault raises
    ///     (`SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGTRAP`, `SIGSYS`), whose handler would return into the faulting
    ///     instruction for ever.
    ///   - loop: The loop whose thread runs `handler`.
    ///   - modes: Where the handler may run; `.common` by default, so that a drag does not hold off a Ctrl-C.
    ///   - handler: Runs on the loop's thread with the number of deliveries since its last call (at least 1).
    /// - Throws: `SystemCallError` when the pipe cannot be created, or `sigaction` refuses the signal (`EINVAL`: it
    ///   cannot be caught, or a fault raises it; `EBUSY`: 16 sources already watch it).
    /// - Precondition: `modes` is not empty.
    public init(
        signal: CInt,
        loop: Loop,
        modes: [LoopMode] = [.common],
        _ handler: @escaping @Sendable (Int) -> Void
    ) throws(SystemCallError) {
        loopPrecondition(!modes.isEmpty, "LoopSignalSource(signal:loop:modes:_:): the list of modes is empty")
        let pipe = try WakeupPipe()
        // Not even installed for a loop that has ended: a signal that came between the install and the uninstall
        // would be swallowed.
        let isLoopEnded = loop.hasEnded
        let ticket: CInt
        if isLoopEnded {
            ticket = -1
        } else {
            ticket = try ProcessSignals.install(signal, notifying: pipe)
        }
        let live = LoopLock<LoopSignalSource?>(nil)
        self.signal = signal
        self.pipe = pipe
        self.ticket = ticket
        self.isInstalled = LoopLock(!isLoopEnded)
        self.live = live
        let watch = HandlerWatch(live)
        let deliver: @Sendable () -> Void = {
            guard watch.live.withLock({ $0 }) != nil else { return }
            pipe.drain()
            let count = ProcessSignals.takeCount(signal, ticket: ticket)
            if count > 0 {
                handler(count)
            }
        }
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in deliver() }
        // A `LoopThread`'s final drain no longer waits on the pipe: each round hands over what came, while the handler
        // may still queue work for the loop.
        source.whenLoopDrains = deliver
        // A loop that ends must not swallow the signal for ever: the source ends with it, and the signal gets back
        // its previous disposition (SIGINT kills again) once no source watches it. On the loop's thread, deliveries
        // since the last hand-over are handed over in one last call, made after the uninstall: a delivery during the
        // handler would otherwise be counted for a listener about to go, and dropped.
        source.whenLoopEnds = { isOnLoopThread in
            guard let signalSource = live.withLock({ $0 }) else { return }
            let taken = isOnLoopThread ? ProcessSignals.takeCount(signal, ticket: ticket) : 0
            let left = signalSource.stopDelivering()
            if isOnLoopThread, taken + left > 0 {
                handler(taken + left)
            }
        }
        self.source = source
        live.withLock { $0 = self }
        var isAccepted = false
        for mode in modes {
            isAccepted = loop.add(source, forMode: mode) || isAccepted
        }
        if !isAccepted {
            self.invalidate()  // the loop ended meanwhile: nothing would ever read the pipe
        }
    }

    deinit {
        self.invalidate()
    }

    /// Held by the descriptor source's handler alone. A descriptor source lets go of its handler when it is
    /// invalidated or freed; the second happens when its loop ends before the add arrived (the loop drops the queued
    /// add, and `whenLoopEnds` never runs), and the signal source then ends too: nothing would ever read its pipe.
    private final class HandlerWatch: Sendable {
        let live: LoopLock<LoopSignalSource?>

        init(_ live: LoopLock<LoopSignalSource?>) {
            self.live = live
        }

        deinit {
            self.live.withLock { $0 }?.invalidate()
        }
    }

    /// Whether the source still delivers its signal. Any thread.
    public var isValid: Bool {
        self.isInstalled.withLock { $0 }
    }

    /// Stops delivering: the handler is not called again, but for a call the loop had already begun on its thread
    /// when another thread invalidated the source. If this was the signal's last source, the signal gets back the
    /// disposition it had before. Any thread; twice does nothing.
    public func invalidate() {
        self.stopDelivering()
    }

    /// `invalidate()`, which returns the deliveries counted for this source and not taken (0 the second time).
    @discardableResult
    private func stopDelivering() -> Int {
        let wasInstalled = self.isInstalled.withLock { installed -> Bool in
            defer { installed = false }
            return installed
        }
        let left = wasInstalled ? ProcessSignals.uninstall(self.signal, ticket: self.ticket) : 0
        self.source?.invalidate()
        // Released after the lock, never inside it: the last reference may be this one.
        let released = self.live.withLock { live -> LoopSignalSource? in
            defer { live = nil }
            return live
        }
        _ = released
        return left
    }

    /// Sends `signal` to this process (`kill(getpid(), signal)`: any thread that does not block it takes it).
    /// Any thread.
    ///
    /// - Precondition: `signal` is a signal number (`kill` fails with `EINVAL` otherwise).
    public static func sendToThisProcess(_ signal: CInt) {
        ProcessSignals.raiseInProcess(signal)
    }
}
