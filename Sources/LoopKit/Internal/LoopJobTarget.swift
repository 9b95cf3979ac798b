/// What the Swift runtime sees of a loop's executor as an actor's: one object per loop and list of modes, owned by
/// the loop.
///
/// The runtime runs a call to another actor at once, on the same thread, only when the callee's executor is the
/// caller's by identity (and the task executors match); anything else is enqueued and waits for the loop's next block
/// drain. Every `LoopExecutor` of one loop and one set of modes hands out the same target, so a call between two
/// actors on the same loop is a plain call, however each actor got its executor. An actor's job runs with no task
/// executor, so that a call to another actor of this loop from a task with no preference stays inline. (A task's
/// preferred executor is the `LoopExecutor` itself: see `LoopExecutor.asUnownedTaskExecutor()`.)
///
/// Immutable; usable from any thread.
final class LoopJobTarget: SerialExecutor {
    /// The loop that owns this target (unowned: the loop holds its targets, and lives as long as any
    /// `LoopExecutor` of it).
    unowned let loop: Loop
    let modes: [LoopMode]
    /// `modes` as each job is queued with them (a `LoopExecutor` of these modes queues its jobs with them too).
    let blockModes: BlockModes

    init(loop: Loop, modes: [LoopMode]) {
        self.loop = loop
        self.modes = modes
        self.blockModes = BlockModes(modes)
    }

    /// Queues `job` as a block on the loop, as an actor's job. Any thread.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.enqueueJob(inModes: self.blockModes, serialExecutor: ObjectIdentifier(self)) {
            job.runSynchronously(on: self.asUnownedSerialExecutor())
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        loopPrecondition(self.loop.isCurrent, "LoopExecutor: not on the loop's thread, so not isolated to this executor")
    }

    func isIsolatingCurrentContext() -> Bool? {
        self.loop.isCurrent
    }
}

extension Loop {
    /// The loop's actor identity for `modes` (as a set), made on first use and kept for the loop's life. Any thread.
    func jobTarget(forModes modes: [LoopMode]) -> LoopJobTarget {
        self.jobTargets.withLock { targets in
            // Usually the very list asked for before (`loop.executor`'s); compared as sets, allocating, only if not.
            if let target = targets.first(where: { $0.modes == modes })
                ?? targets.first(where: { Set($0.modes) == Set(modes) }) {
                return target
            }
            let target = LoopJobTarget(loop: self, modes: modes)
            targets.append(target)
            return target
        }
    }
}
