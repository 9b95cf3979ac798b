/// One scheduled fire of a timer in one mode's queue: plain values, no reference to the timer.
///
/// Entries are never updated in place: rescheduling a timer gives its slot a new `push` number and pushes a fresh
/// entry, and an entry whose `push` no longer matches its slot's (the timer was rescheduled, left the mode or was
/// invalidated) is stale, and is dropped when it reaches the top or when the queue is compacted. Since an entry holds
/// no reference, a stale one keeps nothing alive: the slot table (`ModeTimers`) holds the only reference, and lets go
/// of it as soon as the timer leaves the mode.
struct TimerEntry {
    var deadline: UInt64
    /// Which scheduling of the slot this entry stands for; it grows with every scheduling in the mode, so equal
    /// deadlines fire in the order they were (re)scheduled, as in CF and libuv; a timer queued again in its place (a
    /// new tolerance) takes the number after its own (`ModeTimers.pushStep`).
    var push: UInt64
    var tolerance: UInt64
    var slot: Int32

    @inline(__always)
    static func precedes(_ lhs: TimerEntry, _ rhs: TimerEntry) -> Bool {
        (lhs.deadline, lhs.push) < (rhs.deadline, rhs.push)
    }
}

/// A binary min-heap of timer entries ordered by `(deadline, push)`. Loop thread only.
struct TimerQueue {
    private(set) var entries: [TimerEntry] = []

    var isEmpty: Bool { self.entries.isEmpty }
    var count: Int { self.entries.count }

    /// The earliest entry, live or stale.
    ///
    /// - Complexity: O(1).
    var first: TimerEntry? { self.entries.first }

    /// - Complexity: O(log *n*).
    mutating func insert(_ entry: TimerEntry) {
        self.entries.append(entry)
        self.siftUp(self.entries.count - 1)
    }

    /// - Complexity: O(log *n*).
    @discardableResult
    mutating func removeFirst() -> TimerEntry {
        loopPrecondition(!self.entries.isEmpty, "LoopKit bug: removeFirst on an empty timer queue")
        let first = self.entries[0]
        let last = self.entries.removeLast()
        if !self.entries.isEmpty {
            self.entries[0] = last
            self.siftDown(0)
        }
        return first
    }

    /// Whether an entry besides the first is due at `now` (the second in order is a child of the root).
    func hasSecondDue(at now: UInt64) -> Bool {
        (self.entries.count > 1 && self.entries[1].deadline <= now)
            || (self.entries.count > 2 && self.entries[2].deadline <= now)
    }

    /// Takes every entry due at `now` out of the queue, appending the live ones to `batch` in `(deadline, push)`
    /// order; stale ones are dropped.
    ///
    /// Due entries are popped one by one until they turn out to be a burst (more than a 64th of a large queue, as
    /// after a long sleep, or a million timers all past their dates); the rest are then taken in one pass: one
    /// sequential scan splits due from later entries, the later ones are heapified again, and the live due ones are
    /// sorted in place after those already popped (which precede them all; their keys are unique, so the sort need
    /// not be stable). Popping a burst costs a sift through the whole heap
    /// per entry, at a million entries a chain of cache misses each, and half of the pops may be for stale entries.
    /// Deciding costs nothing: popping, the usual case, allocates nothing beyond `batch`.
    ///
    /// - Complexity: O(*k* log *n*) for *k* due entries, or O(*n* + *k* log *k*) for a burst.
    mutating func removeDue(at now: UInt64, into batch: inout [TimerEntry], isLive: (TimerEntry) -> Bool) {
        let burstAfter = self.entries.count >= Self.burstMinimumCount ? self.entries.count / 64 : Int.max
        var popped = 0
        while let entry = self.entries.first, entry.deadline <= now {
            if popped == burstAfter {
                self.removeDueBurst(at: now, into: &batch, isLive: isLive)
                return
            }
            self.removeFirst()
            popped += 1
            if isLive(entry) {
                batch.append(entry)
            }
        }
    }

    /// Below this many entries, due entries are always popped one by one (the heap is in cache).
    static let burstMinimumCount = 4_096

    /// The burst path of `removeDue`: one scan, a heapify of what stays, a sort of what leaves.
    private mutating func removeDueBurst(at now: UInt64, into batch: inout [TimerEntry],
                                         isLive: (TimerEntry) -> Bool) {
        let start = batch.count
        // Room for every entry at once: appends that outgrow the batch copy it to a larger block, and each copy
        // writes fresh pages. Capacity that stays unused is never touched, so it costs no pages.
        batch.reserveCapacity(start + self.entries.count)
        var kept = 0
        self.entries.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices {
                let entry = buffer[index]
                if entry.deadline > now {
                    buffer[kept] = entry
                    kept += 1
                } else if isLive(entry) {
                    batch.append(entry)
                }
            }
        }
        self.entries.removeLast(self.entries.count - kept)
        self.heapify()
        // In place, with no scratch buffer (see `sortUnstably`).
        batch.withUnsafeMutableBufferPointer { batch in
            UnsafeMutableBufferPointer(rebasing: batch[start...]).sortUnstably(by: TimerEntry.precedes)
        }
    }

    /// Drops stale entries from the top, so that `first` is live or the queue is empty.
    ///
    /// - Complexity: O(*k* log *n*) for *k* stale entries on top.
    mutating func dropStaleTop(isLive: (TimerEntry) -> Bool) {
        while let first = self.entries.first, !isLive(first) {
            self.removeFirst()
        }
    }

    /// Rebuilds the heap from its live entries, letting the storage shrink.
    ///
    /// - Complexity: O(*n*).
    mutating func compact(isLive: (TimerEntry) -> Bool) {
        var live: [TimerEntry] = []
        live.reserveCapacity(self.entries.count / 2)
        for entry in self.entries where isLive(entry) {
            live.append(entry)
        }
        self.entries = live
        self.heapify()
    }

    /// Restores the heap property over all entries (Floyd's bottom-up construction).
    ///
    /// - Complexity: O(*n*).
    private mutating func heapify() {
        var index = self.entries.count / 2
        while index > 0 {
            index -= 1
            self.siftDown(index)
        }
    }

    /// The instant to wake for the earliest timers, delayed within their tolerances to serve several at once.
    ///
    /// The latest allowed wake is the smallest `deadline + tolerance` among the timers due before it; waking at the
    /// latest deadline that is not after that instant serves all of them with one wake-up and makes none of them
    /// later than its tolerance allows. Only entries with deadlines inside the window are visited (a heap subtree
    /// whose root is past the window is skipped), at most `budget` of them; past the budget, the earliest deadline
    /// is returned, which is always correct, merely uncoalesced.
    ///
    /// - Precondition: `dropStaleTop(isLive:)` was called, so the first entry is live.
    /// - Complexity: O(*k*), *k* ≤ `budget` entries inside the tolerance window.
    func coalescedWakeTime(budget: Int = 64, isLive: (TimerEntry) -> Bool) -> UInt64? {
        guard let first = self.entries.first else { return nil }
        // Short of `.max`, the deadline of a parked entry (a paused display link, a date in the distant future): a
        // window that saturates would take it in and return `.max`, which reads as "no timer" while one is due.
        var windowEnd = min(first.deadline.addingClamped(first.tolerance), .max - 1)
        if windowEnd <= first.deadline { return first.deadline }
        var remaining = budget
        var exhausted = false

        func narrow(_ index: Int) {
            guard index < self.entries.count, !exhausted else { return }
            let entry = self.entries[index]
            guard entry.deadline <= windowEnd else { return }
            guard remaining > 0 else {
                exhausted = true
                return
            }
            remaining -= 1
            if isLive(entry) {
                windowEnd = min(windowEnd, entry.deadline.addingClamped(entry.tolerance))
            }
            narrow(2 * index + 1)
            narrow(2 * index + 2)
        }
        narrow(0)
        if exhausted { return first.deadline }

        var wake = first.deadline
        func latestInside(_ index: Int) {
            guard index < self.entries.count else { return }
            let entry = self.entries[index]
            guard entry.deadline <= windowEnd else { return }
            if entry.deadline > wake, isLive(entry) {
                wake = entry.deadline
            }
            latestInside(2 * index + 1)
            latestInside(2 * index + 2)
        }
        latestInside(0)
        return wake
    }

    private mutating func siftUp(_ start: Int) {
        self.entries.withUnsafeMutableBufferPointer { buffer in
            var child = start
            let entry = buffer[child]
            while child > 0 {
                let parent = (child - 1) / 2
                guard TimerEntry.precedes(entry, buffer[parent]) else { break }
                buffer[child] = buffer[parent]
                child = parent
            }
            buffer[child] = entry
        }
    }

    private mutating func siftDown(_ start: Int) {
        self.entries.withUnsafeMutableBufferPointer { buffer in
            let count = buffer.count
            var parent = start
            let entry = buffer[parent]
            while true {
                let left = 2 * parent + 1
                guard left < count else { break }
                let right = left + 1
                var child = left
                if right < count, TimerEntry.precedes(buffer[right], buffer[left]) {
                    child = right
                }
                guard TimerEntry.precedes(buffer[child], entry) else { break }
                buffer[parent] = buffer[child]
                parent = child
            }
            buffer[parent] = entry
        }
    }

    /// Checks the heap property (debug builds only).
    func checkInvariants() {
        #if DEBUG
        for index in 1..<max(self.entries.count, 1) {
            let parent = (index - 1) / 2
            assert(!TimerEntry.precedes(self.entries[index], self.entries[parent]),
                   "timer heap out of order at \(index)")
        }
        #endif
    }
}
