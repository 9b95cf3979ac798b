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
    @available(*, noasync, message: "run blocks its thread: use a LoopThread, or a synchronous main for Loop.main")
    @discardableResult
    public func run(mode: LoopMode, before deadline: LoopInstant, returnAfterSourceHandled: Bool = false) -> RunResult {
        self.preconditionIsCurrent("Loop.run(mode:before:)")
        loopPrecondition(mode != .common,
                     "Loop.run(mode:before:): `common` is a pseudo-mode and cannot be run; "
                        + "run a real mode such as .default")
        self.serveMainQueueIfNeeded()
        // Run by the host's own code between a driver's prepare() and dispatch() (a modal drag in a GTK handler):
        // the loop stops counting as asleep for the host, so that this run may wait.
        self.endHostWait()
        self.applyControlMessages()
        if self.isEmpty(mode) {
            return .finished
        }
        let items = self.modeItems(for: mode)
        self.runningModes.append(mode)
        if self.mayHaveMonitor {
            self.modeTimes.switchTo(mode, at: self.passNow)
        }
        let isHostPass = self.hostPassDepth == self.runningModes.count
        self.state.withLock { $0.enterRun() }
        if !self.hasReached(deadline) {
            self.waiter.runWillBegin(in: items)  // not for a run that only looks, as a host loop's pass
        }
        defer {
            self.state.withLock { $0.leaveRun(isHostPass: isHostPass) }
            self.runningModes.removeLast()
            if self.mayHaveMonitor {
                self.modeTimes.switchTo(self.runningModes.last, at: self.passNow)
            }
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
    ///   blocks (at once if it had none: this never spins on an empty mode); `.timedOut` only on a loop whose virtual
    ///   clock (a `ManualLoopClock`) was moved to `.distantFuture`, where no later deadline is left to wait for.
    /// - Precondition: Called on the loop's thread.
    @available(*, noasync, message: "run blocks its thread: use a LoopThread, or a synchronous main for Loop.main")
    @discardableResult
    public func run() -> RunResult {
        self.run(mode: .default, before: .distantFuture)
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
        var didWork = self.performBlocks(in: mode)
        var sourceHandled = self.performSignalledSources(in: items, returnAfterSourceHandled: returnAfterSourceHandled)
        self.consumeWakeUp()  // one a signal brought, left unread by the pass it woke (below)
        didWork = self.performBlocks(in: mode) || didWork  // again, whether or not a source ran (DESIGN §2, step 3)

        var ready = self.readySourcesScratch
        self.readySourcesScratch = []  // so that `ready` is the buffer's only owner, and appends do not copy it
        var slept = false
        // Which wait or look filled `ready`: a run nested in an observer or timer callback below may poll again.
        let pollGeneration: UInt64
        // A mode that became empty has nothing to wait for: the pass ends `.finished` instead of sleeping.
        if !sourceHandled && !self.hasReached(deadline) && !self.isEmpty(items) {
            self.notifyObservers(.beforeWaiting, in: items)
            // No user code runs from here until the wait returns.
            slept = self.sleep(in: items, until: deadline, into: &ready)
            pollGeneration = self.waitGeneration
            self.applyControlMessages()  // an item added from another thread (which woke us) sees afterWaiting
            self.notifyObservers(.afterWaiting, in: items)
        } else {
            self.look(in: items, into: &ready)
            pollGeneration = self.waitGeneration
            self.applyControlMessages()
        }

        let timersBefore = self.firedTimers
        if items.timers.count > 0 {  // a mode without timers reads no clock for them
            self.fireDueTimers(in: items, now: self.passNow)
        }
        didWork = didWork || self.firedTimers != timersBefore
        if !ready.isEmpty && !(returnAfterSourceHandled && sourceHandled) {
            sourceHandled = self.performReadyDescriptorSources(
                ready, polledAt: pollGeneration, in: items, returnAfterSourceHandled: returnAfterSourceHandled)
                || sourceHandled
        }
        if !ready.isEmpty {
            ready.removeAll(keepingCapacity: true)  // keeps no source alive past the pass
        }
        if ready.capacity > self.readySourcesScratch.capacity {  // a nested run may have left one of its own
            self.readySourcesScratch = ready
        }
        didWork = self.performBlocks(in: mode) || didWork || sourceHandled
        // Whether a signal's source waits for the next pass (step 3).
        let hasPendingSignal = self.state.pending.contains(.signalledSources)
        // The wake-up a signal brought is read after its source runs, so that the read is not between the signal and
        // its callback.
        if self.waiter.hasUnreadWakeUp && !hasPendingSignal {
            self.consumeWakeUp()
        }

        let result = self.result(of: items, until: deadline, sourceHandled: sourceHandled,
                                 returnAfterSourceHandled: returnAfterSourceHandled)
        // The pass that woke for a signal is not an empty one: its source runs in the next pass.
        if slept && !didWork && result == nil && !hasPendingSignal {
            self.emptyWakeUps.wrappingAdd(1, ordering: .relaxed)
        }
        return result
    }

    /// How the run ends after a pass, in DESIGN's precedence, or `nil` to make another pass.
    private func result(
        of items: ModeItems,
        until deadline: LoopInstant,
        sourceHandled: Bool,
        returnAfterSourceHandled: Bool
    ) -> RunResult? {
        if returnAfterSourceHandled && sourceHandled {
            return .handledSource
        }
        if self.hostPassDepth == self.runningModes.count && self.takeStop() {
            return .stopped  // a host's pass (`LoopHostDriver.dispatch()`), whose deadline is always `now`
        }
        if self.hasReached(deadline) {
            return .timedOut
        }
        if self.takeStop() {
            return .stopped
        }
        self.applyControlMessages()
        if self.isEmpty(items) {
            return .finished
        }
        return nil
    }

    /// Whether the clock has reached `deadline`. The system clock never reaches `.distantFuture`, so a run without a
    /// deadline on it (a loop thread's) reads no clock for this; a manual clock may have been advanced that far.
    private func hasReached(_ deadline: LoopInstant) -> Bool {
        (deadline != .distantFuture || self.clockCanReachDistantFuture) && self.passNow >= deadline
    }

    /// Whether `mode` has no sources, timers or blocks that could run in it.
    func isEmpty(_ mode: LoopMode) -> Bool {
        if let items = self.modeItemsByMode[mode] {
            return self.isEmpty(items)
        }
        return !self.hasBlocks(for: mode)
    }

    /// Whether the mode of `items` (the loop's own for it) has no sources, timers or blocks that could run in it (the
    /// main queue, inside its own work, is none); what a pass asks, without looking the mode up.
    func isEmpty(_ items: ModeItems) -> Bool {
        (!items.hasSourcesOrTimers || self.holdsOnlyTheMainQueueWhileItIsBusy(items))
            && !self.hasBlocks(for: items.mode)
    }

    // MARK: Phases

    @inline(__always)
    func notifyObservers(_ activity: LoopActivity, in items: ModeItems) {
        if !items.observers.isEmpty {  // most modes have none: decided without a call
            self.callObservers(activity, in: items)
        }
    }

    @inline(never)
    private func callObservers(_ activity: LoopActivity, in items: ModeItems) {
        let observers = items.observers
        for observer in observers where observer.activities.contains(activity) && observer.modes.contains(items.mode) {
            if observer.isInstrumentation {
                observer.notify(activity)
            } else {
                self.callOut(.observer(activity)) { observer.notify(activity) }
            }
        }
    }

    /// Sleeps until a descriptor of the mode is ready, its next timer is due, the deadline passes or work arrives;
    /// only looks if work arrived since the pass took it (the state machine refuses the wait).
    ///
    /// A wake-up that arrives for work the loop already took (its wait ended for another reason first) is absorbed
    /// here: the loop waits again, without a pass and without observers, so that every `afterWaiting` has a cause.
    ///
    /// - Returns: Whether the loop slept (`false`: it only looked).
    @inline(never)
    private func sleep(
        in items: ModeItems,
        until deadline: LoopInstant,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> Bool {
        // First, as the last `beforeWaiting` observer would be: a hang handler it calls is user code, which the
        // checks below must follow (it may iterate a host loop, or run this one nested and take work).
        self.tellMonitors(isWaking: false)
        defer { self.tellMonitors(isWaking: true) }
        // A host loop iterated from a callback of this run (GLib's, from a timer) may have announced a wait through
        // its driver and not dispatched: this run's wait replaces it.
        self.endHostWait()
        // Only a look when a `beforeWaiting` observer or a hang handler emptied the mode (invalidated its last timer,
        // say: nothing could end the sleep, and the run finishes after `afterWaiting`, DESIGN §2), or when a nested
        // run took work the outer pass did not reach.
        if self.isEmpty(items) || self.hasTakenWork(for: items.mode) {
            self.look(in: items, into: &ready)
            return false
        }
        while true {
            let wake = min(self.nextTimerWake(in: items) ?? .distantFuture, deadline)
            let preferredChannel = self.waiter.wakeUpChannel(forWaitingIn: items, until: wake)
            guard let channel = self.state.withLock({ $0.beginWait(preferring: preferredChannel) }) else {
                self.look(in: items, into: &ready)
                return false
            }
            self.waitGeneration &+= 1
            self.tellTracers(isSleeping: true)  // after the hang handlers above: what they did is not sleep
            let outcome = self.waiter.wait(for: items, until: wake, sleepingOn: channel, into: &ready)
            self.tellTracers(isSleeping: false)
            // The blocks that woke the loop are taken in the wait's closing lock round trip, not in a second one at
            // the drain: a block's wake-up runs its block sooner.
            let hadArrivals = self.takeQueuedBlocks(along: { $0.endWait() })
            let isStale = outcome.isWokenByChannel && !hadArrivals && ready.isEmpty && self.passNow < wake
            if !isStale {
                return true
            }
            self.consumeWakeUp()
        }
    }

    /// Whether work for `mode` waits on the loop's side, taken from the shared state by a run nested since this
    /// pass's drains: blocks its drain stopped short of, or a signalled source it does not run. The shared state's
    /// check before a wait no longer sees them. Loop thread.
    func hasTakenWork(for mode: LoopMode) -> Bool {
        self.hasTakenBlock(for: mode) || self.hasSignalledCandidate(in: mode)
    }

    /// Takes a stop pending for the innermost run (or sees a shutdown), without the lock when none is pending.
    private func takeStop() -> Bool {
        self.state.pending.contains(.stop) && self.state.withLock { $0.takeStop() }
    }

    /// Announces the wait of a `LoopHostDriver`'s host, ending in the same lock round trip one announced before and
    /// not ended since. Loop thread.
    ///
    /// - Returns: Whether the wait is announced; `false` when queued work, a stop or a wake-up refuses it.
    func announceHostWait() -> Bool {
        let wasAnnounced = self.isHostWaitAnnounced
        let channel = self.state.withLock { state in
            if wasAnnounced { _ = state.endWait() }
            return state.beginWait(forHost: true)
        }
        self.isHostWaitAnnounced = channel != nil
        return self.isHostWaitAnnounced
    }

    /// Adds `driver` to the loop's host drivers: told when a descriptor source leaves a mode, and, while there is one,
    /// a stop made with no run active is the host's (`LoopStateMachine.requestStop()`). Loop thread.
    func attach(_ driver: LoopHostDriver) {
        // A driver freed on another thread posted its detach (`LoopHostDriver.deinit`) before its memory could be
        // reused: applied first, it cannot take out a new driver at the same address.
        self.applyControlMessagesQueuedBefore()
        self.hostDrivers.append(WeakAttachment(driver))
        self.state.withLock { $0.noteHostDriver(1) }
    }

    /// Takes the driver `identity` names out of the loop's host drivers (by identity alone, see `WeakAttachment`); the
    /// last one's going drops a stop no dispatch will take, so that it ends no other run. Loop thread.
    func detachHostDriver(_ identity: ObjectIdentifier) {
        self.hostDrivers.removeAll { $0.identity == identity }
        self.state.withLock { $0.noteHostDriver(-1) }
    }

    /// Takes a stop made while the host of a `LoopHostDriver` slept. Loop thread.
    func takeHostStop() -> Bool {
        self.state.withLock { $0.takeHostStop() }
    }

    /// Ends the wait a `LoopHostDriver` announced for its host, if one is announced. Loop thread.
    func endHostWait() {
        guard self.isHostWaitAnnounced else { return }
        self.isHostWaitAnnounced = false
        _ = self.state.withLock { $0.endWait() }
    }

    /// Reads a wake-up that arrived while a host slept on `LoopHostDriver.descriptor`, when the host's pass of `mode`
    /// ran no look (the mode was empty). Loop thread, outside every run.
    ///
    /// The work that woke the host (blocks or signals for other modes) is taken from the shared state first, as a
    /// pass takes it, so that it waits for its modes where the loop keeps it and no longer refuses the host's next
    /// wait: otherwise `prepare()` would ask for no sleep on every turn.
    func absorbWakeUp(in mode: LoopMode) {
        self.takeQueuedBlocks()
        self.takeSignalledSources()
        var ready: [(LoopDescriptorSource, DescriptorEvents)] = []
        self.look(in: self.modeItems(for: mode), into: &ready)
        self.consumeWakeUp()
    }

    /// Looks at the mode's descriptors and the wake-up channel without waiting.
    private func look(in items: ModeItems, into ready: inout [(LoopDescriptorSource, DescriptorEvents)]) {
        self.waitGeneration &+= 1
        _ = self.waiter.wait(for: items, until: nil, into: &ready)
    }

    /// Reads a wake-up that a wait found, once the pass has taken the work it announced (a producer writes no other
    /// byte until then, so none is lost).
    private func consumeWakeUp() {
        if self.waiter.consumeWakeUp() {
            self.state.withLock { $0.noteWakeUpConsumed() }
        }
    }
}
