/// The timer phase of a pass.
extension Loop {
    /// The instant to wake for the mode's timers (coalesced within their tolerances), or `nil` without a timer that
    /// can fire: a timer at `.distantFuture` never does (see `fireDueTimers`), so a host's driver must not be told to
    /// wake for it once a virtual clock has got there.
    func nextTimerWake(in items: ModeItems) -> LoopInstant? {
        guard let wake = items.timers.nextWake(), wake != UInt64.max else { return nil }
        return LoopInstant(nanoseconds: wake)
    }

    /// Fires every timer of the mode due at `now`, earliest first (equal dates in the order added).
    ///
    /// All due timers are taken from the queue before any callback runs, so a timer added or moved by a callback waits
    /// for the next pass. The batch is kept on the mode (`due`, fired up to `nextDue`), so that a callback which runs
    /// the loop nested in this mode does not hold the rest back: the nested run fires them first, on their slots,
    /// and this batch finds them gone. A run nested in another mode fires a timer of both modes from its own queue,
    /// which reschedules it everywhere and makes this batch's entry stale, so it is skipped. A timer whose date another
    /// thread moved since the batch was taken fires for its new date if that is due, and is skipped otherwise: the
    /// move's re-arm is on its way (`LoopTimer.beginFire(deadline:now:)`).
    ///
    /// A timer at `.distantFuture` is never due, not even once a virtual clock has got there: that date means never
    /// (CF's way to park a timer, and where a grid whose next slot saturates ends up).
    func fireDueTimers(in items: ModeItems, now: LoopInstant) {
        let now = now == .distantFuture ? LoopInstant(nanoseconds: UInt64.max - 1) : now
        // Fired first: an outer pass's batch (this is a run nested in one of its callbacks), due before anything else.
        self.fireUnfiredDueTimers(of: items, now: now)
        guard let first = items.timers.queue.first, first.deadline <= now.nanoseconds else { return }
        // One due entry, the usual case: fired straight from the queue. A run nested in its callback finds no batch
        // left behind, as it would find this one fired to its end.
        if let (entry, timer) = items.timers.takeOnlyDue(at: now.nanoseconds) {
            self.fire(timer, for: entry, now: now)
            return
        }
        // The loop's scratch buffer, taken so that a run nested in a callback gets (and allocates) its own.
        var due = self.dueTimersScratch
        self.dueTimersScratch = []
        items.timers.takeDue(at: now.nanoseconds, into: &due)
        // Any earlier batch was fired to its end above: this one takes its place.
        items.timers.due = due
        items.timers.nextDue = 0
        due = []
        self.fireUnfiredDueTimers(of: items, now: now)
        // The batch's buffer, kept for the next pass, unless a nested run left a larger one there (it replaced this
        // batch with its own, and parked its buffer in the scratch when it finished).
        due = items.timers.due
        items.timers.due = []
        items.timers.nextDue = 0
        due.removeAll(keepingCapacity: true)
        if due.capacity > self.dueTimersScratch.capacity {
            self.dueTimersScratch = due
        }
    }

    /// Fires the entries of the mode's due batch from `nextDue` on, in order; each is counted as taken before its
    /// callback runs.
    private func fireUnfiredDueTimers(of items: ModeItems, now: LoopInstant) {
        while let (entry, timer) = items.timers.takeNextDue() {
            if let timer {
                self.fire(timer, for: entry, now: now)
            }
        }
    }

    /// Fires `timer` for its queue entry `entry` (taken from the queue), then queues its next fire in its modes or
    /// detaches it.
    @inline(__always)
    private func fire(_ timer: LoopTimer, for entry: TimerEntry, now: LoopInstant) {
        // A timer whose callback is running (this is a nested run) is queued again when its callback returns.
        guard !timer.isFiring, let firing = timer.beginFire(deadline: entry.deadline, now: now.nanoseconds) else {
            return
        }
        self.firedTimers &+= 1
        let after = self.callOut(.timer) {
            timer.fire(firing, clock: self.clock)
        }
        switch after {
        case .requeue(let next):
            self.requeue(timer, at: next)
        case .done:
            self.detachEverywhere(timer)
        }
    }
}
