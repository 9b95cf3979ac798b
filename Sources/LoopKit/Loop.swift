import Synchronization

/// An event loop in the manner of CFRunLoop: modes of sources, timers and observers, run on one thread.
///
/// A loop belongs to one thread and runs only while that thread is inside one of its `run` calls. `Loop.current`
/// is the calling thread's loop, created on first use and released when the thread exits; `Loop.main` is the main
/// thread's, reachable from any thread. `LoopThread` starts a thread that runs a loop.
///
/// Thread rules: `run`, `contains`, `currentMode` and `commonModes` must be called on the loop's thread (anything
/// else traps with a message that says so). `perform`, `wakeUp`, `stop`, `add`, `remove`, `addCommonMode`,
/// signalling sources and invalidating items are safe from any thread; an item added from another thread takes
/// effect at once, since the call wakes the loop.
// @unchecked Sendable: every `var` below the "Loop thread only" mark is touched only on the loop's thread (checked by
// `preconditionIsCurrent`); cross-thread state is in `state` (a lock around a state machine, with an atomic summary
// of its queued work) and `waiter` (whose cross-thread calls are thread-safe).
public final class Loop: @unchecked Sendable {
    enum Owner: Equatable {
        case thread(token: UInt64)
        case mainThread
    }

    // MARK: What every pass and every wake-up touch
    // First, and side by side, so that they share the object's first few cache lines: a sleeping loop's wake-up finds
    // its caches cold, and each further line a wake-up or a pass touches adds to the latency (`loop-bench`'s wakeup).
    // A producer reads the first three; the loop's thread alone writes the rest (`@exclusivity(unchecked)`: see
    // "Loop thread only" below).
    /// The lifecycle, runs, stops, waits and queued work, as a state machine (`LoopStateMachine`), and a summary of
    /// the queued work that the loop's thread reads without the lock.
    let state = SharedLoopState()
    /// The waiter's futex, notified without a call through the waiter: on a cold cache, every line a wake-up touches
    /// before its system call adds to the woken loop's latency.
    private let wakeUpFutex: WakeupFutex?
    /// Where the loop sleeps and how it is woken (the only sleeping machinery; see `LoopWaiter`).
    let waiter: any LoopWaiter
    /// Whether `clock` is the system's monotonic clock (its `readsSystemMonotonicClock`), read directly by a pass.
    let readsSystemClock: Bool
    /// Whether `tracers` was not empty when last assigned: a callout without a tracer reads this flag instead of the
    /// list, whose weak references are calls into the runtime. Loop thread.
    @exclusivity(unchecked) var mayHaveTracer = false
    /// Whether `monitors` was not empty when last assigned (see `mayHaveTracer`). Loop thread.
    @exclusivity(unchecked) var mayHaveMonitor = false
    /// A host's wait that `LoopHostDriver.prepare()` announced (the loop counts as asleep, so that other threads
    /// wake the host), not ended yet by `dispatch()` or a run (see `endHostWait()`).
    @exclusivity(unchecked) var isHostWaitAnnounced = false
    /// The depth of the run a `LoopHostDriver.dispatch()` makes (0: none): a stop ends it before its deadline does.
    @exclusivity(unchecked) var hostPassDepth = 0
    /// The signalled sources taken from `state` that have not run yet, first signalled first; a source is in it
    /// while its `candidateTicket` matches (see `Loop+Sources`). Loop thread.
    @exclusivity(unchecked) var signalledCandidates: [(source: LoopSource, ticket: UInt64)] = []
    /// The buffer a pass collects its ready descriptor sources in, kept empty between passes so that a callout
    /// allocates nothing (a run nested in a callout takes none, and makes its own).
    @exclusivity(unchecked) var readySourcesScratch: [(LoopDescriptorSource, DescriptorEvents)] = []
    /// Counts waits and looks, so that a pass can tell that a run nested in a callback waited since it did.
    @exclusivity(unchecked) var waitGeneration: UInt64 = 0
    /// Counts timer fires, so that a pass can tell whether it fired any.
    @exclusivity(unchecked) var firedTimers: UInt64 = 0
    /// The item changes taken from `state`, and the first not applied yet, across nested runs (see
    /// `applyControlMessages()`).
    @exclusivity(unchecked) var takenControlMessages: [@Sendable (Loop) -> Void] = []
    @exclusivity(unchecked) var nextControlMessage = 0
    /// The serial executors (actor identities) whose job is running, outermost first: a job that ran the loop nested
    /// is still running, and drains pass over the other jobs of its executor meanwhile (see `drainBlocks`).
    @exclusivity(unchecked) var runningSerialExecutors: [ObjectIdentifier] = []
    /// The blocks taken from `state` and not run yet, across nested runs (see `BlockQueue`).
    @exclusivity(unchecked) var blockQueue = BlockQueue()
    /// The empty buffer traded with the state's block list at the next take, so that taking allocates nothing.
    @exclusivity(unchecked) var spareBlocks: [QueuedBlock] = []
    static let spareBlocksCapacityLimit = 4_096

    // MARK: Immutable; readable from any thread
    let clock: any LoopClock
    /// A clock that others move (a `ManualLoopClock`) may be advanced to `.distantFuture`; the system clock, counting
    /// nanoseconds since boot, never gets there.
    var clockCanReachDistantFuture: Bool { !self.readsSystemClock }
    private let owner: Owner
    /// Passes that woke from a sleep and then had nothing to do (`Loop.counters`).
    let emptyWakeUps = Atomic<UInt64>(0)

    // MARK: Shared with other threads
    /// The actors' executor identities handed out so far, one per set of modes (see `LoopJobTarget`).
    let jobTargets = LoopLock<[LoopJobTarget]>([])
    /// Set once the loop's teardown (`end(finalDrain:)`) has let go of its items: another loop may adopt one only then
    /// (`LoopItem.bind` waits for it), never while this one still changes the item's loop-thread state. Any thread.
    private let letGoOfItems = Atomic<Bool>(false)

    // MARK: Loop thread only
    // `@exclusivity(unchecked)`: state that every pass touches. A checked access is a call into the runtime and a
    // thread-local lookup; on a display link's pass they were a fifth of the instructions. Only the loop's thread
    // touches these, and no access to them spans a callout (callbacks run between accesses, never inside one).
    @exclusivity(unchecked) var modeItemsByMode: [LoopMode: ModeItems] = [:]
    /// The same items, by `ModeItems.index`, in the order the modes were first used.
    @exclusivity(unchecked) var modeItemsByIndex: [ModeItems] = []
    /// The items `modeItems(for:)` returned last (see there).
    @exclusivity(unchecked) var lastModeItems: ModeItems?
    @exclusivity(unchecked) var commonModeSet: Set<LoopMode> = [.default, .tracking]
    /// The items added to `.common`, by identity: O(1) to add and remove, however many there are.
    var commonItems: [ObjectIdentifier: any LoopItem] = [:]
    @exclusivity(unchecked) var runningModes: [LoopMode] = []
    var lastSequence: UInt64 = 0
    /// While the loop tears down (`end(finalDrain:)`), the callouts its items make on leaving a mode (a source's
    /// `onUnschedule`), run once it has let go of every item; `nil` otherwise (`callOutUnlessTearingDown`).
    var calloutsAfterTeardown: [() -> Void]?
    /// `end(finalDrain:)` has begun.
    private var isEnding = false
    /// The ticket of the last source added to `signalledCandidates` (see `Loop+Sources`). Shared by nested runs, as
    /// CF's sources are.
    @exclusivity(unchecked) var lastCandidateTicket: UInt64 = 0
    @exclusivity(unchecked) var spareSignalled: [LoopSource] = []
    /// The buffer a pass sorts its runnable signalled sources in, kept so that running one allocates nothing.
    @exclusivity(unchecked) var spareRunnableSources: [(index: Int, source: LoopSource)] = []
    /// The tracers recording callouts, in the order they were attached (weak: a tracer owns its recording, not the
    /// loop). Loop thread.
    var tracers: [WeakAttachment<LoopTracer>] = [] {
        didSet { self.mayHaveTracer = !self.tracers.isEmpty }
    }
    /// The loop's `LoopHostDriver`s, told when a descriptor source leaves a mode (weak: a driver is its host's).
    /// Loop thread.
    @exclusivity(unchecked) var hostDrivers: [WeakAttachment<LoopHostDriver>] = []
    /// The hitch monitors told of every sleep, in every mode (weak, as `tracers`). Loop thread.
    var monitors: [WeakAttachment<HitchMonitor>] = [] {
        didSet { self.mayHaveMonitor = !self.monitors.isEmpty }
    }
    /// How long the loop ran each mode, kept while a monitor is attached (see `ModeTimes`). Loop thread.
    @exclusivity(unchecked) var modeTimes = ModeTimes()
    /// The buffer `fireDueTimers` collects due timers in, kept between passes so that a fire allocates nothing.
    @exclusivity(unchecked) var dueTimersScratch: [TimerEntry] = []
    /// The main loop serves the main queue from its first run on (see `Loop+MainQueue`).
    var isServingMainQueue = false
    /// The source that serves the main queue, once it does. Loop thread (the main thread).
    var mainQueueSource: LoopDescriptorSource?
    /// Whether main-queue work is running (a run nested in it cannot serve the main queue). Loop thread.
    @exclusivity(unchecked) var isDrainingMainQueue = false

    /// Whether this is `Loop.main`. Any thread.
    var isMainLoop: Bool { self.owner == .mainThread }

    /// A loop owned by the calling thread, reading time from `clock`.
    ///
    /// This loop is not the thread's `Loop.current`; it is for tests (with a `ManualLoopClock`) and for code that
    /// keeps its own loop. Only the calling thread may run it. A clock that conforms to `VirtualLoopClock` is
    /// advanced instead of slept on.
    ///
    /// - Throws: `SystemCallError` when the wake-up pipe cannot be created (e.g. out of descriptors).
    public convenience init(clock: any LoopClock = SystemLoopClock()) throws(SystemCallError) {
        try self.init(clock: clock, owner: .thread(token: ThreadLocal.currentToken),
                      waiter: Loop.makeWaiter(clock: clock, backend: LoopBackend.selected))
    }

    /// A loop owned by the calling thread that sleeps through `waiter`: tests inject their own.
    convenience init(clock: any LoopClock, waiter: any LoopWaiter) {
        self.init(clock: clock, owner: .thread(token: ThreadLocal.currentToken), waiter: waiter)
    }

    init(clock: any LoopClock, owner: Owner, waiter: any LoopWaiter) {
        self.clock = clock
        self.readsSystemClock = clock.readsSystemMonotonicClock
        self.waiter = waiter
        self.wakeUpFutex = waiter.wakeUpFutex
        self.owner = owner
    }

    /// The waiter for a loop on `clock`: `backend`'s, advancing the clock instead of sleeping if it is virtual.
    static func makeWaiter(clock: any LoopClock, backend: LoopBackend) throws(SystemCallError) -> any LoopWaiter {
        let waiter = try PollWaiter(backend: backend, clock: clock)
        if let virtualClock = clock.virtualClock {
            return VirtualTimeWaiter(wrapping: waiter, clock: virtualClock)
        }
        return waiter
    }

    private static func make(owner: Owner) throws(SystemCallError) -> Loop {
        let clock = SystemLoopClock()
        return Loop(clock: clock, owner: owner, waiter: try Loop.makeWaiter(clock: clock, backend: LoopBackend.selected))
    }

    private static func makeOrTrap(owner: Owner, call: StaticString) -> Loop {
        do {
            return try Loop.make(owner: owner)
        } catch {
            fatalError("LoopKit: \(call) cannot create the loop: \(error)")
        }
    }

    /// The main thread's loop. Any thread may use it; only the main thread may run it.
    ///
    /// While the main thread runs it in a common mode, the main queue is one of its sources: `DispatchQueue.main`
    /// work and `@MainActor` code run between its other callouts, as on CFRunLoop's main loop, and the main queue
    /// keeps the common modes alive, so `run()` returns only when stopped. A tool whose `main` runs it must be
    /// synchronous: an `async` main parks the main thread in Dispatch, which then owns it (the runs are `noasync`).
    /// The first run asks libdispatch for the main queue's descriptor, and libdispatch traps if none is left then:
    /// lower the process's descriptor limit only after it.
    public static let main: Loop = makeOrTrap(owner: .mainThread, call: "Loop.main")

    /// The calling thread's loop, created the first time the thread asks and released when the thread exits.
    ///
    /// On the main thread this is `Loop.main`. Blocks queued to it that it has not run when its thread exits end with
    /// it, as CF's do with a thread's run loop, and so does a task scheduled on it (cancelled): a thread that others
    /// hand work to should run its loop until it is stopped, or be a `LoopThread`, whose end runs what was queued.
    /// An executor's jobs queued to it (`LoopExecutor`) are the exception: they run as the thread exits (a job queued
    /// after that, by a task that awaited something else, traps). During the exit, `current` is that ending loop.
    /// After `invalidate()`, the thread's `current` stays that ended loop, which takes no more work.
    ///
    /// - Precondition: The loop can be created (two descriptors); `LoopThread` and `Loop(clock:)` throw instead.
    @available(*, noasync, message: "a task may resume on another thread; use a LoopThread or Loop.main")
    public static var current: Loop {
        do {
            return try Loop.currentCreatingIfNeeded()
        } catch {
            fatalError("LoopKit: Loop.current cannot create the thread's loop: \(error)")
        }
    }

    /// The calling thread's loop, created if needed; throws when it cannot be. Any thread (for itself).
    static func currentCreatingIfNeeded() throws(SystemCallError) -> Loop {
        if let holder = ThreadLocal.threadObject as? ThreadLoopHolder {
            return holder.loop
        }
        let loop = ThreadLocal.isMainThread ? Loop.main : try Loop.make(owner: .thread(token: ThreadLocal.currentToken))
        ThreadLocal.setThreadObject(ThreadLoopHolder(loop))
        return loop
    }

    private static let mainThreadToken = Atomic<UInt64>(0)

    deinit {
        #if DEBUG
        let (activeRuns, isWaiting) = self.state.withLock { ($0.activeRuns, $0.isLoopWaiting) }
        // A host's wait may still be announced: its driver, freed on another thread, posted the end of it in vain.
        assert(activeRuns == 0 && (!isWaiting || self.isHostWaitAnnounced),
               "LoopKit bug: a loop was freed while one of its runs was active")
        #endif
        // Items may outlive their loop and join another: forget this loop's modes (no user callbacks from a deinit).
        // An item's tie already reads `nil` (it is weak), so another loop may be adopting it on another thread right
        // now: each is forgotten under the lock that guards its tie, and only while nothing has tied it again.
        var endActions: [@Sendable (Bool) -> Void] = []
        // A timer left only in the common items (a link removed by name from each real mode) is in no mode below, and
        // its grid still holds its link: let go of it too, or the link, its timer and its callback live on in a cycle.
        for case let timer as LoopTimer in self.commonItems.values {
            Self.forgetModesUnlessAdopted(timer)
        }
        for (item, _) in self.scheduledItems() {
            guard Self.forgetModesUnlessAdopted(item) else { continue }
            if let action = (item as? LoopDescriptorSource)?.whenLoopEnds {
                endActions.append(action)
            }
        }
        // LoopKit's own, never user code: a signal source ends with its loop, freed or ended, so that no signal is
        // swallowed by a loop that is gone. One per mode of the source: each ends it only once.
        for action in endActions {
            action(false)
        }
    }

    /// Forgets the modes of `item`, of a loop being freed, unless another loop has tied it since. A display link's
    /// timer lets go of its link, released after the item's lock.
    ///
    /// - Returns: Whether the item was this loop's to forget.
    @discardableResult
    private static func forgetModesUnlessAdopted(_ item: any LoopItem) -> Bool {
        let released: (isOurs: Bool, link: AnyObject?) = item.withTie { tie in
            guard tie.loop == nil else { return (false, nil) }
            guard let timer = item as? LoopTimer else {
                item.modes = []
                return (true, nil)
            }
            let link = timer.grid?.retainedServedObject
            timer.forgetModes()
            return (true, link)
        }
        withExtendedLifetime(released.link) {}
        return released.isOurs
    }

    /// Ends the loop for good. First, a final drain runs the executor jobs queued so far (`LoopExecutor`), and those
    /// they queue, for a few rounds, whatever their modes, so that no task is left waiting for ever by a job already
    /// queued. Then it removes every item from every mode (calling the sources' `onUnschedule` callbacks), drops the
    /// queued blocks and item changes, and refuses new blocks and jobs. Loop thread only, outside every run.
    ///
    /// Items whose callbacks capture the loop form cycles with it (the loop holds its items); invalidating the items,
    /// or the loop, breaks them, so a loop of your own is freed with its descriptors once you let go of it. A loop
    /// that belongs to a thread (`Loop.current`, a `LoopThread`'s) ends this way by itself when its thread ends.
    ///
    /// A job of that final drain that calls `invalidate()` again returns at once, and every run started from one
    /// returns `.stopped` at once.
    ///
    /// - Precondition: Called on the loop's thread, while none of its runs is active; not `Loop.main`.
    @available(*, noasync)
    public func invalidate() {
        self.preconditionIsCurrent("Loop.invalidate()")
        loopPrecondition(self.owner != .mainThread, "Loop.invalidate(): the main loop lives as long as the process")
        loopPrecondition(self.runningModes.isEmpty,
                         "Loop.invalidate(): called from inside one of the loop's runs; stop the run first")
        self.threadDidExit()
    }

    /// The thread that owns this loop has exited: run the executor jobs queued to it, remove every item from every
    /// mode (calling the sources' cancel callbacks, as CF does when a thread's run loop is finalized), drop the rest of
    /// the work that can never run, and refuse new work. Called on the exiting thread (see `end(finalDrain:)`).
    func threadDidExit() {
        self.end(finalDrain: .jobs)
    }

    /// What an ending loop still runs of the work queued before its end.
    enum FinalDrain {
        /// Executor jobs only, whatever their modes (a thread's exit, `invalidate()`): a job dropped would leave its
        /// task waiting for ever. `perform` blocks are dropped, as CF drops an ended loop's.
        case jobs
        /// Every queued block, whatever its modes, every signalled source and every item change (a `LoopThread`'s
        /// end, after its last run).
        case everything

        func runs(_ block: QueuedBlock) -> Bool {
            self == .everything || block.isJob
        }
    }

    /// Ends the loop for good. Loop thread, outside every run. Later calls return at once, nested ones too (an
    /// `invalidate()` from a job of the final drain): the first call finishes the end.
    ///
    /// 1. The final drain: the loop shuts down (every run, nested ones too, returns `.stopped` at once, so nothing
    ///    runs out of its order), then runs what `finalDrain` names of the work queued so far, and what that work
    ///    queues in turn, for up to `LoopThread.finalDrainRounds` rounds.
    /// 2. The end: with the last round's take, in one lock round trip, so that whatever is queued from then on is
    ///    refused (a block or a job traps) rather than lost.
    /// 3. The teardown: every item leaves every mode, which breaks the cycles through callbacks that capture the loop,
    ///    so the loop is freed. No user code runs until every item is let go of (`letGoOfItems`): another thread that
    ///    adds one of the items to another loop waits for that, so that this loop never changes an item another one
    ///    has adopted.
    /// 4. User code again: the last round's blocks (queued before the end, so not dropped), then the sources'
    ///    `onUnschedule` callbacks in the order the items left their modes; then what may hold user code (dropped
    ///    blocks, released items and their callbacks) is released.
    func end(finalDrain: FinalDrain) {
        guard !self.isEnding else { return }
        self.isEnding = true
        self.shutDown()
        self.endHostWait()  // a host that waits for this loop waits for nothing now
        let (dropped, lastRound) = self.runFinalDrain(finalDrain)
        self.tracers = []
        self.monitors = []
        self.calloutsAfterTeardown = []
        // Only this loop's items: no other loop can have adopted one yet (`bind` waits for `letGoOfItems`, and refuses
        // before the end), but an item's tie is the one authority on where it belongs.
        let isOurs = { (item: any LoopItem) in item.withTie { $0.loop === self } }
        // Told they left the common items, as a removal would tell them: a display link left only there (removed by
        // name from each real mode) is in no mode below, and its timer would otherwise hold it, and the callback, for
        // good.
        let common = self.commonItems
        self.commonItems = [:]
        var leftEveryMode: [any LoopItem] = []  // invalidated items whose queued removal was dropped above
        for item in common.values.sorted(by: { $0.sequence < $1.sequence }) where isOurs(item) {
            item.commonMembershipDidChange(isCommon: false, loop: self)
            if item.modes.isEmpty && !item.isValid {
                leftEveryMode.append(item)
            }
        }
        var endActions: [@Sendable (Bool) -> Void] = []  // once per mode of the source: each action ends it only once
        let scheduled = self.scheduledItems()
        for (item, mode) in scheduled where isOurs(item) {
            if let action = (item as? LoopDescriptorSource)?.whenLoopEnds {
                endActions.append(action)
            }
            self.detach(item, fromRealMode: mode)
            if item.modes.isEmpty && !item.isValid {
                leftEveryMode.append(item)
            }
        }
        let modeItems = (self.modeItemsByMode, self.modeItemsByIndex, self.lastModeItems)
        self.modeItemsByMode = [:]
        self.modeItemsByIndex = []
        self.lastModeItems = nil
        self.waiter.forgetModes()
        // Moved out before they are released: a deinit of a capture is user code, which may reach these again.
        let abandoned = (self.blockQueue.takeAll(), self.signalledCandidates,
                         self.takenControlMessages[self.nextControlMessage...])
        self.blockQueue = BlockQueue()
        self.signalledCandidates = []
        self.takenControlMessages = []
        self.nextControlMessage = 0
        self.spareBlocks = []
        self.spareSignalled = []
        self.spareRunnableSources = []
        let callouts = self.calloutsAfterTeardown ?? []
        self.calloutsAfterTeardown = nil
        self.letGoOfItems.store(true, ordering: .releasing)
        // User code from here on.
        for block in lastRound {
            block.body()
        }
        for callout in callouts {
            callout()
        }
        withExtendedLifetime(dropped) {}
        for item in leftEveryMode {
            item.didLeaveEveryMode()
        }
        withExtendedLifetime((scheduled, modeItems, abandoned, common)) {}
        for action in endActions {
            action(true)
        }
    }

    /// Steps 1 and 2 of `end(finalDrain:)`: runs what `finalDrain` names of the queued work, round by round, and ends
    /// the loop's lifecycle with the last round's take. Loop thread.
    ///
    /// - Returns: What the end dropped, to be released once the loop has let go of its items; and the blocks of the
    ///   last round, taken with the end, to be run then (a job among them that queues another traps, never loses it).
    private func runFinalDrain(
        _ finalDrain: FinalDrain
    ) -> (dropped: (work: LoopStateMachine.DroppedWork, blocks: [QueuedBlock]), lastRound: [QueuedBlock]) {
        var droppedBlocks: [QueuedBlock] = []
        var round = 0
        while true {
            round += 1
            if finalDrain == .everything {
                self.applyControlMessages()
                self.performRemainingSignalledSources()  // a signal made before the end is not lost either
                self.handOverBeforeEnd()  // nor a process signal, whose handler may still queue work now
            }
            let isFinal = round >= LoopThread.finalDrainRounds
            let (taken, droppedWork) = self.takeRemainingBlocks(endingIf: { blocks, sourcesOrChangesQueued in
                // A signal or an item change made after this round took them (by a block or source of this round, or
                // by another thread) takes another round, as a block does: the end would drop it.
                isFinal || !(blocks.contains { finalDrain.runs($0) }
                                 || (finalDrain == .everything && sourcesOrChangesQueued))
            })
            var toRun: [QueuedBlock] = []
            for block in taken {
                if finalDrain.runs(block) {
                    toRun.append(block)
                } else {
                    droppedBlocks.append(block)
                }
            }
            if let droppedWork {
                return ((droppedWork, droppedBlocks), toRun)
            }
            if finalDrain == .everything {
                // An item change queued before one of these blocks is applied before it runs, as in a pass.
                self.applyControlMessages()
            }
            for block in toRun {
                block.body()
            }
        }
    }

    /// Runs `callout` (an item's, as it leaves a mode) now, or, while the loop tears down, once it has let go of every
    /// item (`end(finalDrain:)`). Loop thread.
    func callOutUnlessTearingDown(_ callout: @escaping () -> Void) {
        if self.calloutsAfterTeardown?.append(callout) == nil {
            callout()
        }
    }

    /// Whether the loop's teardown has let go of its items (`end(finalDrain:)`): another loop may adopt them. Any thread.
    var hasLetGoOfItems: Bool {
        self.letGoOfItems.load(ordering: .acquiring)
    }

    /// Waits until the teardown of this loop, which has ended, has let go of its items (no user code runs from the end
    /// until then, so the wait is short). Any thread; on the loop's own, returns at once (it would wait for itself).
    func waitUntilItemsAreLetGo() {
        var looks = 0
        while !self.hasLetGoOfItems && !self.isCurrent {
            PlatformThread.pause(beforeLook: looks)  // yields, then sleeps: a teardown takes O(items)
            looks += 1
        }
    }

    /// Every item in every mode, with the mode, in a stable order. Loop thread (or deinit).
    func scheduledItems() -> [(any LoopItem, LoopMode)] {
        var result: [(any LoopItem, LoopMode)] = []
        for mode in self.modeItemsByMode.keys.sorted(by: { $0.name < $1.name }) {
            guard let items = self.modeItemsByMode[mode] else { continue }
            for source in items.sources { result.append((source, mode)) }
            for source in items.descriptorSources { result.append((source, mode)) }
            for observer in items.observers { result.append((observer, mode)) }
            for timer in items.timers.allTimers {
                result.append((timer, mode))
            }
        }
        return result
    }

    /// Whether the calling thread is this loop's thread. Any thread; never a false positive.
    public var isCurrent: Bool {
        let token = ThreadLocal.currentToken
        switch self.owner {
        case .thread(let owner):
            return token == owner
        case .mainThread:
            let known = Loop.mainThreadToken.load(ordering: .relaxed)
            if known != 0 { return known == token }
            guard ThreadLocal.isMainThread else { return false }
            Loop.mainThreadToken.store(token, ordering: .relaxed)
            return true
        }
    }

    /// Traps unless called on the loop's thread, in every build. Any thread.
    public func preconditionIsCurrent(file: StaticString = #fileID, line: UInt = #line) {
        loopPrecondition(self.isCurrent, "Loop.preconditionIsCurrent(): not on the loop's own thread",
                         file: file, line: line)
    }

    /// Traps unless called on the loop's thread, in debug builds only. Any thread.
    public func assertIsCurrent(file: StaticString = #fileID, line: UInt = #line) {
        assert(self.isCurrent, "must be called on the loop's own thread", file: file, line: line)
    }

    /// Traps unless called on the loop's thread, naming `call` in the message.
    func preconditionIsCurrent(_ call: StaticString, file: StaticString = #fileID, line: UInt = #line) {
        loopPrecondition(self.isCurrent, "\(call) must be called on the loop's own thread", file: file, line: line)
    }

    /// The loop clock's current instant. Any thread.
    public var now: LoopInstant {
        self.clock.now
    }

    /// `now`, read straight from the system's monotonic clock when that is the loop's clock (as its
    /// `readsSystemMonotonicClock` promises), without a call through the protocol: a pass reads it twice or more.
    @inline(__always)
    var passNow: LoopInstant {
        self.readsSystemClock ? LoopInstant(nanoseconds: monotonicNanoseconds()) : self.clock.now
    }

    /// Whether the loop is asleep waiting for work (CF's `CFRunLoopIsWaiting`). Any thread; a snapshot.
    public var isWaiting: Bool {
        self.state.withLock { $0.isLoopWaiting }
    }

    /// Wakes the loop if it is asleep, so that it makes another pass; a no-op while no run is active and no host loop
    /// sleeps for it (`LoopHostDriver`). Any thread.
    ///
    /// Wake-ups coalesce: while one is on its way, further calls make no system call. Called while the loop is
    /// running but awake, it makes the loop's next wait a mere look.
    public func wakeUp() {
        self.wake(if: self.state.withLock { $0.requestWakeUp() })
    }

    /// Acts on a state machine's decision, after its lock is released: sends the wake-up if asked. Any thread.
    @inline(__always)
    func wake(if action: LoopStateMachine.WakeAction) {
        if case .wakeUp(let channel) = action {
            if channel == .futex, let futex = self.wakeUpFutex {
                futex.notify()
            } else {
                self.waiter.wakeUp(through: channel)
            }
        }
    }

    /// Ends the innermost active `run` call with `.stopped`. Any thread, any callback.
    ///
    /// While no `run` call is active this does nothing (as in CF), unless a `LoopHostDriver` drives the loop: its next
    /// `dispatch()` then returns `.stopped`. The stop belongs to the run innermost at the call:
    /// a run nested later (by the callback that called `stop()`) does not take it. A stop that arrives while a nested
    /// run is ending for another reason (a handled source, its deadline) ends the outer run; at the outermost run it is
    /// spent, unless that run was a host's pass (`LoopHostDriver.dispatch()`): the host's next `dispatch()` takes it.
    public func stop() {
        self.wake(if: self.state.withLock { $0.requestStop() })
    }

    /// Makes every present and future run return `.stopped` (sticky). Any thread. Used by `LoopThread`.
    func shutDown() {
        self.wake(if: self.state.withLock { $0.shutDown() })
    }

    /// Whether `shutDown()` was called. Any thread.
    var isShutDown: Bool {
        self.state.withLock { $0.isShuttingDownOrEnded }
    }

    /// Whether the loop has ended (its thread exited, its `LoopThread` finished, or it was invalidated): it takes no
    /// more items or blocks. Any thread.
    var hasEnded: Bool {
        self.state.withLock { $0.lifecycleState == .ended }
    }

    /// Runs `body` with the loop now if called on the loop's thread, else at the loop's next pass (waking it).
    ///
    /// On the loop's thread, the changes other threads queued before this call are applied first: each returned
    /// before this one was made (as in CF, where an add or a remove is done when it returns), so a remove here must
    /// not be undone by an add queued earlier and applied at the next pass.
    ///
    /// Once the loop has ended (its thread exited, or its `LoopThread` finished), item changes are moot and dropped.
    ///
    /// Inlined so that on the loop's thread the closure is only called, not allocated: a loop thread adding a million
    /// timers makes no closure context for each.
    ///
    /// - Returns: `false` if the loop has ended, and refused `body` (see `post`).
    @inline(__always)
    @discardableResult
    func onLoopThread(_ body: @escaping @Sendable (Loop) -> Void) -> Bool {
        if self.isCurrent {
            self.applyControlMessagesQueuedBefore()
            body(self)
            return true
        }
        return self.post(body)
    }

    /// Applies the item changes other threads queued, if any, before one made on the loop's thread (`onLoopThread`,
    /// the queries of items and modes). Loop thread.
    @inline(__always)
    func applyControlMessagesQueuedBefore() {
        if self.state.pending.contains(.controlMessages) || self.nextControlMessage < self.takenControlMessages.count {
            self.applyControlMessages()
        }
    }

    /// Lets go of `value` on the loop's thread, where what it holds lives: off that thread, hands it to the loop, which
    /// lets go of it at its next pass; on it, or once the loop has ended, leaves it to the caller, which lets go of it
    /// when it returns. For a deinit whose stored value may hold loop-confined state. Any thread.
    func letGoOnItsThread<Value>(_ value: Value) {
        guard !self.isCurrent else { return }
        let handedOver = HandedOver(value)
        self.post { _ in withExtendedLifetime(handedOver) {} }
    }

    /// Carries a value to the loop's thread (`letGoOnItsThread(_:)`), where alone it is let go of.
    private struct HandedOver<Value>: @unchecked Sendable {
        let value: Value

        init(_ value: Value) {
            self.value = value
        }
    }

    /// Queues `body` for the loop's next pass, waking it. Any thread.
    ///
    /// - Returns: `false` if the loop has ended: `body` will never run.
    @discardableResult
    func post(_ body: @escaping @Sendable (Loop) -> Void) -> Bool {
        guard let action = self.state.withLock({ $0.post(body) }) else { return false }
        self.wake(if: action)
        return true
    }

    /// Applies the item changes that other threads queued, first queued first. Loop thread.
    ///
    /// The changes taken wait in `takenControlMessages`, which nested runs share: a run nested in one (an
    /// `onSchedule` callback) goes on with the changes after it before it takes newer ones, so none is applied
    /// before one queued earlier.
    func applyControlMessages() {
        if self.state.pending.contains(.controlMessages) {
            let messages = self.state.withLock { $0.takeControlMessages() }
            if self.takenControlMessages.isEmpty {
                self.takenControlMessages = messages
            } else {
                self.takenControlMessages += messages
            }
        }
        while self.nextControlMessage < self.takenControlMessages.count {
            let message = self.takenControlMessages[self.nextControlMessage]
            self.nextControlMessage += 1
            message(self)
        }
        if !self.takenControlMessages.isEmpty {
            // The cursor is reset before the messages are released: a capture's deinit is user code, which may
            // change an item here and so apply newer messages, and must find the list and the cursor in step.
            let spent = self.takenControlMessages
            self.takenControlMessages = []
            self.nextControlMessage = 0
            withExtendedLifetime(spent) {}
        }
    }
}

/// What a thread's slot holds for `Loop.current`: released when the thread exits, which tears the loop down.
final class ThreadLoopHolder {
    let loop: Loop
    /// The thread's token, kept because the thread's slot for it may already be cleared when this is released.
    private let token: UInt64
    /// Put in the thread's slot while the loop ends at the thread's exit, and taken out when it has ended; its own
    /// release ends nothing.
    private let isStandIn: Bool

    init(_ loop: Loop, isStandIn: Bool = false) {
        self.loop = loop
        self.token = ThreadLocal.currentToken
        self.isStandIn = isStandIn
    }

    deinit {
        guard !self.loop.isMainLoop, !self.isStandIn else { return }  // `Loop.main` would be created at a thread's exit
        ThreadLocal.restoreToken(self.token)  // so that `isCurrent` holds during the end's user code
        // glibc has cleared the loop's slot too: without a stand-in, `Loop.current` in the end's user code (a job, an
        // `onUnschedule`) would make the thread a second loop, which no one would run. Taken out once the end is done.
        ThreadLocal.setThreadObject(ThreadLoopHolder(self.loop, isStandIn: true))
        self.loop.threadDidExit()
        // Released now rather than in glibc's next round of destructors, which may be its last: the loop is freed.
        ThreadLocal.clearThreadObject()
    }
}
