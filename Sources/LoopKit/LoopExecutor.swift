/// Runs Swift concurrency jobs on a loop's thread, as blocks in chosen modes: an actor's executor, or a task's.
///
/// An actor whose `unownedExecutor` is a `LoopExecutor`'s runs all its code on the loop's thread, interleaved with
/// the loop's other work at its block drain points; `withTaskExecutorPreference(_:operation:)` puts a task's
/// continuations there too. Jobs run only while the loop runs one of `modes` (like `perform` blocks), and pending
/// jobs keep such a mode alive. Jobs enqueued after the loop's `LoopThread` has ended are a precondition failure,
/// never silently dropped.
///
/// Every `LoopExecutor` of one loop and one set of modes is the same executor to the Swift runtime: a call from one
/// actor to another whose executors are both, say, `loop.executor` runs at once, on the loop's thread, as a plain
/// call, without a trip through the loop (as a call between actors that share a dispatch queue does). An actor's
/// jobs run with no task executor; a task that also prefers this loop as its task executor (`withTaskExecutorPreference`)
/// is therefore re-enqueued at each such call, as the runtime asks whenever task executors differ.
///
/// Immutable; usable from any thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor, CustomStringConvertible {
    /// The loop whose thread runs the jobs.
    public let loop: Loop
    /// The modes in which jobs may run.
    public let modes: [LoopMode]
    /// The loop's shared identities for these modes: what the runtime is given and enqueues on.
    private let actorTarget: LoopJobTarget
    private let taskTarget: LoopJobTarget

    /// An executor that runs jobs on `loop`'s thread while it runs any of `modes`.
    ///
    /// - Precondition: `modes` is not empty.
    public init(loop: Loop, modes: [LoopMode] = [.default]) {
        loopPrecondition(!modes.isEmpty, "LoopExecutor(loop:modes:): the list of modes is empty, so no job could run")
        self.loop = loop
        self.modes = modes
        (self.actorTarget, self.taskTarget) = loop.jobTargets(forModes: modes)
    }

    /// Queues `job` as a block on the loop, as an actor's job. Any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        self.actorTarget.enqueue(job)
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        self.actorTarget.asUnownedSerialExecutor()
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        self.taskTarget.asUnownedTaskExecutor()
    }

    /// Traps unless called on the loop's thread: what `assumeIsolated` relies on.
    public func checkIsolated() {
        self.actorTarget.checkIsolated()
    }

    public func isIsolatingCurrentContext() -> Bool? {
        self.loop.isCurrent
    }

    public var description: String {
        "LoopExecutor(modes: \(self.modes.map(\.name)))"
    }
}
