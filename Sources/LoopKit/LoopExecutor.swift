/// Runs Swift concurrency jobs on a loop's thread, as blocks in chosen modes: an actor's executor, or a task's.
///
/// An actor whose `unownedExecutor` is a `LoopExecutor`'s runs all its code on the loop's thread, interleaved with
/// the loop's other work at its block drain points; `withTaskExecutorPreference(_:operation:)` puts a task's
/// continuations there too. Jobs run only while the loop runs one of `modes` (like `perform` blocks), and pending
/// jobs keep such a mode alive. When the loop ends (its `LoopThread` finishes, its thread exits, or it is
/// invalidated), the jobs queued before the end still run, in any mode, with those they queue for a few rounds. Jobs
/// enqueued after the end are a precondition failure, never silently dropped.
///
/// Every `LoopExecutor` of one loop and one set of modes is the same serial executor to the Swift runtime: a call from
/// one actor to another whose executors are both, say, `loop.executor` runs at once, on the loop's thread, as a plain
/// call, without a trip through the loop (as a call between actors that share a dispatch queue does). An actor's
/// jobs run with no task executor; a task that also prefers this loop as its task executor (`withTaskExecutorPreference`,
/// `Task(executorPreference:)`) is therefore re-enqueued at each such call, as the runtime asks whenever task executors
/// differ. As a task executor, each `LoopExecutor` is itself.
///
/// Immutable; usable from any thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor, CustomStringConvertible {
    /// The loop whose thread runs the jobs.
    public let loop: Loop
    /// The modes in which jobs may run.
    public let modes: [LoopMode]
    /// The loop's shared identity for these modes as an actor's executor: what the runtime enqueues actors' jobs on.
    private let actorTarget: LoopJobTarget

    /// An executor that runs jobs on `loop`'s thread while it runs any of `modes`.
    ///
    /// - Precondition: `modes` is not empty.
    public init(loop: Loop, modes: [LoopMode] = [.default]) {
        loopPrecondition(!modes.isEmpty, "LoopExecutor(loop:modes:): the list of modes is empty, so no job could run")
        self.loop = loop
        self.modes = modes
        self.actorTarget = loop.jobTarget(forModes: modes)
    }

    /// Queues `job` as a block on the loop, to run with this executor as its task executor: the runtime enqueues here
    /// the jobs of a task that prefers this executor. (An actor's jobs go to the identity that
    /// `asUnownedSerialExecutor()` returns, and run with no task executor.) Any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.enqueueJob(inModes: self.actorTarget.blockModes, serialExecutor: nil) {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }

    /// The loop's identity for these modes, unowned as the runtime takes it: valid while the loop lives. An actor
    /// that stores it instead of the executor must keep the executor (or the loop) too; one that outlives the loop
    /// enqueues on freed memory.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        self.actorTarget.asUnownedSerialExecutor()
    }

    /// This executor itself: `Task(executorPreference:)` hands the runtime a reference to the executor, which the
    /// runtime releases through this identity when the task ends, so any other object here would be released in its
    /// place (and this one leaked).
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
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
