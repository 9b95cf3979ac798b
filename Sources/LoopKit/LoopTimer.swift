import Synchronization

/// A callback that fires at a time, once or repeatedly, while its loop runs one of its modes.
///
/// A timer's first fire is at the loop's `now + interval` when it is first added to a loop (never at once), unless it
/// was created with a fire date. A repeating timer keeps its phase: its slots are `fireDate + n × interval` (the
/// interval in whole nanoseconds, a fraction rounded up, so `.seconds(1) / 3` runs 2 ns a second slow); after a
/// late fire (a busy loop, or a mode that was not running) it fires once and moves to the first slot after now,
/// skipping the missed ones, never replaying them. `tolerance` lets the loop delay a fire by up to that much so that
/// nearby timers share one wake-up; a timer never fires early. A timer in several modes fires once per slot; timers
/// with equal fire dates fire in the order they were added, where a repeating timer's next slot (or a moved date)
/// counts as added when the loop schedules it, as in CF. While its callback runs, the timer does not fire again,
/// even from a nested run.
///
/// A timer may be created on any thread. `invalidate()`, `isValid`, `fireDate`, `setNextFireDate(_:)` and `tolerance`
/// are safe from any thread. The callback runs on the loop's thread. A timer belongs to one loop.
// @unchecked Sendable: the `// MARK: Loop thread only` state is touched only on the loop's thread (the loop is the
// only caller); cross-thread state is in `schedule`, touched only under `scheduleLock`.
public final class LoopTimer: @unchecked Sendable {
    /// The timer's cross-thread state, and its tie to its loop, under one lock.
    struct Schedule {
        var isValid = true
        /// `nil` until added to a loop when the first fire is relative to "now".
        var fireDate: LoopInstant?
        var tolerance: Duration {
            didSet { self.toleranceNanoseconds = self.tolerance.nonNegativeNanoseconds }
        }
        /// `tolerance` in whole nanoseconds (rounded up), kept so that queuing a fire does no `Duration` arithmetic.
        private(set) var toleranceNanoseconds: UInt64
        /// Counts `setNextFireDate(_:)` calls, so that a fire can tell that its callback (or another thread)
        /// chose the next date itself.
        var fireDateVersion: UInt64 = 0
        var tie = LoopTie()
        /// Let go of when the timer becomes invalid (invalidated, or a one-shot timer that has fired), on whatever
        /// thread that happens: nothing it captures outlives the timer's last fire.
        var callback: ((LoopTimer) -> Void)?

        init(fireDate: LoopInstant?, tolerance: Duration, callback: @escaping (LoopTimer) -> Void) {
            self.fireDate = fireDate
            self.tolerance = tolerance
            self.toleranceNanoseconds = tolerance.nonNegativeNanoseconds
            self.callback = callback
        }

        /// Marks the timer invalid and takes its callback out, for the caller to let go of after the lock (a
        /// capture's deinit is user code).
        mutating func invalidate() -> ((LoopTimer) -> Void)? {
            self.isValid = false
            defer { self.callback = nil }
            return self.callback
        }

        /// The fire to queue: `nil` when invalid or without a date.
        var nextFire: NextFire? {
            guard self.isValid, let fireDate = self.fireDate else { return nil }
            return NextFire(deadline: fireDate.nanoseconds, tolerance: self.toleranceNanoseconds)
        }
    }

    /// At least the bytes of a timer object, for the fire loop's prefetch (`ModeTimers.prefetchDue`): its heap block
    /// holds 216 usable bytes on 64-bit Linux, and a test fails if a timer outgrows this.
    static let instanceBytes = 216

    /// The time between slots of a repeating timer; `.zero` for a one-shot timer created with a fire date.
    public let interval: Duration
    /// `interval` in whole nanoseconds (rounded up), so that finding the next slot does no `Duration` arithmetic.
    private let intervalNanoseconds: UInt64
    /// Whether the timer fires repeatedly.
    public let repeats: Bool

    /// Guards `schedule`. A lock word inside the timer, not a `LoopLock`: a loop may hold a million timers, and each
    /// fire takes this lock twice; in the timer's own allocation it costs neither a block nor a cache miss more.
    private let scheduleLock = WordLock()
    /// Only under `scheduleLock` (`withSchedule`). `@exclusivity(unchecked)`: the lock orders every access.
    @exclusivity(unchecked) private var schedule: Schedule
    /// The grid of a timer that fires on one of its own (a display link's); `nil` for an ordinary timer. A reference,
    /// so that an ordinary timer, of which a loop may hold millions, carries one word for it.
    let grid: TimerGrid?
    /// The re-arm from another thread on its way to the loop (`Loop.rescheduleTimer`), a `PendingRequeue`'s raw
    /// value. More re-arms queue nothing more; a new date raises `keepingPlace` to `fresh`.
    let pendingRequeue = Atomic<UInt8>(PendingRequeue.none.rawValue)

    /// What `pendingRequeue` holds, in rising order.
    enum PendingRequeue: UInt8 {
        case none
        /// Keeps the timer's place among equal dates (a new tolerance).
        case keepingPlace
        /// Queues it after them (a new date).
        case fresh
    }

    // MARK: Loop thread only
    // `@exclusivity(unchecked)`: touched on every pass, on the loop's thread only, never across a callout (see the
    // note in `Loop`).
    @exclusivity(unchecked) var modes: ModeSet = []
    @exclusivity(unchecked) var memberships = TimerMemberships()
    @exclusivity(unchecked) var sequence: UInt64 = 0
    @exclusivity(unchecked) var isFiring = false

    /// A timer that first fires `interval` after it is added to a loop.
    ///
    /// - Parameters:
    ///   - interval: The delay before the first fire, and the period of a repeating timer.
    ///   - repeats: Whether the timer fires every `interval` until invalidated.
    ///   - tolerance: How much later than its slot the loop may fire the timer, to share a wake-up; for a repeating
    ///     timer, at most half its interval (`tolerance`).
    ///   - callback: Runs on the loop's thread at each fire, with the timer.
    /// - Precondition: `interval` and `tolerance` are not negative; a repeating timer's `interval` is not zero.
    public convenience init(
        interval: Duration,
        repeats: Bool = false,
        tolerance: Duration = .zero,
        _ callback: @escaping @Sendable (LoopTimer) -> Void
    ) {
        self.init(firstFire: nil, interval: interval, repeats: repeats, tolerance: tolerance,
                  call: "LoopTimer(interval:repeats:tolerance:)", callback)
    }

    /// A timer that first fires `timeInterval` seconds after it is added to a loop (Foundation's spelling). An
    /// interval of 292 years or more is taken as `Int64.max` nanoseconds (some 292 years), as Foundation accepts it.
    ///
    /// - Precondition: `timeInterval` is a finite, non-negative number, not zero for a repeating timer; `tolerance`
    ///   is not negative.
    public convenience init(
        timeInterval: Double,
        repeats: Bool = false,
        tolerance: Duration = .zero,
        _ callback: @escaping @Sendable (LoopTimer) -> Void
    ) {
        let interval = Duration.checkedSeconds(timeInterval, call: "LoopTimer(timeInterval:repeats:tolerance:)")
        self.init(firstFire: nil, interval: interval, repeats: repeats, tolerance: tolerance,
                  call: "LoopTimer(timeInterval:repeats:tolerance:)", callback)
    }

    /// A timer that first fires at `fireDate`, then (if `repeats`) every `interval` on that grid.
    ///
    /// - Precondition: `interval` and `tolerance` are not negative; a repeating timer's `interval` is not zero.
    public convenience init(
        fireAt fireDate: LoopInstant,
        interval: Duration = .zero,
        repeats: Bool = false,
        tolerance: Duration = .zero,
        _ callback: @escaping @Sendable (LoopTimer) -> Void
    ) {
        self.init(firstFire: fireDate, interval: interval, repeats: repeats, tolerance: tolerance,
                  call: "LoopTimer(fireAt:interval:repeats:tolerance:)", callback)
    }

    /// A repeating timer whose slots come from `grid` (used by display links).
    init(grid: TimerGrid, interval: Duration, _ callback: @escaping @Sendable (LoopTimer) -> Void) {
        self.interval = interval
        self.intervalNanoseconds = interval.nonNegativeNanoseconds
        self.repeats = true
        self.schedule = Schedule(fireDate: nil, tolerance: .zero, callback: callback)
        self.grid = grid
    }

    private init(
        firstFire: LoopInstant?,
        interval: Duration,
        repeats: Bool,
        tolerance: Duration,
        call: StaticString,
        _ callback: @escaping @Sendable (LoopTimer) -> Void
    ) {
        loopPrecondition(interval >= .zero, "\(call): the interval is negative (\(interval))")
        loopPrecondition(!repeats || interval > .zero, "\(call): a repeating timer needs an interval greater than zero")
        loopPrecondition(tolerance >= .zero, "\(call): the tolerance is negative (\(tolerance))")
        // A one-shot timer with a date has no period: its interval is zero whatever was passed (as Foundation's).
        self.interval = firstFire != nil && !repeats ? .zero : interval
        self.intervalNanoseconds = self.interval.nonNegativeNanoseconds
        self.repeats = repeats
        self.schedule = Schedule(fireDate: firstFire, tolerance: .zero, callback: callback)
        self.grid = nil
        self.schedule.tolerance = self.acceptedTolerance(tolerance)
    }

    /// `tolerance` as the timer keeps it: for a repeating timer, at most half the interval, as CF's
    /// `CFRunLoopTimerSetTolerance` caps it. A larger one would let a wake-up for another timer inside this one's
    /// window come after the timer's next slots, which would then never fire.
    private func acceptedTolerance(_ tolerance: Duration) -> Duration {
        self.repeats ? min(tolerance, self.interval / 2) : tolerance
    }

    /// Runs `body` with the schedule, under its lock. Any thread; `body` must not call user code or take the lock
    /// again.
    @inline(__always)
    private func withSchedule<Result>(_ body: (inout Schedule) -> Result) -> Result {
        self.scheduleLock.withLock { body(&self.schedule) }
    }

    /// Whether the timer can still fire. Any thread.
    public var isValid: Bool {
        self.withSchedule { $0.isValid }
    }

    /// The next fire date; `nil` for an interval timer not yet added to a loop. Any thread.
    public var fireDate: LoopInstant? {
        self.withSchedule { $0.fireDate }
    }

    /// How late the loop may fire the timer to share a wake-up with nearby timers. Any thread.
    ///
    /// A repeating timer keeps at most half its interval (and reads back what it kept), as CF does: a larger tolerance
    /// could delay a fire past the timer's next slots.
    ///
    /// - Precondition: Not negative.
    public var tolerance: Duration {
        get { self.withSchedule { $0.tolerance } }
        set {
            loopPrecondition(newValue >= .zero, "LoopTimer.tolerance: the tolerance is negative (\(newValue))")
            let newValue = self.acceptedTolerance(newValue)
            // The loop, taken with the change: an invalidated timer is in no mode, and waking its loop would only
            // make an empty pass.
            let loop = self.withSchedule { schedule -> Loop? in
                defer { schedule.tolerance = newValue }
                return newValue != schedule.tolerance && schedule.isValid ? schedule.tie.loop : nil
            }
            // Re-queued so that the next wake uses it, in its place among timers of the same date: unlike a new date,
            // a tolerance does not re-sort a timer (nor does CF's CFRunLoopTimerSetTolerance).
            loop?.rescheduleTimer(self, keepingPlace: true)
        }
    }

    /// Moves the next fire to `date`; a repeating timer's later slots follow from it. Any thread.
    ///
    /// Called from the timer's own callback, it replaces the slot the timer would have moved to (a one-shot timer
    /// then fires again at `date`). A date in the past fires on the loop's next pass.
    public func setNextFireDate(_ date: LoopInstant) {
        let loop = self.withSchedule { schedule in
            schedule.fireDate = date
            schedule.fireDateVersion &+= 1
            return schedule.isValid ? schedule.tie.loop : nil
        }
        loop?.rescheduleTimer(self)
    }

    /// Stops the timer for good and removes it from every mode. Any thread, the timer's own callback included.
    ///
    /// The timer lets go of its callback, and of what the callback captured, before this returns (a call already
    /// under way on the loop's thread finishes). Invalidating an invalid timer does nothing.
    public func invalidate() {
        let (loop, released) = self.withSchedule { schedule in
            let loop = schedule.isValid ? schedule.tie.loop : nil
            return (loop, schedule.invalidate())
        }
        withExtendedLifetime(released) {}  // let go of here, after the lock
        loop?.detachEverywhere(self)
    }

    /// Makes the next addition to a loop choose the first fire date again, if the timer belongs to no loop (display
    /// links resumed before joining one); otherwise returns the loop, and keeps the date. Any thread.
    ///
    /// One lock round trip: a timer that has joined a loop has an entry queued at its date, which only a move
    /// (`setNextFireDate`, which re-arms it) may change; a forgotten date would leave the entry unfired for good.
    func forgetFireDateUnlessBound() -> Loop? {
        self.withSchedule { schedule in
            if let loop = schedule.tie.loop { return loop }
            schedule.fireDate = nil
            return nil
        }
    }

    // MARK: Used by the loop (loop thread)

    /// Forgets the modes of a loop that is going away, without callbacks. Loop thread, or the loop's deinit.
    func forgetModes() {
        self.modes = []
        self.memberships = TimerMemberships()
        self.grid?.retainedServedObject = nil
    }

    /// Fixes a relative first fire date against `now`, on the first addition to a loop (any thread). The clock is read
    /// only for a timer that has no date yet (an add costs no clock read otherwise), and outside the lock: a clock is
    /// user code.
    ///
    /// - Returns: The date it fixed, or `nil` if the timer had one already.
    @discardableResult
    func resolveFireDate(now: () -> LoopInstant) -> LoopInstant? {
        guard self.withSchedule({ $0.fireDate == nil }) else { return nil }
        let now = now()
        return self.withSchedule { schedule in
            guard schedule.fireDate == nil else { return nil }
            let date = self.grid?.nextSlot(nil, now) ?? now + self.interval
            schedule.fireDate = date
            return date
        }
    }

    /// Undoes `resolveFireDate` for an add that `loop` refused (it ended meanwhile): the add that takes the timer
    /// fixes the date then. Kept if the date changed since, or another loop has taken the timer (its entry is queued
    /// at that date, which a forgotten date would leave unfired for good). Any thread.
    func forgetFireDate(_ resolved: LoopInstant, refusedBy loop: Loop) {
        // Released after the lock: were it the last reference to that loop, its deinit would take this lock.
        var tied: Loop?
        self.withSchedule { schedule in
            tied = schedule.tie.loop
            if schedule.fireDate == resolved, tied == nil || tied === loop {
                schedule.fireDate = nil
            }
        }
        withExtendedLifetime(tied) {}
    }

    /// A fire to queue: its date and tolerance, in nanoseconds.
    struct NextFire {
        let deadline: UInt64
        let tolerance: UInt64
    }

    /// What the loop does with a timer whose callback has run.
    enum AfterFire {
        /// Nothing more: a one-shot timer, or one invalidated (by its callback or another thread). Detach it.
        case done
        /// Queue it again in its modes, at `next` (`nil`: it has no date, queue nothing until one is set).
        case requeue(at: NextFire?)
    }

    /// The fire to queue, or `nil` for none (invalidated, or no date yet). Loop thread.
    func nextFire() -> NextFire? {
        self.withSchedule { $0.nextFire }
    }

    /// Whether the timer fires now for its entry at `deadline`, and if so for which slot, with the version of its fire
    /// date and the callback (for `fire(_:clock:)`). As CF checks a timer's date again before its callout, a date
    /// another thread moved since the entry was queued decides, not the entry: a moved date still due at `now` fires
    /// now, for its own slot; one in the future waits for the move's re-arm, on its way to the loop (firing the entry
    /// would run a callback the user moved away, then overwrite the new date with the old grid's next slot). `nil` for
    /// a timer invalidated since, or moved to the future. One lock round trip. Loop thread.
    func beginFire(deadline: UInt64, now: UInt64) -> Firing? {
        self.withSchedule { schedule in
            guard schedule.isValid, let callback = schedule.callback, let date = schedule.fireDate,
                  date.nanoseconds == deadline || date.nanoseconds <= now else { return nil }
            return Firing(slot: date, version: schedule.fireDateVersion, callback: callback)
        }
    }

    /// A fire that `beginFire(deadline:now:)` let happen. The callback is the loop's own reference: another thread
    /// may invalidate the timer, letting go of the timer's, while it runs.
    struct Firing {
        let slot: LoopInstant
        let version: UInt64
        let callback: (LoopTimer) -> Void
    }

    /// Runs the callback for the firing's slot, then works out the next fire date, in the same lock round trip that
    /// reads it for the queues. Loop thread.
    func fire(_ firing: Firing, clock: any LoopClock) -> AfterFire {
        let slot = firing.slot
        if let grid = self.grid {
            grid.firingSlot = slot
            grid.firingNow = clock.now
            grid.followingSlot = nil
        }
        self.isFiring = true
        firing.callback(self)
        self.isFiring = false
        // Read before the lock (a clock is user code), and only for a next slot: a one-shot fire reads no clock.
        let now = self.repeats ? clock.now : nil
        var released: ((LoopTimer) -> Void)?
        defer { withExtendedLifetime(released) {} }  // a one-shot timer's callback, let go of after the lock
        return self.withSchedule { schedule in
            guard schedule.isValid else { return .done }
            if schedule.fireDateVersion != firing.version { return .requeue(at: schedule.nextFire) }
            guard let now else {  // a one-shot timer
                released = schedule.invalidate()
                return .done
            }
            schedule.fireDate = self.grid?.slot(after: slot, now: now)
                ?? LoopTimer.nextSlot(after: slot, step: self.intervalNanoseconds, now: now)
            return .requeue(at: schedule.nextFire)
        }
    }

    /// The first slot of the grid `slot + n × step` (n ≥ 1, `step` in nanoseconds) that is after `now`: missed
    /// slots are skipped.
    static func nextSlot(after slot: LoopInstant, step: UInt64, now: LoopInstant) -> LoopInstant {
        var next = slot.nanoseconds.addingClamped(step)
        if next <= now.nanoseconds, step > 0, next != .max {
            let missed = (now.nanoseconds - next) / step + 1
            let (jump, overflow) = missed.multipliedReportingOverflow(by: step)
            next = overflow ? .max : next.addingClamped(jump)
        }
        return LoopInstant(nanoseconds: next)
    }
}

extension LoopTimer: LoopItem {
    static var kind: String { "LoopTimer" }

    /// Holds the grid's served object (a display link) while the timer is scheduled: in a mode, or in its loop's common
    /// items even in no mode (a link removed by name from each real mode stays common, as in CF, and a mode added to
    /// the common set later brings it in); lets go of it otherwise. Called after the change, by every join and leave.
    private func holdServedObjectWhileScheduled(loop: Loop) {
        guard let grid = self.grid else { return }
        if !self.modes.isEmpty || loop.commonItems[ObjectIdentifier(self)] != nil {
            if grid.retainedServedObject == nil {
                grid.retainedServedObject = grid.servedObject  // alive: being added (see `TimerGrid.servedObject`)
            }
        } else {
            grid.retainedServedObject = nil
        }
    }

    func commonMembershipDidChange(isCommon: Bool, loop: Loop) {
        self.holdServedObjectWhileScheduled(loop: loop)
    }

    /// The old loop's slots mean nothing here: its mode indexes would point into this loop's tables. (Its teardown
    /// forgets them; one that left the timer alone, tied here first, did not.)
    func forgetPreviousLoop() {
        self.memberships = TimerMemberships()
    }

    func withTie<Result>(_ body: (inout LoopTie) -> Result) -> Result {
        self.withSchedule { body(&$0.tie) }
    }

    func attach(to items: ModeItems, loop: Loop) {
        self.resolveFireDate { loop.now }  // normally done by `Loop.add` already, on the calling thread
        self.pendingRequeue.store(PendingRequeue.none.rawValue, ordering: .relaxed)  // a re-arm lost with an ended loop must not block these
        self.holdServedObjectWhileScheduled(loop: loop)
        if self.modes.count == 1, let grid = self.grid {
            grid.hasJoinedAModeFromNone = true  // a display link (back) in a mode, from none: see `HitchMonitor`
        }
        let slot = items.timers.add(self)
        self.memberships.append(modeIndex: items.index, slot: slot)
        items.timers.schedule(slot: slot, at: self.nextFire())
    }

    func detach(from items: ModeItems, loop: Loop) {
        self.holdServedObjectWhileScheduled(loop: loop)
        guard let slot = self.memberships.remove(modeIndex: items.index) else { return }
        items.timers.remove(slot: slot)
    }
}
