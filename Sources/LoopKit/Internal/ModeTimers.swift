/// The timers of one mode: a slot table that holds each timer once, and a queue of plain entries that name slots.
///
/// Adding a timer to the mode takes a slot; scheduling it pushes an entry with a fresh `push` number; removing it
/// frees the slot at once, which makes every entry it had stale and lets go of the timer (and of its closure)
/// immediately, whatever the queue still holds. The queue is rebuilt once stale entries outnumber live timers, so
/// re-arming a timer many times cannot grow it without bound. Loop thread only.
struct ModeTimers {
    /// A slot of the table: a timer of the mode, and the `push` of its live entry.
    struct Slot {
        var timer: LoopTimer?
        /// 0 for a free slot or a timer with no fire date.
        var push: UInt64
    }

    /// The slot table. A timer and its push side by side, so that a fire (and a burst's liveness check) reads one
    /// place of the table, not one in each of two arrays: a million timers fire in no order in memory.
    private var slots: [Slot] = []
    private var freeSlots: [Int32] = []
    private var lastPush: UInt64 = 0
    private(set) var queue = TimerQueue()
    /// The number of timers in the mode.
    private(set) var count = 0
    /// The due entries a pass took from `queue`, fired in order up to `nextDue` (see `Loop.fireDueTimers`).
    var due: [TimerEntry] = []
    var nextDue = 0

    /// Takes a slot for `timer`.
    ///
    /// - Complexity: O(1) amortized.
    mutating func add(_ timer: LoopTimer) -> Int32 {
        self.count += 1
        if let slot = self.freeSlots.popLast() {
            self.slots[Int(slot)] = Slot(timer: timer, push: 0)
            return slot
        }
        self.slots.append(Slot(timer: timer, push: 0))
        return Int32(self.slots.count - 1)
    }

    /// Frees `slot`, releasing its timer now; its queue entries become stale.
    ///
    /// - Complexity: O(1) amortized (a compaction, O(*n*), runs at most once per *n* removals).
    mutating func remove(slot: Int32) {
        let index = Int(slot)
        self.slots[index] = Slot(timer: nil, push: 0)
        self.freeSlots.append(slot)
        self.count -= 1
        self.compactIfMostlyStale()
    }

    /// How far apart the pushes of two schedulings are. The numbers between are for a timer queued again in its place
    /// (`keepingPlace`): its new entry sorts where its old one did among equal deadlines, before every later
    /// scheduling. After `pushStep - 1` such re-queues in a row the timer takes a fresh push.
    static let pushStep: UInt64 = 256

    /// Queues a fire of the timer in `slot` at `deadline`; any earlier entry of the slot becomes stale.
    ///
    /// - Parameter keepingPlace: Keep the place the slot's live entry has among equal deadlines (a new tolerance,
    ///   not a new date), instead of going after every entry scheduled so far.
    /// - Complexity: O(log *n*).
    mutating func schedule(slot: Int32, deadline: UInt64, tolerance: UInt64, keepingPlace: Bool = false) {
        let current = self.slots[Int(slot)].push
        let push: UInt64
        if keepingPlace && current != 0 && current % Self.pushStep != Self.pushStep - 1 {
            push = current + 1
        } else {
            self.lastPush &+= Self.pushStep
            push = self.lastPush
        }
        self.slots[Int(slot)].push = push
        self.queue.insert(TimerEntry(deadline: deadline, push: push, tolerance: tolerance, slot: slot))
        self.compactIfMostlyStale()
    }

    /// Queues the timer in `slot` at `next`, or, for `nil` (invalid, or no date yet), makes its entries stale.
    mutating func schedule(slot: Int32, at next: LoopTimer.NextFire?, keepingPlace: Bool = false) {
        if let next {
            self.schedule(slot: slot, deadline: next.deadline, tolerance: next.tolerance, keepingPlace: keepingPlace)
        } else {
            self.unschedule(slot: slot)
        }
    }

    /// Makes the slot's entries stale without freeing it (a timer with no next fire).
    mutating func unschedule(slot: Int32) {
        self.slots[Int(slot)].push = 0
    }

    /// Whether `entry` still stands for its slot's next fire in `slots` (a copy of the table, so that the queue can
    /// be changed while it is read).
    @inline(__always)
    private static func isLive(_ entry: TimerEntry, in slots: [Slot]) -> Bool {
        slots[Int(entry.slot)].push == entry.push
    }

    /// The timer `entry` stands for, if the entry is live.
    func timer(for entry: TimerEntry) -> LoopTimer? {
        let slot = self.slots[Int(entry.slot)]
        return slot.push == entry.push ? slot.timer : nil
    }

    /// Every timer in the mode, in slot order.
    var allTimers: [LoopTimer] {
        self.slots.compactMap(\.timer)
    }

    /// The instant to wake for the earliest timers (coalesced within their tolerances), or `nil` without any.
    mutating func nextWake() -> UInt64? {
        self.earliest(coalescedWithinTolerances: true)
    }

    /// The earliest fire date of a timer that can fire (Foundation's `limitDate(forMode:)`), or `nil` without any.
    /// Not coalesced: a timer due before a later one's tolerance ends is still due at its own date.
    mutating func nextFireDate() -> UInt64? {
        self.earliest(coalescedWithinTolerances: false)
    }

    /// The earliest deadline, or the wake-up that covers the earliest timers within their tolerances.
    ///
    /// Only entries that can fire count, so that every wake-up has a fire to make: not stale ones, and not those of a
    /// timer whose callback is running (this is a run nested in it): that timer cannot fire before its callback
    /// returns, and then it is queued afresh in every mode (or leaves them all), so its entries are stale by then and
    /// may be dropped now. The same holds for what is left of an outer pass's batch.
    private mutating func earliest(coalescedWithinTolerances: Bool) -> UInt64? {
        // The usual waits: no outer batch left, and no timer at all (a mode of sources), or the earliest entry
        // waitable, with no tolerance to coalesce within. Decided in place, without the copy of the table and the
        // closure the general case below needs.
        guard self.nextDue < self.due.count || !self.queue.isEmpty else { return nil }
        if self.nextDue >= self.due.count, let first = self.queue.first,
           !coalescedWithinTolerances || first.tolerance == 0,
           self.slots[Int(first.slot)].push == first.push, self.slots[Int(first.slot)].timer?.isFiring == false {
            return first.deadline
        }
        let slots = self.slots
        let isWaitable = { (entry: TimerEntry) in
            Self.isLive(entry, in: slots) && slots[Int(entry.slot)].timer?.isFiring != true
        }
        if self.nextDue < self.due.count,
           let entry = self.due[self.nextDue...].first(where: isWaitable) {  // an outer pass's batch: do not sleep
            return entry.deadline
        }
        self.queue.dropStaleTop(isLive: isWaitable)
        return coalescedWithinTolerances
            ? self.queue.coalescedWakeTime(isLive: isWaitable)
            : self.queue.first?.deadline
    }

    /// Takes the earliest entry, with its timer, when it is live and the only one due at `now`: the usual fire (a
    /// repeating timer's slot, a display link's frame), which needs no batch. `nil` otherwise, with the queue as it
    /// was.
    @inline(__always)
    mutating func takeOnlyDue(at now: UInt64) -> (entry: TimerEntry, timer: LoopTimer)? {
        guard self.nextDue >= self.due.count, let first = self.queue.first, first.deadline <= now,
              !self.queue.hasSecondDue(at: now), self.slots[Int(first.slot)].push == first.push,
              let timer = self.slots[Int(first.slot)].timer else {
            return nil
        }
        self.queue.removeFirst()
        return (first, timer)
    }

    /// Takes every entry due at `now` from the queue into `batch`, earliest first, keeping only live ones.
    mutating func takeDue(at now: UInt64, into batch: inout [TimerEntry]) {
        let slots = self.slots
        self.queue.removeDue(at: now, into: &batch) { Self.isLive($0, in: slots) }
        self.queue.checkInvariants()
    }

    /// Takes the next entry of the due batch (counted as taken before its timer fires), with its timer while the
    /// entry is live, and starts loading what the entries after it will touch. `nil` once the batch is fired.
    ///
    /// One mutating call, so that the fire loop works on the mode's timers in place: non-mutating calls through
    /// the mode's `timers` property copied the whole struct (a retain and a release of each of its arrays) per fire.
    mutating func takeNextDue() -> (entry: TimerEntry, timer: LoopTimer?)? {
        guard self.nextDue < self.due.count else { return nil }
        let entry = self.due[self.nextDue]
        self.prefetchDue(after: self.nextDue)
        self.nextDue += 1
        return (entry, self.timer(for: entry))
    }

    /// Starts loading, a few entries ahead of the fire loop at `index` in `due`, what firing them will touch.
    ///
    /// A large batch fires in date order, which is no order in memory: each timer's slot and object would be a cache
    /// miss in turn, one waiting for the other. This asks for them in stages, each reading only what an earlier stage
    /// brought in: the slot three entries ahead, the timer object (its schedule and lock included) two
    /// ahead. The slot is read afresh at each stage, so a timer that a callback removed meanwhile is never touched.
    private func prefetchDue(after index: Int) {
        guard index + 1 < self.due.count else { return }  // the last (or only) entry of a batch: nothing ahead
        self.due.withUnsafeBufferPointer { due in
            self.slots.withUnsafeBufferPointer { slots in
                guard let slotBase = UnsafeRawPointer(slots.baseAddress) else { return }
                let slotStride = MemoryLayout<Slot>.stride
                if index + 3 < due.count {
                    Prefetch.forReading(slotBase + Int(due[index + 3].slot) * slotStride)
                }
                if index + 2 < due.count {
                    let slot = slotBase + Int(due[index + 2].slot) * slotStride
                    // The reference's bits, not the reference: loading it would retain, touching the object.
                    if let object = slot.load(fromByteOffset: Self.timerOffset, as: UnsafeRawPointer?.self) {
                        // Every line from the one the object starts in through its last byte: malloc aligns it to
                        // 16 bytes, not to a line.
                        let misalignment = Int(bitPattern: object) & 63
                        for offset in stride(from: 0, to: misalignment + LoopTimer.instanceBytes, by: 64) {
                            Prefetch.forWriting(object - misalignment + offset)
                        }
                    }
                }
            }
        }
    }

    /// Where a slot keeps its timer reference.
    private static let timerOffset = MemoryLayout<Slot>.offset(of: \Slot.timer)!

    private mutating func compactIfMostlyStale() {
        guard self.queue.count > 64, self.queue.count > 2 * self.count else { return }
        let slots = self.slots
        self.queue.compact { Self.isLive($0, in: slots) }
    }
}
