import Dispatch
import Synchronization

/// A fixed set of loop threads for a server, which spreads its connections over them (SwiftNIO's
/// `MultiThreadedEventLoopGroup`).
///
/// Each loop runs on a `LoopThread` named after the group and its index (`"name-0"`, `"name-1"`, ...; the name is cut
/// short, never the index, to the 15 bytes Linux keeps). `next()` hands out the loops round-robin; `any()` prefers the
/// calling thread's loop. `shutdownGracefully` is sticky and idempotent: it shuts every loop down (each finishes its
/// queued blocks), joins every thread, then reports completion once per call, in call order: on the thread that joined
/// them, or at once on the caller's thread when the group had already shut down. Every member is safe from any thread.
public final class LoopGroup: Sendable {
    private enum Lifecycle {
        case running
        /// Shutting down: the completions not called yet, and whether every thread has ended (then the thread that
        /// joined them is calling completions, and calls these after the ones it has taken).
        case shuttingDown([@Sendable () -> Void], threadsEnded: Bool)
        case shutDown
    }

    /// The group's loops, in index order. Any thread.
    public let loops: [Loop]

    private let threads: [LoopThread]
    private let cursor = Atomic<UInt>(0)  // unsigned: it wraps to 0, never to a negative index
    private let lifecycle = LoopLock(Lifecycle.running)

    /// Starts `threadCount` loop threads named `name-0`, `name-1`, ...
    ///
    /// - Parameters:
    ///   - name: The prefix of the threads' names.
    ///   - threadCount: How many loops; by default the number of processors online.
    /// - Throws: `SystemCallError` when a thread or a loop cannot be created; the threads already started are shut
    ///   down and joined first.
    /// - Precondition: `threadCount` is at least 1.
    public init(name: String = "LoopGroup", threadCount: Int? = nil) throws(SystemCallError) {
        let count = threadCount ?? PlatformThread.processorCount
        loopPrecondition(count >= 1, "LoopGroup(name:threadCount:): threadCount must be at least 1 (got \(count))")
        var threads: [LoopThread] = []
        do {
            for index in 0..<count {
                threads.append(try LoopThread(name: Self.threadName(name, index)))
            }
        } catch {
            for thread in threads { thread.shutdownAndJoin() }
            throw error
        }
        self.threads = threads
        self.loops = threads.map(\.loop)
    }

    /// The next loop, round-robin. Any thread.
    public func next() -> Loop {
        let index = self.cursor.wrappingAdd(1, ordering: .relaxed).oldValue
        return self.loops[Int(index % UInt(self.loops.count))]
    }

    /// The calling thread's loop when it is one of the group's, else `next()`. Any thread.
    ///
    /// Code that runs on a group's loop and opens a connection keeps it on its own thread this way.
    public func any() -> Loop {
        self.loops.first { $0.isCurrent } ?? self.next()
    }

    /// `"name-index"`, with the name cut short (at a character) so that the whole fits the 15 bytes of a Linux thread
    /// name: the index is what tells the threads apart.
    static func threadName(_ name: String, _ index: Int) -> String {
        let suffix = "-\(index)"
        return PlatformThread.fittingName(name, reserving: suffix.utf8.count) + suffix
    }

    /// Shuts every loop down and joins every thread, then calls `completion` on the thread that joined them. Any
    /// thread, any number of times: each call's completion runs once, after the threads have ended, and the
    /// completions run in the order of the calls. A call made once every earlier completion has returned runs its
    /// completion at once, on this thread; one made while they are still being called (from a completion, say) is
    /// called after them, on the joining thread. The call never waits.
    ///
    /// Each loop finishes the blocks queued before its shutdown; `perform` on a loop of the group after that is a
    /// precondition failure.
    ///
    /// - Precondition: If the process cannot start the thread that joins the group's threads (it is out of threads),
    ///   the call comes from a thread outside the group, which then joins them itself.
    public func shutdownGracefully(_ completion: @escaping @Sendable () -> Void = {}) {
        switch self.beginShutdown(completion) {
        case .wait:
            return
        case .callNow:
            completion()
        case .start:
            do {
                let joiner = try PlatformThread.spawn(name: "LoopGroup-shutdown") { self.finishShutdown() }
                joiner.detach()
            } catch {
                // No thread left to spare: join here, which a thread of the group cannot do (it would wait for itself).
                loopPrecondition(!self.loops.contains { $0.isCurrent },
                                 "LoopGroup.shutdownGracefully(_:): no thread could be started to join the group's "
                                    + "threads (\(error)), and this is one of them: call it from another thread")
                self.finishShutdown()
            }
        }
    }

    private enum ShutdownStep {
        case start
        /// The completion is recorded; the joining thread calls it after the ones recorded before it.
        case wait(threadsEnded: Bool)
        case callNow
    }

    /// Records `completion`; the first call shuts every thread down and says to join them.
    private func beginShutdown(_ completion: @escaping @Sendable () -> Void) -> ShutdownStep {
        let step = self.lifecycle.withLock { lifecycle -> ShutdownStep in
            switch lifecycle {
            case .running:
                lifecycle = .shuttingDown([completion], threadsEnded: false)
                return .start
            case .shuttingDown(let completions, let threadsEnded):
                lifecycle = .shuttingDown(completions + [completion], threadsEnded: threadsEnded)
                return .wait(threadsEnded: threadsEnded)
            case .shutDown:
                return .callNow
            }
        }
        if case .start = step {
            for thread in self.threads { thread.shutdown() }
        }
        return step
    }

    /// Joins every thread, then calls every completion, in the order of the calls that recorded them.
    ///
    /// The group reads as shut down (a later call's completion runs at once, on its caller's thread) only once every
    /// recorded completion has returned: one recorded while earlier ones run (another thread's call, or a completion's
    /// own) is called here after them, never before them on its caller's thread.
    private func finishShutdown() {
        for thread in self.threads { thread.join() }
        while true {
            let completions = self.lifecycle.withLock { lifecycle -> [@Sendable () -> Void] in
                guard case .shuttingDown(let completions, _) = lifecycle else { return [] }
                lifecycle = completions.isEmpty ? .shutDown : .shuttingDown([], threadsEnded: true)
                return completions
            }
            if completions.isEmpty { return }
            for completion in completions { completion() }
        }
    }

    /// Shuts every loop down and returns once every thread has ended.
    ///
    /// Any task but one whose executor is a loop of this group (an actor on `loop.executor`, a task preferring it):
    /// that task could never resume, and the job that would resume it traps, saying so. Use the completion variant
    /// there.
    public func shutdownGracefully() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            self.shutdownGracefully { continuation.resume() }
        }
    }

    /// Shuts every loop down and waits until every thread has ended.
    ///
    /// - Precondition: Not called on one of the group's threads (it would wait for itself).
    @available(*, noasync, message: "blocks its thread; use `await shutdownGracefully()`")
    public func syncShutdownGracefully() {
        loopPrecondition(!self.loops.contains { $0.isCurrent },
                         "LoopGroup.syncShutdownGracefully(): called on one of the group's own threads, which would "
                            + "wait for itself; use shutdownGracefully(_:) there")
        let finished = DispatchSemaphore(value: 0)
        let signal: @Sendable () -> Void = { finished.signal() }
        switch self.beginShutdown(signal) {
        case .start:
            self.finishShutdown()  // joined on this thread: no helper thread outlives the call
        case .wait(let threadsEnded):
            // Every thread has ended, which is all this call waits for; its signal comes after the completions before
            // it, maybe from this very thread (a completion that calls this), which must not wait for itself.
            if threadsEnded { return }
            // Another call is joining; it signals.
        case .callNow:
            signal()
        }
        finished.wait()
    }

    /// Whether every thread has ended and every recorded completion has returned, so that a shutdown's completion now
    /// runs at once on its caller's thread. Any thread.
    var hasShutDown: Bool {
        self.lifecycle.withLock { lifecycle in
            if case .shutDown = lifecycle { return true }
            return false
        }
    }

    /// Whether `shutdownGracefully` was called. Any thread.
    public var isShuttingDown: Bool {
        self.lifecycle.withLock { lifecycle in
            if case .running = lifecycle { return false }
            return true
        }
    }
}
