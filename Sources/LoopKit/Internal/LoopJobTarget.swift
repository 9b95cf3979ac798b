/// What the Swift runtime sees of a loop's executor: one object per loop, list of modes and role, owned by the loop.
///
/// The runtime runs a call to another actor at once, on the same thread, only when the callee's executor is the
/// caller's by identity (and the task executors match); anything else is enqueued and waits for the loop's next block
/// drain. Every `LoopExecutor` of one loop and one set of modes hands out the same two targets, so a call between
/// two actors on the same loop is a plain call, however each actor got its executor. The serial and task roles are
/// separate objects because a job must run with the task executor its role implies: an actor's job with none (so a
/// call to another actor of this loop from a task with no preference stays inline), a preferring task's job with this
/// loop's.
///
/// Immutable; usable from any thread.
final class LoopJobTarget: SerialExecutor, TaskExecutor {
    enum Role {
        /// An actor's executor (`asUnownedSerialExecutor`).
        case serial
        /// A task's preferred executor (`asUnownedTaskExecutor`).
        case task
    }

    /// The loop that owns this target (unowned: the loop holds its targets, and lives as long as any
    /// `LoopExecutor` of it).
    unowned let loop: Loop
    let modes: [LoopMode]
    let role: Role

    init(loop: Loop, modes: [LoopMode], role: Role) {
        self.loop = loop
        self.modes = modes
        self.role = role
    }

    /// Queues `job` as a block on the loop. Any thread.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.enqueueJob(inModes: self.modes) {
            switch self.role {
            case .serial: job.runSynchronously(on: self.asUnownedSerialExecutor())
            case .task: job.runSynchronously(on: self.asUnownedTaskExecutor())
            }
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    func checkIsolated() {
        loopPrecondition(self.loop.isCurrent, "LoopExecutor: not on the loop's thread, so not isolated to this executor")
    }

    func isIsolatingCurrentContext() -> Bool? {
        self.loop.isCurrent
    }
}

extension Loop {
    /// The loop's actor and task identities for `modes` (as a set), made on first use and kept for the loop's life.
    /// Any thread.
    func jobTargets(forModes modes: [LoopMode]) -> (actor: LoopJobTarget, task: LoopJobTarget) {
        self.jobTargets.withLock { pairs in
            // Usually the very list asked for before (`loop.executor`'s); compared as sets, allocating, only if not.
            if let pair = pairs.first(where: { $0.actor.modes == modes })
                ?? pairs.first(where: { Set($0.actor.modes) == Set(modes) }) {
                return pair
            }
            let pair = (actor: LoopJobTarget(loop: self, modes: modes, role: .serial),
                        task: LoopJobTarget(loop: self, modes: modes, role: .task))
            pairs.append(pair)
            return pair
        }
    }
}
