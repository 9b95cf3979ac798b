/// The part of a loop that other threads touch, guarded by `Loop.shared`.
///
/// Every mutation that gives the loop work returns whether the caller must write to the wake-up pipe: only the first
/// since the loop last drained the pipe does (NIO's pending-wake flag, libuv's `async` pending bit).
struct SharedState {
    /// A byte is in the wake-up pipe, or is about to be written: further wake-ups need no write.
    var isWakeupPending = false
    /// Blocks from `perform`, in FIFO order.
    var blocks: [QueuedBlock] = []
    /// Item changes made off the loop's thread, applied by the loop at its next pass.
    /// They receive the loop instead of capturing it, so that a queued message never keeps its loop alive.
    var controlMessages: [@Sendable (Loop) -> Void] = []
    /// Sources signalled since the loop last looked, first signalled first.
    var signalledSources: [LoopSource] = []
    /// How many `run` calls are on the loop thread's stack.
    var runDepth = 0
    /// `stop()` was called while a run was active; the innermost run (at its next check) takes it.
    var isStopRequested = false
    /// The thread helper is shutting the loop down: every run returns `stopped` from now on (sticky).
    var isShutDown = false
    /// The thread helper has finished: no block queued from now on would ever run.
    var hasEnded = false

    /// Marks a wake-up as pending. Returns `true` when the caller must write the byte.
    mutating func requestWakeup() -> Bool {
        if self.isWakeupPending { return false }
        self.isWakeupPending = true
        return true
    }
}
