import Synchronization

/// Deterministic counts of what a loop did, for benchmarks and tests: they do not depend on the machine's load.
package struct LoopCounters: Sendable, Hashable {
    /// Bytes written to the wake-up pipe (at most one per drain, however many wake-ups were asked for).
    package var wakeUpWrites: UInt64
    /// Drains of the wake-up pipe (each one read until `EAGAIN`).
    package var wakeUpDrains: UInt64
    /// Calls to ppoll(2), blocking or not.
    package var waits: UInt64
    /// Calls to ppoll(2) that could block (a timeout other than zero).
    package var blockingWaits: UInt64

    /// The counts from `earlier` to `self`.
    package func since(_ earlier: LoopCounters) -> LoopCounters {
        LoopCounters(
            wakeUpWrites: self.wakeUpWrites &- earlier.wakeUpWrites,
            wakeUpDrains: self.wakeUpDrains &- earlier.wakeUpDrains,
            waits: self.waits &- earlier.waits,
            blockingWaits: self.blockingWaits &- earlier.blockingWaits
        )
    }
}

extension Loop {
    /// What the loop has done so far. Any thread; each figure is read atomically, the set is not a snapshot.
    package var counters: LoopCounters {
        LoopCounters(
            wakeUpWrites: self.wakeup.notifyCount.load(ordering: .relaxed),
            wakeUpDrains: self.wakeup.drainCount.load(ordering: .relaxed),
            waits: self.waitCounts.waits.load(ordering: .relaxed),
            blockingWaits: self.waitCounts.blockingWaits.load(ordering: .relaxed)
        )
    }
}

/// How many waits a loop made, and how many of them could block; written on the loop's thread, read from any.
final class WaitCounters: Sendable {
    let waits = Atomic<UInt64>(0)
    let blockingWaits = Atomic<UInt64>(0)
}
