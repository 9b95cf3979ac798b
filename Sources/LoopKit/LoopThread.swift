import Dispatch

/// A thread that runs a loop: start, post work, sticky shutdown, join.
///
/// The thread runs its loop's default mode until `shutdown()`, kept alive by an internal source so that the loop
/// sleeps instead of returning `finished` on an empty mode (and never spins). A plain `loop.stop()` ends only the
/// current run call; the thread then runs the loop again. `shutdown()` is sticky: called before the thread's loop
/// starts running, or between two of its runs, it still ends the thread. After the loop's last run, the sources still
/// signalled and the blocks already queued run, whatever their modes, then those signalled and queued meanwhile, with
/// the item changes posted meanwhile, round by round (up to `finalDrainRounds` rounds); `perform` after that is a
/// precondition failure, never a silent loss. After `shutdown()`, every run of the loop returns `.stopped` at once,
/// before a pass, nested ones too (as CF's runs do once the loop is stopped; a run of a mode with nothing in it
/// returns `.finished` at once, as always): code that runs the loop in a `while` (a drag) must end on `.stopped`, and
/// a final-drain block cannot run passes to flush other sources.
///
/// On Linux the thread is tuned for latency: its timer slack is lowered to 1 µs, so its timers and display links fire
/// close to their dates, and it asks for a 500 µs scheduler slice, so that a wake-up preempts the thread that woke it
/// instead of waiting behind it (`PlatformThread.tuneCurrentThreadForLatency`). A loop run on a thread of your own
/// keeps that thread's settings.
/// Dropping the last reference to a `LoopThread` shuts it down and joins it. Every member is safe from any thread,
/// except that `join()` must not be called from the thread itself.
public final class LoopThread: Sendable {
    /// The thread's loop. Any thread may perform, add items, stop and wake it; only the thread runs it.
    public let loop: Loop

    private let thread: PlatformThread
    private let isJoined = LoopLock(false)

    /// Starts a thread named `name` (cut short at a character to the 15 bytes a Linux thread name keeps) and returns
    /// once its loop exists.
    ///
    /// - Throws: `SystemCallError` when the thread or its loop cannot be created (out of threads or descriptors).
    public init(name: String = "LoopKit") throws(SystemCallError) {
        let handoff = LoopLock<Result<Loop, SystemCallError>?>(nil)
        let started = DispatchSemaphore(value: 0)
        let thread = try PlatformThread.spawn(name: name) {
            PlatformThread.tuneCurrentThreadForLatency()
            let loop: Loop
            do throws(SystemCallError) {
                loop = try Loop.currentCreatingIfNeeded()
            } catch {
                handoff.withLock { $0 = .failure(error) }
                started.signal()
                return
            }
            let keepAlive = LoopSource { _ in }
            loop.add(keepAlive, forMode: .default)
            handoff.withLock { $0 = .success(loop) }
            started.signal()
            LoopThread.runUntilShutdown(loop)
            keepAlive.invalidate()
        }
        started.wait()
        switch handoff.withLock({ $0! }) {
        case .success(let loop):
            self.thread = thread
            self.loop = loop
        case .failure(let error):
            thread.join()
            throw error
        }
    }

    private static func runUntilShutdown(_ loop: Loop) {
        repeat {
            loop.run(mode: .default, before: .distantFuture)
        } while !loop.isShutDown
        // Sources signalled and blocks queued before the end still run, whatever their modes (an executor's jobs
        // too); then the loop ends, and `perform` refuses new blocks with a message.
        loop.end(finalDrain: .everything)
    }

    /// How many times the ending thread runs the blocks queued so far (libuv bounds such loops too).
    static let finalDrainRounds = 8

    /// Queues `block` on the thread's loop in the default mode. Any thread.
    ///
    /// - Precondition: The thread has not ended; where that may race, use `loop.performUnlessEnded(inModes:_:)`.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        self.loop.perform(call: "LoopThread.perform(_:)", block)
    }

    /// Ends the loop's run for good; the thread finishes its queued blocks and exits. Any thread; sticky.
    public func shutdown() {
        self.loop.shutDown()
    }

    /// Waits until the thread has exited. Any thread but the loop's own; several calls are fine.
    ///
    /// - Precondition: Not called on the loop's thread (it would wait for itself).
    public func join() {
        self.preconditionIsNotCurrent("LoopThread.join()")
        self.isJoined.withLock { joined in
            guard !joined else { return }
            self.thread.join()
            joined = true
        }
    }

    /// `shutdown()`, then `join()`. Any thread but the loop's own.
    ///
    /// - Precondition: Not called on the loop's thread.
    public func shutdownAndJoin() {
        self.preconditionIsNotCurrent("LoopThread.shutdownAndJoin()")  // before the shutdown, which it would keep
        self.shutdown()
        self.join()
    }

    /// Traps, naming `call`, on the loop's own thread, where a join would wait for itself.
    private func preconditionIsNotCurrent(_ call: StaticString) {
        loopPrecondition(!self.loop.isCurrent, "\(call): called on the loop's own thread, which would wait forever")
    }

    deinit {
        self.shutdown()
        if !self.thread.isCurrent {
            self.join()
        } else if !self.isJoined.withLock({ $0 }) {
            self.thread.detach()  // released on its own thread (a block, or its exit): it cannot wait for itself
        }
    }
}
