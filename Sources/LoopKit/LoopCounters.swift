import Synchronization

/// Deterministic counts of what a loop did, for benchmarks and tests: they do not depend on the machine's load. (One
/// exception: a large mode's wait that may last more than 100 ms after the loop woke is cut in two, and counts one
/// more wait and one look when the loop stays idle that long, for its idle sweep; see `LoopDescriptorSource`.)
package struct LoopCounters: Sendable, Hashable {
    /// Wake-ups sent: bytes written to the wake-up pipe, or wakes of the futex (one per wait at most, however many
    /// wake-ups were asked for; a futex wake-up sent late, after its wait ended, may be taken by the same drain as
    /// the next one).
    package var wakeUpWrites: UInt64
    /// Wake-ups taken: drains of the wake-up pipe (each one read until `EAGAIN`), or notes of the futex word.
    package var wakeUpDrains: UInt64
    /// Waits: ppoll(2), poll(2) and epoll_wait(2) calls, blocking or not, and futex sleeps (one however many times a
    /// signal interrupts it; none made when the deadline has passed). Naps (`processorNaps`) are not counted.
    package var waits: UInt64
    /// Waits that could block (a timeout other than zero).
    package var blockingWaits: UInt64
    /// Passes that woke from a sleep and then had nothing to do: no timer, source, block, stop or deadline. Only a
    /// wake-up for work in a mode that is not running makes one.
    package var emptyWakeUps: UInt64 = 0
    /// Processors offered to other threads before a blocking wait (sched_yield(2)): a wait on descriptors that
    /// follows one that found descriptor sources ready offers it once, or naps instead, unless it would end within
    /// `PollWaiter.offerLead` (see `PollWaiter`).
    package var processorOffers: UInt64 = 0
    /// Naps taken instead of offers, after two offers close together that each kept the processor away
    /// `PollWaiter.stallThreshold` or longer (see `PollWaiter`).
    package var processorNaps: UInt64 = 0

    /// The counts from `earlier` to `self`.
    package func since(_ earlier: LoopCounters) -> LoopCounters {
        LoopCounters(
            wakeUpWrites: self.wakeUpWrites &- earlier.wakeUpWrites,
            wakeUpDrains: self.wakeUpDrains &- earlier.wakeUpDrains,
            waits: self.waits &- earlier.waits,
            blockingWaits: self.blockingWaits &- earlier.blockingWaits,
            emptyWakeUps: self.emptyWakeUps &- earlier.emptyWakeUps,
            processorOffers: self.processorOffers &- earlier.processorOffers,
            processorNaps: self.processorNaps &- earlier.processorNaps
        )
    }
}

extension Loop {
    /// What the loop has done so far. Any thread; each figure is read atomically, the set is not a snapshot.
    package var counters: LoopCounters {
        let counts = self.waiter.counts
        return LoopCounters(
            wakeUpWrites: self.state.withLock { $0.wakeUpsSent },
            wakeUpDrains: counts.wakeUpDrains.load(ordering: .relaxed),
            waits: counts.waits.load(ordering: .relaxed),
            blockingWaits: counts.blockingWaits.load(ordering: .relaxed),
            emptyWakeUps: self.emptyWakeUps.load(ordering: .relaxed),
            processorOffers: counts.processorOffers.load(ordering: .relaxed),
            processorNaps: counts.processorNaps.load(ordering: .relaxed)
        )
    }
}
