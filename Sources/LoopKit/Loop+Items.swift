/// Adding items to modes, removing them, and the common modes.
///
/// `add`, `remove` and `addCommonMode` are safe from any thread: on the loop's thread they take effect at once,
/// elsewhere at the loop's next pass, and the call wakes the loop so that this is promptly. Adding an item twice to
/// a mode, or removing it from a mode it is not in, does nothing. Adding to `.common` adds to every mode of the
/// common set, now and later; removing from `.common` removes an item added to it from all of them (one added to them
/// by name stays, as in CF). `add` returns `false`, adding nothing, for an invalidated item or a loop that has ended;
/// an item whose loop has ended may join another.
extension Loop {
    // MARK: Timers

    /// Schedules `timer` to fire while the loop runs `mode`. Any thread.
    ///
    /// The first addition to a loop fixes an interval timer's first fire date at `now + interval`, `now` being the
    /// moment of this call, also when it is made on another thread. A timer in several modes fires once per slot.
    ///
    /// - Returns: `false`, adding nothing, if `timer` was already invalidated (CF ignores an invalid timer too) or the
    ///   loop has ended: a caller racing a one-shot timer's fire can tell, without a separate `isValid` check.
    /// - Precondition: `timer` belongs to no other loop.
    /// - Complexity: O(log *n*) for *n* timers in the mode.
    @discardableResult
    public func add(_ timer: LoopTimer, forMode mode: LoopMode) -> Bool {
        self.addItem(timer, to: mode, call: "Loop.add(_:forMode:)", fixingFirstDateOf: timer)
    }

    /// Removes `timer` from `mode`; it stays valid and in its other modes. Any thread.
    ///
    /// - Complexity: amortized O(log *n*): the queue entry is dropped when it surfaces.
    public func remove(_ timer: LoopTimer, forMode mode: LoopMode) {
        self.removeItem(timer, from: mode)
    }

    /// Whether `timer` is in `mode` (for `.common`: in the common items). Loop thread.
    @available(*, noasync)
    public func contains(_ timer: LoopTimer, inMode mode: LoopMode) -> Bool {
        self.containsItem(timer, in: mode)
    }

    // MARK: Signalled sources

    /// Adds `source` to `mode`, calling its `schedule` callback. Any thread.
    ///
    /// - Returns: `false`, adding nothing, if `source` was already invalidated or the loop has ended.
    /// - Precondition: `source` belongs to no other loop.
    @discardableResult
    public func add(_ source: LoopSource, forMode mode: LoopMode) -> Bool {
        self.addItem(source, to: mode, call: "Loop.add(_:forMode:)")
    }

    /// Removes `source` from `mode`, calling its `cancel` callback. Any thread.
    public func remove(_ source: LoopSource, forMode mode: LoopMode) {
        self.removeItem(source, from: mode)
    }

    /// Whether `source` is in `mode`. Loop thread.
    @available(*, noasync)
    public func contains(_ source: LoopSource, inMode mode: LoopMode) -> Bool {
        self.containsItem(source, in: mode)
    }

    // MARK: Descriptor sources

    /// Starts watching `source`'s descriptor while the loop runs `mode`. Any thread.
    ///
    /// - Returns: `false`, adding nothing, if `source` was already invalidated or the loop has ended.
    /// - Precondition: `source` belongs to no other loop.
    @discardableResult
    public func add(_ source: LoopDescriptorSource, forMode mode: LoopMode) -> Bool {
        self.addItem(source, to: mode, call: "Loop.add(_:forMode:)")
    }

    /// Stops watching `source` in `mode`. Any thread.
    public func remove(_ source: LoopDescriptorSource, forMode mode: LoopMode) {
        self.removeItem(source, from: mode)
    }

    /// Whether `source` is in `mode`. Loop thread.
    @available(*, noasync)
    public func contains(_ source: LoopDescriptorSource, inMode mode: LoopMode) -> Bool {
        self.containsItem(source, in: mode)
    }

    // MARK: Observers

    /// Calls `observer` while the loop runs `mode`. Observers do not keep a mode alive. Any thread.
    ///
    /// - Returns: `false`, adding nothing, if `observer` was already invalidated or the loop has ended.
    /// - Precondition: `observer` belongs to no other loop.
    @discardableResult
    public func add(_ observer: LoopObserver, forMode mode: LoopMode) -> Bool {
        self.addItem(observer, to: mode, call: "Loop.add(_:forMode:)")
    }

    /// Stops calling `observer` in `mode`. Any thread.
    public func remove(_ observer: LoopObserver, forMode mode: LoopMode) {
        self.removeItem(observer, from: mode)
    }

    /// Whether `observer` is in `mode`. Loop thread.
    @available(*, noasync)
    public func contains(_ observer: LoopObserver, inMode mode: LoopMode) -> Bool {
        self.containsItem(observer, in: mode)
    }

    // MARK: Display links

    /// Makes `link` tick while the loop runs `mode` (in `.common`, it keeps ticking during tracking). Any thread.
    ///
    /// - Returns: `false`, adding nothing, if `link` was already invalidated or the loop has ended.
    /// - Precondition: `link` belongs to no other loop.
    @discardableResult
    public func add(_ link: LoopDisplayLink, forMode mode: LoopMode) -> Bool {
        // The link is kept alive until its timer is attached, whose grid retains it from then on: added from another
        // thread, it would otherwise be freed on the way if the caller keeps no reference.
        self.addItem(link.timer, to: mode, kind: "LoopDisplayLink", call: "Loop.add(_:forMode:)", keepingAlive: link,
                     fixingFirstDateOf: link.timer)
    }

    /// Stops `link` ticking in `mode`. Any thread.
    public func remove(_ link: LoopDisplayLink, forMode mode: LoopMode) {
        self.removeItem(link.timer, from: mode)
    }

    /// Whether `link` is in `mode`. Loop thread.
    @available(*, noasync)
    public func contains(_ link: LoopDisplayLink, inMode mode: LoopMode) -> Bool {
        self.containsItem(link.timer, in: mode)
    }

    // MARK: Modes

    /// The modes that `.common` stands for: `default` and `tracking` from the start, plus those added. Loop thread.
    @available(*, noasync)
    public var commonModes: Set<LoopMode> {
        self.preconditionIsCurrent("Loop.commonModes")
        self.applyControlMessagesQueuedBefore()  // an `addCommonMode` that returned on another thread is in
        return self.commonModeSet
    }

    /// Adds `mode` to the common set, and every item already in `.common` to `mode` (back-fill). Any thread.
    ///
    /// - Precondition: `mode` is not `.common`.
    public func addCommonMode(_ mode: LoopMode) {
        loopPrecondition(mode != .common, "Loop.addCommonMode(_:): `common` cannot be a member of itself")
        self.onLoopThread { loop in
            guard loop.commonModeSet.insert(mode).inserted else { return }
            // A callback of an earlier item (`onSchedule`) may take a later one out of `.common`: asked each time.
            for item in loop.commonItems.values.sorted(by: { $0.sequence < $1.sequence })
            where loop.commonItems[ObjectIdentifier(item)] != nil {
                loop.attach(item, toRealMode: mode)
            }
        }
    }

    /// The mode of the innermost active `run` call, or `nil` when the loop is not running. Loop thread.
    @available(*, noasync)
    public var currentMode: LoopMode? {
        self.preconditionIsCurrent("Loop.currentMode")
        return self.runningModes.last
    }

    /// Every mode that holds something or was run, `.common` excluded. Loop thread.
    @available(*, noasync)
    public var allModes: Set<LoopMode> {
        self.preconditionIsCurrent("Loop.allModes")
        self.applyControlMessagesQueuedBefore()
        return Set(self.modeItemsByMode.keys).union(self.commonModeSet)
    }

    // MARK: Internals (loop thread unless noted)

    func modeItems(for mode: LoopMode) -> ModeItems {
        // Most calls name the mode the call before named (adding or firing many timers of one mode): comparing two
        // names costs less than hashing one.
        if let last = self.lastModeItems, last.mode == mode {
            return last
        }
        if let items = self.modeItemsByMode[mode] {
            self.lastModeItems = items
            return items
        }
        let items = ModeItems(mode: mode, index: Int32(self.modeItemsByIndex.count))
        self.modeItemsByMode[mode] = items
        self.modeItemsByIndex.append(items)
        self.lastModeItems = items
        return items
    }

    /// Any thread. Returns `false` for an item already invalidated, or a loop that has ended (the item stays free to
    /// join another loop); otherwise binds the item and attaches it. `timer` (the item, or a display link's timer)
    /// fixes its first date once accepted, and forgets it if the loop ended meanwhile: a refused timer keeps no date.
    /// `kind` names the item in a precondition message (a display link's timer is a `LoopDisplayLink` to its user).
    func addItem<Item: LoopItem & Sendable>(
        _ item: Item,
        to mode: LoopMode,
        kind: String? = nil,
        call: StaticString,
        keepingAlive owner: (AnyObject & Sendable)? = nil,
        fixingFirstDateOf timer: LoopTimer? = nil
    ) -> Bool {
        guard item.isValid, !self.hasEnded else { return false }
        let resolved = timer?.resolveFireDate { self.now }
        item.bind(to: self, kind: kind ?? Item.kind, call: call)
        // Refused if the loop ended since the check above: the caller learns that the item will never run.
        let isAdded = self.onLoopThread { loop in
            withExtendedLifetime(owner) {
                loop.attach(item, to: mode)  // which ignores an item invalidated meanwhile
            }
        }
        if !isAdded, let timer, let resolved {
            timer.forgetFireDate(resolved, refusedBy: self)  // the add that takes it fixes the date then
        }
        return isAdded
    }

    /// Any thread.
    func removeItem<Item: LoopItem & Sendable>(_ item: Item, from mode: LoopMode) {
        guard item.boundLoop === self else { return }
        self.onLoopThread { loop in
            loop.detach(item, from: mode)
        }
    }

    func containsItem(_ item: any LoopItem, in mode: LoopMode) -> Bool {
        self.preconditionIsCurrent("Loop.contains(_:inMode:)")
        self.applyControlMessagesQueuedBefore()  // an add that returned on another thread is in by now
        if mode == .common {
            return self.commonItems[ObjectIdentifier(item)] != nil
        }
        return item.modes.contains(mode)
    }

    func attach(_ item: any LoopItem, to mode: LoopMode) {
        guard item.isValid else { return }  // invalidated before a cross-thread add arrived
        if item.sequence == 0 {
            self.lastSequence += 1
            item.sequence = self.lastSequence
        }
        guard mode == .common else {
            self.attach(item, toRealMode: mode)
            return
        }
        let identity = ObjectIdentifier(item)
        if self.commonItems.updateValue(item, forKey: identity) == nil {
            item.commonMembershipDidChange(isCommon: true, loop: self)
        }
        // The item's own `onSchedule` for one mode may take it out of `.common` again: the rest of the fan-out is
        // then that removal's to undo, not this add's to finish.
        for commonMode in self.commonModeSet.sorted(by: { $0.name < $1.name }) where self.commonItems[identity] != nil {
            self.attach(item, toRealMode: commonMode)
        }
    }

    func attach(_ item: any LoopItem, toRealMode mode: LoopMode) {
        guard item.isValid, item.modes.insert(mode) else { return }
        item.attach(to: self.modeItems(for: mode), loop: self)
    }

    func detach(_ item: any LoopItem, from mode: LoopMode) {
        guard mode == .common else {
            self.detach(item, fromRealMode: mode)
            return
        }
        // As CF: an item added to the real modes one by one is not in `common`, and stays in them.
        let identity = ObjectIdentifier(item)
        guard self.commonItems.removeValue(forKey: identity) != nil else { return }
        item.commonMembershipDidChange(isCommon: false, loop: self)
        // An `onUnschedule` that adds the item to `.common` again has put it back in every common mode.
        for commonMode in self.commonModeSet.sorted(by: { $0.name < $1.name }) where self.commonItems[identity] == nil {
            self.detach(item, fromRealMode: commonMode)
        }
    }

    func detach(_ item: any LoopItem, fromRealMode mode: LoopMode) {
        guard item.modes.remove(mode) else { return }
        item.detach(from: self.modeItems(for: mode), loop: self)
    }

    /// Removes an invalidated item from every mode. Any thread.
    ///
    /// From another thread the change is posted to the loop; the message holds the item weakly, since a queued
    /// message must not keep an invalidated item (or what its closure captures) alive: while the item is in a mode,
    /// the mode holds it.
    ///
    /// - Returns: `false` if the loop has ended, which took the item out of its modes as it ended.
    @discardableResult
    func detachEverywhere<Item: LoopItem & Sendable>(_ item: Item) -> Bool {
        if self.isCurrent {
            self.detachNow(item)
            return true
        }
        return self.post { [weak item] loop in
            if let item {
                loop.detachNow(item)
            }
        }
    }

    private func detachNow(_ item: some LoopItem) {
        // Most loops have no common items: a fired timer then hashes nothing here.
        if !self.commonItems.isEmpty, self.commonItems.removeValue(forKey: ObjectIdentifier(item)) != nil {
            item.commonMembershipDidChange(isCommon: false, loop: self)
        }
        if item.modes.count == 1 {
            for mode in item.modes {
                self.detach(item, fromRealMode: mode)
            }
        } else {
            for mode in item.modes.sorted(by: { $0.name < $1.name }) {
                self.detach(item, fromRealMode: mode)
            }
        }
        item.didLeaveEveryMode()
    }

    /// Queues fresh entries for `timer`'s current fire date in each of its modes. Any thread.
    ///
    /// From another thread, re-arms coalesce: while one is on its way to the loop, more add nothing, and the one that
    /// arrives reads the latest date (the last one wins), so a burst of re-arms costs one queued change, not one each.
    ///
    /// - Parameter keepingPlace: The date did not change (a new tolerance): the timer keeps its place among timers of
    ///   the same date (see `ModeTimers.schedule(slot:at:keepingPlace:)`), unless a new date joins the same re-arm.
    func rescheduleTimer(_ timer: LoopTimer, keepingPlace: Bool = false) {
        guard !self.isCurrent else {
            self.requeue(timer, keepingPlace: keepingPlace)
            return
        }
        typealias Pending = LoopTimer.PendingRequeue
        let kind = (keepingPlace ? Pending.keepingPlace : Pending.fresh).rawValue
        var pending = timer.pendingRequeue.load(ordering: .acquiring)
        while pending < kind {
            let (exchanged, original) = timer.pendingRequeue.compareExchange(
                expected: pending, desired: kind, ordering: .acquiringAndReleasing)
            if exchanged { break }
            pending = original
        }
        guard pending == Pending.none.rawValue else { return }  // one is on its way, now of the right kind
        self.post { [weak timer] loop in
            guard let timer else { return }  // freed meanwhile: in no mode, so nothing to re-arm
            // Cleared before the date is read: a later re-arm posts again.
            let kind = timer.pendingRequeue.exchange(Pending.none.rawValue, ordering: .acquiringAndReleasing)
            loop.requeue(timer, keepingPlace: kind == Pending.keepingPlace.rawValue)
        }
    }

    /// Queues the timer's next fire in each of its modes; the entries it had become stale (and a queue that is
    /// mostly stale entries is rebuilt, so re-arming a timer cannot grow a queue without bound).
    func requeue(_ timer: LoopTimer, keepingPlace: Bool = false) {
        self.requeue(timer, at: timer.nextFire(), keepingPlace: keepingPlace)
    }

    /// Queues `timer`'s fire at `next` (`nil`: none) in every mode it is in. `next` is what the timer's schedule
    /// holds; a change from another thread since is queued for the loop (`rescheduleTimer`), and applied after.
    func requeue(_ timer: LoopTimer, at next: LoopTimer.NextFire?, keepingPlace: Bool = false) {
        for membership in timer.memberships {
            self.modeItemsByIndex[Int(membership.modeIndex)].timers.schedule(slot: membership.slot, at: next,
                                                                             keepingPlace: keepingPlace)
        }
    }

    /// Forgets a pending signal of an invalidated source, so that no list keeps it alive. Any thread.
    func forgetSignal(of source: LoopSource) {
        self.state.withLock { $0.forgetSignal(of: source) }
        self.onLoopThread { loop in
            loop.dropSpentCandidates()
        }
    }

    /// Notes that `source` was signalled, and wakes the loop. Any thread.
    func sourceWasSignalled(_ source: LoopSource) {
        self.wake(if: self.state.withLock { $0.noteSignal(source) })
    }
}
