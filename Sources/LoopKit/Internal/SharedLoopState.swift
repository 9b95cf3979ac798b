import Synchronization

/// A loop's `LoopStateMachine` behind its lock, with a lock-free summary of what is queued for the loop's thread.
///
/// Every transition goes through `withLock`, which republishes the summary (when it changed) before it releases the
/// lock, so the summary is exact whenever the lock is free. The loop's thread reads it without the lock to skip taking the lock
/// for lists that are empty, as they are in most passes. Such a read can only miss work that another thread is
/// queueing at that very instant, and that work is not lost: `beginWait(preferring:)` decides under the lock and refuses to
/// sleep while anything is queued. Any thread for `withLock`; `pending` is for the loop's thread.
struct SharedLoopState: ~Copyable, Sendable {
    private let machine = LoopLock(LoopStateMachine())
    private let summary = Atomic<UInt8>(0)

    /// Runs `body` on the state machine under the lock, then publishes what is queued.
    ///
    /// `body` must not call user code, block, or take this lock again.
    @inline(__always)
    func withLock<Result>(_ body: (inout LoopStateMachine) throws -> Result) rethrows -> Result {
        try self.machine.withLock { machine in
            defer {
                // Stored only when it changes: most transitions (a query, a second block) leave it as it was, and a
                // store would take the line that the loop's thread reads every pass away from it.
                let pending = machine.pendingWork.rawValue
                if self.summary.load(ordering: .relaxed) != pending {
                    self.summary.store(pending, ordering: .releasing)
                }
            }
            return try body(&machine)
        }
    }

    /// What was queued when the lock was last released.
    var pending: LoopStateMachine.PendingWork {
        LoopStateMachine.PendingWork(rawValue: self.summary.load(ordering: .acquiring))
    }
}
