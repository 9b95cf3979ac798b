/// The part of a loop that other threads touch, as a state machine: every field is private, and each named
/// transition decides under `Loop.state`'s lock and returns what the caller must do once the lock is released.
///
/// The wake-up protocol. A producer (a `perform`, a signal, an item change from another thread, a stop, a shutdown)
/// wakes the loop, through the channel its wait sleeps on (the descriptor or the futex), only when the loop is inside
/// a wait that it announced with `beginWait(preferring:)`, and only if no wake-up is already in flight. So work queued
/// while the loop is awake sends nothing: the loop refuses to sleep while anything is queued, and takes it before it
/// waits; and at most one wake-up is outstanding per wait. A wake-up can therefore only be stale if its wait ended for
/// another reason first; the loop then absorbs it when it next waits, without a pass (see `endWait()`). Nothing
/// queued while a nested run waits or drains can be left asleep, because every wait, at any nesting level, asks this
/// machine first.
///
/// The lifecycle is `open` → `shuttingDown` (sticky: every run returns `.stopped`) → `ended` (the thread is gone;
/// new blocks are refused). Loop thread for the `Loop…` transitions, any thread for the producers'.
struct LoopStateMachine {
    enum Lifecycle: Equatable {
        case open
        case shuttingDown
        case ended
    }

    /// What a producer must do after the lock is released.
    enum WakeAction: Equatable {
        /// Nothing: the loop is awake and will see the work before it sleeps, or a wake-up is already in flight.
        case none
        /// Wake the loop through the channel its wait sleeps on: it is asleep and no wake-up is on its way.
        case wakeUp(WakeUpChannel)
    }

    /// What waits for the loop's thread, as `SharedLoopState` publishes it for reads without the lock.
    struct PendingWork: OptionSet {
        let rawValue: UInt8
        static let blocks = PendingWork(rawValue: 1 << 0)
        static let signalledSources = PendingWork(rawValue: 1 << 1)
        static let controlMessages = PendingWork(rawValue: 1 << 2)
        /// A stop for some run, or a shutdown (which stays).
        static let stop = PendingWork(rawValue: 1 << 3)
    }

    /// What `enqueue(_:)` decided.
    enum EnqueueAction: Equatable {
        case queued(WakeAction)
        /// The loop has ended: the block can never run.
        case refused
    }

    private var lifecycle = Lifecycle.open
    private var runDepth = 0
    /// The depths of the runs a pending `stop()` ends, ascending: each stop belongs to the run innermost when it was
    /// called, so a run nested after the call does not take it (as CF's per-run stop flag), and a run that ends
    /// without taking its stop hands it to the run outside it. Never deeper than `runDepth`.
    private var stopDepths: [Int] = []
    /// A stop made while a host loop drives the loop and no run is active: taken by the host's next `dispatch()`
    /// (`takeHostStop()`), by no other run.
    private var isStopPendingForHost = false
    /// The live `LoopHostDriver`s of the loop: while there is one, a host loop stands for the outermost run.
    private var hostDrivers = 0
    /// The loop announced a wait and has not ended it.
    private var isWaiting = false
    /// What the current (or last) wait sleeps on.
    private var waitChannel = WakeUpChannel.descriptor
    /// A wake-up was (or is about to be) sent through the wait's channel and the loop has not consumed it. One for
    /// the futex lapses when its wait ends (see `endWait()`), so it is always one through the descriptor then.
    private var isWakeUpInFlight = false
    /// Work (or a stop, or a `wakeUp()`) arrived since the current wait began.
    private var hasArrivalsSinceWaitBegan = false
    /// `wakeUp()` was called while the loop was running but awake: its next wait is only a look.
    private var isWakeUpRequested = false
    private var nextBlockSequence: UInt64 = 0
    /// How many wake-ups producers were told to send (`Loop.counters.wakeUpWrites`): counted here, under the lock the
    /// producer holds anyway, rather than on a line of the waiter's that a wake-up would touch for it alone.
    private(set) var wakeUpsSent: UInt64 = 0
    private var blocks: [QueuedBlock] = []
    private var signalledSources: [LoopSource] = []
    private var controlMessages: [@Sendable (Loop) -> Void] = []
    /// How many item changes wait for the loop's thread (for tests).
    var pendingControlMessageCount: Int { self.controlMessages.count }

    // MARK: Producers (any thread)

    /// Queues `block` (an executor's job if `isJob`, of `serialExecutor` for an actor's) with the next sequence
    /// number, unless the loop has ended.
    mutating func enqueue(_ modes: BlockModes, _ body: @escaping @Sendable () -> Void,
                          isJob: Bool = false, serialExecutor: ObjectIdentifier? = nil) -> EnqueueAction {
        guard self.lifecycle != .ended else { return .refused }
        self.nextBlockSequence &+= 1
        self.blocks.append(QueuedBlock(sequence: self.nextBlockSequence, modes: modes, body: body, isJob: isJob,
                                       serialExecutor: serialExecutor))
        return .queued(self.arrival())
    }

    /// Notes that `source` was signalled (its flag went from clear to set).
    /// Notes a source's signal for the loop's next pass; dropped once the loop has ended (nothing would take it, and
    /// the list would keep the source alive).
    mutating func noteSignal(_ source: LoopSource) -> WakeAction {
        // Invalidated since `signal()` checked: `forgetSignal` has run or waits for this lock, and must not miss it.
        guard self.lifecycle != .ended, source.isValid else { return .none }
        self.signalledSources.append(source)
        return self.arrival()
    }

    /// Forgets a signal of an invalidated source, so that the list does not keep it alive.
    mutating func forgetSignal(of source: LoopSource) {
        self.signalledSources.removeAll { $0 === source }
    }

    /// Queues an item change for the loop's thread; refused (`nil`) once the loop has ended (its items are gone).
    mutating func post(_ message: @escaping @Sendable (Loop) -> Void) -> WakeAction? {
        guard self.lifecycle != .ended else { return nil }
        self.controlMessages.append(message)
        return self.arrival()
    }

    /// Asks the innermost run to return `.stopped`. While no run is active, a no-op (as in CF), unless a host loop
    /// drives the loop: the stop is then its next pass's.
    mutating func requestStop() -> WakeAction {
        guard self.runDepth > 0 else {
            // A host loop drives the loop (`LoopHostDriver`): the stop is for the pass its next `dispatch()` runs,
            // whether the host sleeps now (woken) or is busy with its own work between two passes.
            guard self.hostDrivers > 0 else { return .none }
            self.isStopPendingForHost = true
            return self.arrival()
        }
        if self.stopDepths.last != self.runDepth {
            self.stopDepths.append(self.runDepth)  // deeper than any pending one, so the list stays sorted
        }
        return self.arrival()
    }

    /// A stop is pending for the innermost run now active (not only for one outside it).
    private var isStopPendingHere: Bool {
        self.runDepth > 0 && self.stopDepths.last == self.runDepth
    }

    /// Makes the loop's current wait end, or its next one only look; a no-op while no run is active and no wait (a
    /// host loop's sleep) is announced.
    mutating func requestWakeUp() -> WakeAction {
        guard self.runDepth > 0 || self.isWaiting else { return .none }
        if !self.isWaiting {
            self.isWakeUpRequested = true
        }
        return self.arrival()
    }

    /// Makes every present and future run return `.stopped` (sticky).
    mutating func shutDown() -> WakeAction {
        guard self.lifecycle == .open else { return .none }
        self.lifecycle = .shuttingDown
        return self.arrival()
    }

    private mutating func arrival() -> WakeAction {
        guard self.isWaiting else { return .none }
        self.hasArrivalsSinceWaitBegan = true
        guard !self.isWakeUpInFlight else { return .none }
        self.isWakeUpInFlight = true
        self.wakeUpsSent &+= 1
        return .wakeUp(self.waitChannel)
    }

    // MARK: Queries (any thread)

    var isShuttingDownOrEnded: Bool { self.lifecycle != .open }

    var isLoopWaiting: Bool { self.isWaiting }

    var lifecycleState: Lifecycle { self.lifecycle }

    var activeRuns: Int { self.runDepth }

    // MARK: The loop (its thread)

    mutating func enterRun() {
        self.runDepth += 1
    }

    /// Counts a `LoopHostDriver` made (`1`) or freed (`-1`); the last one's going drops a stop none will take.
    mutating func noteHostDriver(_ change: Int) {
        self.hostDrivers += change
        if self.hostDrivers == 0 {
            self.isStopPendingForHost = false
        }
    }

    /// Takes a stop made while a host loop slept on the loop's behalf (`LoopHostDriver.dispatch()`).
    mutating func takeHostStop() -> Bool {
        defer { self.isStopPendingForHost = false }
        return self.isStopPendingForHost
    }

    /// Leaves a run; a stop it did not take (another result won) passes to the run outside it, and is spent with the
    /// outermost run, unless that was a host's pass (`LoopHostDriver.dispatch()`, `isHostPass`) while a driver lives:
    /// then the host's next `dispatch()` takes it, as it takes one made while no run is active (one made after the
    /// pass's last look, by an `exit` observer or another thread, is not lost between the two).
    mutating func leaveRun(isHostPass: Bool = false) {
        self.runDepth -= 1
        if let depth = self.stopDepths.last, depth > self.runDepth {
            self.stopDepths.removeLast()
            if self.runDepth > 0 && self.stopDepths.last != self.runDepth {
                self.stopDepths.append(self.runDepth)
            } else if self.runDepth == 0 && isHostPass && self.hostDrivers > 0 {
                self.isStopPendingForHost = true
            }
        }
        if self.runDepth == 0 {
            self.isWakeUpRequested = false
        }
    }

    /// Takes a stop pending for the innermost run; a shutdown is seen every time and stays.
    mutating func takeStop() -> Bool {
        if self.lifecycle != .open { return true }
        guard self.isStopPendingHere else { return false }
        self.stopDepths.removeLast()
        return true
    }

    /// Announces a wait that would rather sleep on `channel`. Refused (`nil`: the loop must only look) while
    /// anything is queued for it, a stop or a shutdown is pending, or a `wakeUp()` asked for one more pass.
    ///
    /// - Returns: The channel the wait must sleep on: the descriptor while a wake-up through it is in flight (its byte
    ///   may not be written yet, and a wait on the futex would not see it), otherwise `channel`.
    ///
    /// A host loop's wait (`forHost`) is refused by a stop made for the host's pass, not by one pending for a run whose
    /// callback iterates the host loop (that run sees it when the callback returns).
    mutating func beginWait(preferring channel: WakeUpChannel = .descriptor, forHost: Bool = false) -> WakeUpChannel? {
        loopPrecondition(!self.isWaiting, "LoopKit bug: a wait began inside another")
        let isStopPending = forHost ? self.isStopPendingForHost : self.isStopPendingHere
        guard self.lifecycle == .open, !isStopPending, !self.isWakeUpRequested,
              self.blocks.isEmpty, self.signalledSources.isEmpty, self.controlMessages.isEmpty else {
            self.isWakeUpRequested = false
            return nil
        }
        self.isWaiting = true
        self.hasArrivalsSinceWaitBegan = false
        self.waitChannel = self.isWakeUpInFlight ? .descriptor : channel
        return self.waitChannel
    }

    /// Ends the wait that `beginWait(preferring:)` announced.
    ///
    /// A futex wake-up in flight lapses here: its producer may not have sent it yet, and a later wait on the
    /// descriptor would not see it, so the next arrival must send one of its own. The futex's late wake-up is then
    /// found by some later wait on it, stale, and absorbed.
    ///
    /// - Returns: Whether anything arrived during the wait. When the wait ended only because of the wake-up channel
    ///   and nothing arrived, the wake-up was stale (sent for work that the loop took before it slept), and the
    ///   loop consumes it and waits again without a pass.
    mutating func endWait() -> Bool {
        self.isWaiting = false
        if self.waitChannel == .futex {
            self.isWakeUpInFlight = false
        }
        return self.hasArrivalsSinceWaitBegan
    }

    /// The loop took the wake-up (read the pipe's byte, or noted the futex word): the next arrival during a wait sends
    /// another.
    mutating func noteWakeUpConsumed() {
        self.isWakeUpInFlight = false
    }

    /// Takes the blocks queued since the last take, first queued first, trading buffers with `spare` (no allocation
    /// once both have grown).
    mutating func takeBlocks(into spare: inout [QueuedBlock]) {
        guard !self.blocks.isEmpty else { return }
        swap(&self.blocks, &spare)
    }

    /// Which of the lists the loop's thread takes are not empty, and whether a stop or shutdown is pending.
    var pendingWork: PendingWork {
        var pending: PendingWork = []
        if !self.blocks.isEmpty { pending.insert(.blocks) }
        if !self.signalledSources.isEmpty { pending.insert(.signalledSources) }
        if !self.controlMessages.isEmpty { pending.insert(.controlMessages) }
        if self.lifecycle != .open || !self.stopDepths.isEmpty { pending.insert(.stop) }
        return pending
    }

    /// Whether a queued block may run in `mode`.
    func hasBlock(admittedIn mode: LoopMode, commonModes: Set<LoopMode>) -> Bool {
        self.blocks.contains { $0.modes.admit(mode, commonModes: commonModes) }
    }

    /// Takes the sources signalled since the last take, first signalled first.
    mutating func takeSignalledSources(into spare: inout [LoopSource]) {
        guard !self.signalledSources.isEmpty else { return }
        swap(&self.signalledSources, &spare)
    }

    /// Takes the item changes queued by other threads, in order.
    mutating func takeControlMessages() -> [@Sendable (Loop) -> Void] {
        guard !self.controlMessages.isEmpty else { return [] }
        defer { self.controlMessages = [] }
        return self.controlMessages
    }

    /// Takes every queued block for an ending loop's final drain, after `blocks` (those the loop's thread already
    /// held). When `endsWith(blocks, sourcesOrChangesQueued)` holds, the loop ends with them, so that a block queued
    /// from now on is refused instead of lost; what the end drops is returned, to be released after the lock.
    /// `sourcesOrChangesQueued`: a source was signalled, or an item change queued, since the loop's thread last took
    /// them (the end would drop it).
    mutating func takeRemainingBlocks(into blocks: inout [QueuedBlock],
                                      endingIf endsWith: (_ blocks: [QueuedBlock], _ sourcesOrChangesQueued: Bool)
                                          -> Bool) -> DroppedWork? {
        blocks.append(contentsOf: self.blocks)
        self.blocks = []
        let sourcesOrChangesQueued = !self.signalledSources.isEmpty || !self.controlMessages.isEmpty
        return endsWith(blocks, sourcesOrChangesQueued) ? self.end() : nil
    }

    /// The loop's thread is gone: nothing queued can run, and nothing more is accepted.
    ///
    /// - Returns: The queued work, which the caller releases after the lock: releasing it may free the last
    ///   reference to an item or a capture whose deinit is user code, which may call back into this loop.
    mutating func end() -> DroppedWork {
        self.lifecycle = .ended
        self.stopDepths = []
        defer {
            self.blocks = []
            self.controlMessages = []
            self.signalledSources = []
        }
        return DroppedWork(blocks: self.blocks, controlMessages: self.controlMessages,
                           signalledSources: self.signalledSources)
    }

    /// Work that can no longer run, held until the caller has released the lock.
    struct DroppedWork {
        let blocks: [QueuedBlock]
        let controlMessages: [@Sendable (Loop) -> Void]
        let signalledSources: [LoopSource]
    }
}
