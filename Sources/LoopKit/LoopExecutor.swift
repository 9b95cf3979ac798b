/// Runs Swift concurrency jobs on a loop's thread, as blocks in chosen modes: an actor's executor, or a task's.
///
/// An actor whose `unownedExecutor` is a `LoopExecutor`'s runs all its code on the loop's thread, interleaved with
/// the loop's other work at its block drain points; `withTaskExecutorPreference(_:operation:)` puts a task's
/// continuations there too. Jobs run only while the loop runs one of `modes` (like `perform` blocks), and pending
/// jobs keep such a mode alive. Jobs enqueued after the loop's `LoopThread` has ended are a precondition failure,
/// never silently dropped.
///
/// Immutable; usable from any thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor, CustomStringConvertible {
    /// The loop whose thread runs the jobs.
    public let loop: Loop
    /// The modes in which jobs may run.
    public let modes: [LoopMode]

    /// An executor that runs jobs on `loop`'s thread while it runs any of `modes`.
    ///
    /// - Precondition: `modes` is not empty.
    public init(loop: Loop, modes: [LoopMode] = [.default]) {
        loopPrecondition(!modes.isEmpty, "LoopExecutor(loop:modes:): the list of modes is empty, so no job could run")
        self.loop = loop
        self.modes = modes
    }

    /// Queues `job` as a block on the loop. Any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.perform(inModes: self.modes) {
            job.runSynchronously(isolatedTo: self.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
        }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Traps unless called on the loop's thread: what `assumeIsolated` relies on.
    public func checkIsolated() {
        loopPrecondition(self.loop.isCurrent, "LoopExecutor: not on the loop's thread, so not isolated to this executor")
    }

    public func isIsolatingCurrentContext() -> Bool? {
        self.loop.isCurrent
    }

    public var description: String {
        "LoopExecutor(modes: \(self.modes.map(\.name)))"
    }
}
