/// Running the loop: the run call, its passes, and the phases of a pass in CF's order.
extension Loop {
    /// Runs the loop in `mode` until `deadline`, a stop, or (if asked) a handled source.
    ///
    /// Each pass: `beforeTimers`; `beforeSources`, queued blocks, signalled sources, blocks again; then, if nothing
    /// was handled and the deadline is ahead, `beforeWaiting`, a sleep until a descriptor is ready, the mode's next
    /// timer is due, the deadline passes or someone wakes the loop, and `afterWaiting`; then due timers, ready
    /// descriptor sources, and blocks again. `entry` and `exit` bracket the call. A mode with no sources, timers or
    /// pending blocks returns `.finished` at once, with no observer called. Timers and blocks are not "sources" for
    /// `returnAfterSourceHandled`; signalled and descriptor sources are. A deadline already reached makes one
    /// non-blocking pass. The run may be nested inside any callback, in any mode.
    ///
    /// - Parameters:
    ///   - mode: The mode to run; not `.common`.
    ///   - deadline: When to return `.timedOut`; `.distantFuture` for never.
    ///   - returnAfterSourceHandled: Return `.handledSource` after the first pass that handled a source.
    /// - Returns: Why the run ended; see `RunResult` for the precedence.
    /// - Precondition: Called on the loop's thread; `mode` is not `.common`.
    @available(*, noasync, message: "run blocks its thread; use a LoopThread")
    @discardableResult
    public func run(mode: LoopMode, before deadline: LoopInstant, returnAfterSourceHandled: Bool = false) -> RunResult {
        self.preconditionIsCurrent("Loop.run(mode:before:)")
        precondition(mode != .common,
                     "Loop.run(mode:before:): `common` is a pseudo-mode and cannot be run; "
                        + "run a real mode such as .default")
        self.applyControlMessages()
        if self.isEmpty(mode) {
            return .finished
        }
        let items = self.modeItems(for: mode)
        self.runningModes.append(mode)
        self.shared.withLock { $0.runDepth += 1 }
        defer {
            self.shared.withLock { state in
                state.runDepth -= 1
                if state.runDepth == 0 {
                    state.isStopRequested = false  // a stop that lost to another result is spent with the last run
                }
            }
            self.runningModes.removeLast()
        }

        self.notifyObservers(.entry, in: items)
        var result: RunResult? = self.takeStop() ? .stopped : nil
        while result == nil {
            result = self.runPass(in: items, until: deadline, returnAfterSourceHandled: returnAfterSourceHandled)
        }
        self.notifyObservers(.exit, in: items)
        return result!
    }

    /// Runs the default mode until the loop is stopped or the default mode is finished.
    ///
    /// - Returns: `.stopped` when `stop()` ended it, `.finished` when the default mode ran out of sources, timers and
    ///   blocks (at once if it had none: this never spins on an empty mode).
    /// - Precondition: Called on the loop's thread.
    @available(*, noasync, message: "run blocks its thread; use a LoopThread")
    @discardableResult
    public func run() -> RunResult {
        while true {
            let result = self.run(mode: .default, before: .distantFuture)
            if result == .stopped || result == .finished {
                return result
            }
        }
    }

    /// One pass. Returns the run's result, or `nil` to make another pass.
    private func runPass(
        in items: ModeItems,
        until deadline: LoopInstant,
        returnAfterSourceHandled: Bool
    ) -> RunResult? {
        let mode = items.mode
        self.applyControlMessages()
        self.notifyObservers(.beforeTimers, in: items)
        self.notifyObservers(.beforeSources, in: items)
        self.performBlocks(in: mode)
        var sourceHandled = self.performSignalledSources(in: items)
        self.performBlocks(in: mode)  // again, whether or not a source ran (DESIGN §2, step 3)

        let ready: [(LoopDescriptorSource, DescriptorEvents)]
        if !sourceHandled && self.clock.now < deadline {
            self.notifyObservers(.beforeWaiting, in: items)
            // No user code runs from here until the wait returns.
            ready = self.waitForWork(in: items, until: deadline, blocking: true)
            self.applyControlMessages()  // an item added from another thread (which woke us) sees afterWaiting
            self.notifyObservers(.afterWaiting, in: items)
        } else {
            ready = self.waitForWork(in: items, until: deadline, blocking: false)
            self.applyControlMessages()
        }

        self.fireDueTimers(in: items, now: self.clock.now)
        if !ready.isEmpty {
            sourceHandled = self.performReadyDescriptorSources(ready, in: items) || sourceHandled
        }
        self.performBlocks(in: mode)
        self.drainWakeupIfWoken()

        if returnAfterSourceHandled && sourceHandled {
            return .handledSource
        }
        if self.clock.now >= deadline {
            return .timedOut
        }
        if self.takeStop() {
            return .stopped
        }
        self.applyControlMessages()
        if self.isEmpty(mode) {
            return .finished
        }
        return nil
    }

    /// Whether `mode` has no sources, timers or blocks that could run in it.
    func isEmpty(_ mode: LoopMode) -> Bool {
        if let items = self.modeItemsByMode[mode], items.hasSourcesOrTimers {
            return false
        }
        return !self.hasBlocks(for: mode)
    }

    /// Takes a pending stop (or sees a shutdown, which stays).
    private func takeStop() -> Bool {
        self.shared.withLock { state in
            if state.isShutDown { return true }
            guard state.isStopRequested else { return false }
            state.isStopRequested = false
            return true
        }
    }

    // MARK: Phases

    func notifyObservers(_ activity: LoopActivity, in items: ModeItems) {
        guard !items.observers.isEmpty else { return }
        let observers = items.observers
        for observer in observers where observer.activities.contains(activity) && observer.modes.contains(items.mode) {
            if observer.isInstrumentation {
                observer.notify(activity)
            } else {
                self.callOut(.observer(activity)) { observer.notify(activity) }
            }
        }
    }

    /// Runs the signalled sources of `items`' mode, lower `order` first, then first signalled first.
    ///
    /// In a nested run, the sources that the outer pass took but has not run yet come first: they were signalled
    /// before the others, and the outer pass skips those that the nested run ran.
    ///
    /// - Returns: Whether a source ran.
    private func performSignalledSources(in items: ModeItems) -> Bool {
        let noted = self.shared.withLock { state -> [LoopSource] in
            guard !state.signalledSources.isEmpty else { return [] }
            defer { state.signalledSources = [] }
            return state.signalledSources
        }
        let signalled = self.unrunSignalledSources.isEmpty ? noted : Array(self.unrunSignalledSources) + noted
        guard !signalled.isEmpty else { return false }

        let mode = items.mode
        var runnable: [(index: Int, source: LoopSource)] = []
        var elsewhere: [LoopSource] = []
        var seen = Set<ObjectIdentifier>()
        for (index, source) in signalled.enumerated() where source.isValid && source.isSignalled {
            guard seen.insert(ObjectIdentifier(source)).inserted else {
                continue  // signalled again after it was noted, or noted when it joined a mode
            }
            if source.modes.contains(mode) {
                runnable.append((index, source))
            } else if !source.modes.isEmpty {
                elsewhere.append(source)  // keeps its signal for a mode the loop will run later
            }
        }
        self.keepSignals(of: elsewhere)
        runnable.sort { ($0.source.order, $0.index) < ($1.source.order, $1.index) }
        let ordered = runnable.map(\.source)

        var handled = false
        var removedMeanwhile: [LoopSource] = []
        let outerUnrun = self.unrunSignalledSources
        defer { self.unrunSignalledSources = outerUnrun }
        for (position, source) in ordered.enumerated() where source.isValid && source.isSignalled {
            guard source.modes.contains(mode) else {
                removedMeanwhile.append(source)  // an earlier callback took it out of this mode: keep its signal
                continue
            }
            self.unrunSignalledSources = ordered[(position + 1)...]  // seen by a run nested in the callback
            self.callOut(.source) { source.perform() }
            handled = true
        }
        self.keepSignals(of: removedMeanwhile)
        return handled
    }

    /// Puts signalled sources that could not run in this mode back at the front of the signalled list, in order,
    /// so that they run when the loop runs one of their modes.
    private func keepSignals(of sources: [LoopSource]) {
        guard !sources.isEmpty else { return }
        self.shared.withLock { $0.signalledSources.insert(contentsOf: sources, at: 0) }
    }

    /// Sleeps (or, with `blocking: false`, only looks) until a descriptor of the mode is ready, its next timer is due,
    /// the deadline passes or the loop is woken.
    ///
    /// A small mode sleeps in one ppoll on the wake-up pipe, the deadline timer and all its descriptors. A large one
    /// (see `DescriptorRegistry`) first looks at all its descriptors without waiting, then sleeps on its epoll set.
    ///
    /// - Returns: The mode's descriptor sources that have events, in `order`.
    @inline(never)
    private func waitForWork(
        in items: ModeItems,
        until deadline: LoopInstant,
        blocking: Bool
    ) -> [(LoopDescriptorSource, DescriptorEvents)] {
        self.pollGeneration &+= 1
        // The sleep's end: the mode's next timer (coalesced) or the run's deadline. The timerfd is polled only when
        // there is one, so a loop waiting for work alone polls just its wake-up descriptor.
        let wake = blocking ? min(self.nextTimerWake(in: items) ?? .distantFuture, deadline) : nil
        let deadlineTimer = wake.map { $0 != .distantFuture } == true ? self.deadlineTimer : nil
        var ready: [(LoopDescriptorSource, DescriptorEvents)] = []
        if let wake, let registry = self.descriptorRegistry(for: items) {
            // A large mode: look at every descriptor once (a closed one is reported invalid; a ready one ends the
            // wait now), then sleep on the epoll set instead of on all of them. The deadline timer is left out of
            // the look: it may still hold the expiry of an earlier deadline until the sleep arms it again.
            self.setUpPoll(deadlineTimer: nil, sources: items.descriptorSources)
            let readyCount = self.look()
            if readyCount > 0 {
                self.collectPolled(readyCount, deadlineTimer: nil, into: &ready)
                return ready
            }
            self.setUpPoll(deadlineTimer: deadlineTimer, sources: [])
            self.poller.append(registry.descriptor, events: .readable)
            let wokenCount = self.sleep(until: wake, on: deadlineTimer)
            self.collectPolled(wokenCount, deadlineTimer: deadlineTimer, into: &ready)
            if wokenCount > 0, !self.poller.events(at: self.poller.count - 1).isEmpty {
                registry.collectReady(into: &ready)
            }
            return ready
        }
        self.setUpPoll(deadlineTimer: deadlineTimer, sources: items.descriptorSources)
        let readyCount = wake.map { self.sleep(until: $0, on: deadlineTimer) } ?? self.look()
        self.collectPolled(readyCount, deadlineTimer: deadlineTimer, into: &ready)
        return ready
    }

    /// Sets the poller up for one wait: the wake-up pipe, then the deadline timer if there is one, then `sources`.
    private func setUpPoll(deadlineTimer: DeadlineTimer?, sources: [LoopDescriptorSource]) {
        self.poller.reset()
        self.polledSources.removeAll(keepingCapacity: true)
        self.poller.append(self.wakeup.readEnd, events: .readable)
        if let deadlineTimer {
            self.poller.append(deadlineTimer.descriptor, events: .readable)
        }
        for source in sources where source.isValid {
            self.poller.append(source.descriptor, events: source.events)
            self.polledSources.append(source)
        }
    }

    /// Polls without waiting (retrying after a signal).
    ///
    /// - Returns: The number of descriptors with events.
    private func look() -> Int {
        var readyCount: Int
        repeat {
            readyCount = self.wait(timeoutNanoseconds: 0)
        } while readyCount < 0
        return readyCount
    }

    /// Sleeps until `wake` or until a polled descriptor is ready; a signal interrupts the wait (EINTR) but is not a
    /// wake-up, so it waits again for what is left.
    ///
    /// - Returns: The number of descriptors with events.
    private func sleep(until wake: LoopInstant, on deadlineTimer: DeadlineTimer?) -> Int {
        self.waiting.store(true, ordering: .releasing)
        defer { self.waiting.store(false, ordering: .releasing) }
        while true {
            let readyCount = self.sleepOnce(until: wake, on: deadlineTimer)
            if readyCount >= 0 { return readyCount }
        }
    }

    /// Reads what the last wait reported (`readyCount` descriptors with events: none to read when it is 0): notes
    /// the wake-up pipe, and appends the polled sources with events.
    private func collectPolled(
        _ readyCount: Int,
        deadlineTimer: DeadlineTimer?,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) {
        guard readyCount > 0 else { return }
        if !self.poller.events(at: 0).isEmpty {
            self.isWakeupReadable = true  // drained at the end of the pass, after the work that woke the loop ran
        }
        // A readable deadline timer needs nothing: the timers' phase fires what is due; the next arming clears it.
        let firstSource = deadlineTimer == nil ? 1 : 2
        for (offset, source) in self.polledSources.enumerated() {
            let events = self.poller.events(at: firstSource + offset)
            if !events.isEmpty {
                ready.append((source, events))
            }
        }
    }

    /// The epoll registrations of `items`, or `nil` to poll its descriptors directly: a small mode, a system without
    /// epoll, or a mode whose registrations epoll refused. Made when a mode reaches `largeModeThreshold` descriptor
    /// sources; dropped when it falls below half of that, so a mode near the line does not flip every pass.
    private func descriptorRegistry(for items: ModeItems) -> DescriptorRegistry? {
        self.applyNewDescriptorEvents()
        let count = items.descriptorSources.count
        if let registry = items.descriptorRegistry {
            if count >= self.largeModeThreshold / 2, registry.prepareToSleep() {
                return registry
            }
            items.hasDescriptorRegistryFailed = registry.hasFailed
            items.descriptorRegistry = nil
            return nil
        }
        guard count >= self.largeModeThreshold, !items.hasDescriptorRegistryFailed else { return nil }
        guard let registry = DescriptorRegistry(sources: items.descriptorSources) else {
            return nil  // no epoll here, or no descriptor left for one: try again when the mode next sleeps
        }
        guard registry.prepareToSleep() else {
            items.hasDescriptorRegistryFailed = true  // epoll refused the sources: this mode keeps ppoll
            return nil
        }
        items.descriptorRegistry = registry
        return registry
    }

    /// Brings the epoll registrations of every large mode up to date with the sources whose `events` changed.
    ///
    /// - Complexity: O(*k*) for *k* changed sources (one epoll_ctl(2) each at most), O(1) when none changed.
    private func applyNewDescriptorEvents() {
        guard self.hasDescriptorSourcesWithNewEvents.load(ordering: .acquiring) else { return }
        var changed = self.sourcesWithNewEventsScratch
        self.sourcesWithNewEventsScratch = []
        self.descriptorSourcesWithNewEvents.withLock { list in
            swap(&list, &changed)
            self.hasDescriptorSourcesWithNewEvents.store(false, ordering: .releasing)
        }
        for source in changed {
            source.isListedWithNewEvents.store(false, ordering: .releasing)  // before its events are read below
            for mode in source.modes {
                self.modeItemsByMode[mode]?.descriptorRegistry?.refresh(source)
            }
        }
        changed.removeAll(keepingCapacity: true)
        self.sourcesWithNewEventsScratch = changed
    }

    /// Empties the wake-up pipe if the last wait found it readable, and lets the next wake-up write again.
    ///
    /// This waits until the end of the pass so that the work a wake-up announced (a block, a signal) runs one
    /// system call sooner. It is safe: whatever is queued while the byte is still in the pipe writes nothing, and the
    /// next pass drains blocks and signalled sources before it sleeps. A run nested in a callback finds the byte,
    /// does not sleep, and drains it itself.
    private func drainWakeupIfWoken() {
        guard self.isWakeupReadable else { return }
        self.isWakeupReadable = false
        self.wakeup.drain()
        self.shared.withLock { $0.isWakeupPending = false }  // after the drain: a later wake-up writes again
    }

    /// One call to the poller, counted (`Loop.counters`).
    @inline(never)  // a stable name for profiles: this is where an idle loop spends its time
    private func wait(timeoutNanoseconds: Int64) -> Int {
        self.waitCounts.waits.wrappingAdd(1, ordering: .relaxed)
        if timeoutNanoseconds != 0 {
            self.waitCounts.blockingWaits.wrappingAdd(1, ordering: .relaxed)
        }
        return self.poller.waitForEvents(timeoutNanoseconds: timeoutNanoseconds)
    }

    /// One wait until `wake`: on the timerfd, on ppoll's own timeout, or, on a manual clock, by advancing the clock.
    ///
    /// - Returns: The number of ready descriptors, or -1 when a signal interrupted the wait.
    private func sleepOnce(until wake: LoopInstant, on deadlineTimer: DeadlineTimer?) -> Int {
        if let manualClock = self.manualClock {
            // Virtual time: look; if nothing is ready, "sleep" by moving the clock to the wake-up instant.
            let ready = self.wait(timeoutNanoseconds: 0)
            guard ready == 0 else { return ready }
            if wake == .distantFuture {
                return self.wait(timeoutNanoseconds: -1)
            }
            manualClock.advance(to: wake)
            return 0
        }
        if wake == .distantFuture {
            return self.wait(timeoutNanoseconds: -1)  // the timerfd is not polled: it may stay armed, unseen
        }
        let now = self.clock.now
        if let deadlineTimer, wake > now {
            deadlineTimer.set(wake.nanoseconds)  // precise, and a no-op while the next timer stays the same
            return self.wait(timeoutNanoseconds: -1)
        }
        let timeout = wake > now ? Int64(clamping: wake.nanoseconds - now.nanoseconds) : 0
        return self.wait(timeoutNanoseconds: timeout)
    }

    /// The instant to wake for the mode's timers (coalesced within their tolerances), or `nil` without timers.
    func nextTimerWake(in items: ModeItems) -> LoopInstant? {
        if items.nextDueTimer < items.dueTimers.count {  // an outer pass's batch, still due: do not sleep
            return LoopInstant(nanoseconds: items.dueTimers[items.nextDueTimer].deadline)
        }
        let mode = items.mode
        items.timers.dropStaleTop { Loop.isLive($0, in: mode) }
        return items.timers.coalescedWakeTime { Loop.isLive($0, in: mode) }.map(LoopInstant.init(nanoseconds:))
    }

    /// Fires every timer of the mode due at `now`, earliest first (equal dates in the order added).
    ///
    /// All due timers are taken from the queue before any callback runs, so a timer added or moved by a callback waits
    /// for the next pass. The batch is kept on the mode (`dueTimers`, fired up to `nextDueTimer`), so that a callback
    /// which runs the loop nested in this mode does not hold the rest back: the nested run fires them first, on their
    /// slots, and this batch finds them gone. A run nested in another mode fires a timer of both modes from its own
    /// queue, which makes this batch's entry stale (a new generation), so it is skipped.
    private func fireDueTimers(in items: ModeItems, now: LoopInstant) {
        let mode = items.mode
        // Fired first: an outer pass's batch (this is a run nested in one of its callbacks), due before anything else.
        self.fireUnfiredDueTimers(of: items)
        guard let first = items.timers.first, first.deadline <= now.nanoseconds else { return }
        // The loop's scratch buffer, taken so that a run nested in a callback gets (and allocates) its own.
        var due = self.dueTimersScratch
        self.dueTimersScratch = []
        while let entry = items.timers.first, entry.deadline <= now.nanoseconds {
            items.timers.removeFirst()
            // A timer whose callback is running (this is a nested run) is queued again when its callback returns.
            if Loop.isLive(entry, in: mode) && !entry.timer.isFiring {
                due.append(entry)
            }
        }
        // Any earlier batch was fired to its end above: this one takes its place.
        items.dueTimers = due
        items.nextDueTimer = 0
        due = []
        self.fireUnfiredDueTimers(of: items)
        // The batch's buffer, kept for the next pass, unless a nested run left a larger one there (it replaced this
        // batch with its own, and parked its buffer in the scratch when it finished).
        due = items.dueTimers
        items.dueTimers = []
        items.nextDueTimer = 0
        due.removeAll(keepingCapacity: true)
        if due.capacity > self.dueTimersScratch.capacity {
            self.dueTimersScratch = due
        }
        items.timers.checkInvariants()
    }

    /// Fires the entries of `items.dueTimers` from `nextDueTimer` on, in order; each is counted as taken before its
    /// callback runs.
    private func fireUnfiredDueTimers(of items: ModeItems) {
        let mode = items.mode
        while items.nextDueTimer < items.dueTimers.count {
            let entry = items.dueTimers[items.nextDueTimer]
            items.nextDueTimer += 1
            let timer = entry.timer
            guard Loop.isLive(entry, in: mode), !timer.isFiring, timer.isValid else { continue }
            let stillScheduled = self.callOut(.timer) {
                timer.fire(slot: LoopInstant(nanoseconds: entry.deadline), clock: self.clock)
            }
            if stillScheduled {
                self.requeue(timer)
            } else {
                self.detachEverywhere(timer)
            }
        }
    }

    /// Calls the ready descriptor sources in `order`, skipping any that an earlier callback cancelled or removed.
    ///
    /// A source is told only of the events it still watches (plus error, hang-up and invalid): an earlier callback of
    /// the pass, or another thread during the wait, may have changed its `events` since the poll.
    ///
    /// - Returns: Whether a source was called.
    private func performReadyDescriptorSources(
        _ ready: [(LoopDescriptorSource, DescriptorEvents)],
        in items: ModeItems
    ) -> Bool {
        var handled = false
        let poll = self.pollGeneration
        for (source, polled) in ready where source.isValid && source.modes.contains(items.mode) {
            // A run nested in an earlier handler polled again and served what was ready; what this pass saw is stale
            // now. Level-triggered, so anything still ready is reported on the next pass.
            guard self.pollGeneration == poll else { break }
            let events = polled.intersection(source.events.union([.error, .hangUp, .invalid]))
            guard !events.isEmpty else { continue }
            self.callOut(.descriptor(source.descriptor)) { source.handle(events) }
            handled = true
            if events.contains(.invalid) {
                source.cancel()  // the descriptor is closed: reported once, never polled again
            }
        }
        return handled
    }
}
