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
// `preconditionIsCurrent`); cross-thread state is in `shared` (a Mutex), `waiting` (an Atomic) and `wakeup`.
public final class Loop: @unchecked Sendable {
    enum Owner: Equatable {
        case thread(token: UInt64)
        case mainThread
    }

    // MARK: Immutable; readable from any thread
    let clock: any LoopClock
    /// Set when `clock` is a manual clock: the loop then advances it instead of sleeping.
    let manualClock: ManualLoopClock?
    let wakeup: WakeupPipe
    private let owner: Owner

    // MARK: Shared with other threads
    let shared = Mutex(SharedState())
    let waiting = Atomic<Bool>(false)
    /// The descriptor sources whose `events` changed (any thread) since the loop last looked, so that the epoll
    /// registrations of large modes are brought up to date for those sources alone, before the next sleep.
    let descriptorSourcesWithNewEvents = Mutex<[LoopDescriptorSource]>([])
    let hasDescriptorSourcesWithNewEvents = Atomic<Bool>(false)

    // MARK: Loop thread only
    var modeItemsByMode: [LoopMode: ModeItems] = [:]
    var commonModeSet: Set<LoopMode> = [.default, .tracking]
    /// The items added to `.common`, by identity: O(1) to add and remove, however many there are.
    var commonItems: [ObjectIdentifier: any LoopItem] = [:]
    var runningModes: [LoopMode] = []
    var lastSequence: UInt64 = 0
    let poller: any Poller
    let waitCounts = WaitCounters()
    /// The last wait found the wake-up pipe readable; it is drained at the end of the pass.
    var isWakeupReadable = false
    /// Counts waits, so that a pass can tell that a run nested in a callback polled since it did.
    var pollGeneration: UInt64 = 0
    var polledSources: [LoopDescriptorSource] = []
    /// From this many descriptor sources in a mode, the loop sleeps on an epoll set instead of a ppoll on all of them
    /// (`DescriptorRegistry`). Tests lower it to run the descriptor tests through both paths.
    var largeModeThreshold = Loop.defaultLargeModeThreshold
    static let defaultLargeModeThreshold = 32
    /// Where the loop sleeps until its next timer (`nil`: ppoll's own timeout, less precise). Only for the system
    /// clock: a manual clock's loop never sleeps on time.
    lazy var deadlineTimer: DeadlineTimer? = self.manualClock == nil && self.clock is SystemLoopClock
        ? DeadlineTimer() : nil
    /// The signalled sources that the running pass took from `shared` and has yet to run, so that a run nested in
    /// one of their callbacks runs them as CF's does, instead of leaving them for after the nested run returns.
    var unrunSignalledSources: ArraySlice<LoopSource> = []
    /// The tracer recording callouts, if one is attached (weak: the tracer owns the recording, not the loop).
    weak var tracer: LoopTracer?
    /// The buffer `fireDueTimers` collects due timers in, kept between passes so that a fire allocates nothing.
    var dueTimersScratch: [TimerEntry] = []
    /// The empty buffer that takes the place of the block queue at the next drain (see `performBlocks`).
    var spareBlocks: [QueuedBlock] = []
    /// The buffer `descriptorSourcesWithNewEvents` is traded with, so that taking the list allocates nothing.
    var sourcesWithNewEventsScratch: [LoopDescriptorSource] = []
    static let spareBlocksCapacityLimit = 4_096

    /// A loop owned by the calling thread, reading time from `clock`.
    ///
    /// This loop is not the thread's `Loop.current`; it is for tests (with a `ManualLoopClock`) and for code that
    /// keeps its own loop. Only the calling thread may run it.
    ///
    /// - Throws: `SystemCallError` when the wake-up pipe cannot be created (e.g. out of descriptors).
    public convenience init(clock: any LoopClock = SystemLoopClock()) throws(SystemCallError) {
        try self.init(clock: clock, owner: .thread(token: ThreadLocal.currentToken))
    }

    /// A loop owned by the calling thread that waits through `poller`: tests inject a fake one.
    convenience init(clock: any LoopClock, poller: any Poller) throws(SystemCallError) {
        try self.init(clock: clock, owner: .thread(token: ThreadLocal.currentToken), poller: poller)
    }

    init(clock: any LoopClock, owner: Owner, poller: any Poller = SystemPoller()) throws(SystemCallError) {
        self.clock = clock
        self.manualClock = clock as? ManualLoopClock
        self.wakeup = try WakeupPipe()
        self.owner = owner
        self.poller = poller
    }

    private static func makeOrTrap(owner: Owner) -> Loop {
        do {
            return try Loop(clock: SystemLoopClock(), owner: owner)
        } catch {
            preconditionFailure("LoopKit: cannot create a loop: \(error)")
        }
    }

    /// The main thread's loop. Any thread may use it; only the main thread may run it.
    public static let main: Loop = makeOrTrap(owner: .mainThread)

    /// The calling thread's loop, created the first time the thread asks and released when the thread exits.
    ///
    /// On the main thread this is `Loop.main`.
    @available(*, noasync, message: "a task may resume on another thread; use a LoopThread or Loop.main")
    public static var current: Loop {
        if let holder = ThreadLocal.threadObject as? ThreadLoopHolder {
            return holder.loop
        }
        let loop = ThreadLocal.isMainThread ? Loop.main : makeOrTrap(owner: .thread(token: ThreadLocal.currentToken))
        ThreadLocal.setThreadObject(ThreadLoopHolder(loop))
        return loop
    }

    private static let mainThreadToken = Atomic<UInt64>(0)

    deinit {
        // Items may outlive their loop and join another: forget this loop's modes (no callbacks from a deinit).
        for (item, _) in self.scheduledItems() {
            if let timer = item as? LoopTimer {
                timer.forgetModes()
            } else {
                item.modes = []
            }
        }
    }

    /// The thread that owns this loop has exited: remove every item from every mode (calling the sources' cancel
    /// callbacks, as CF does when a thread's run loop is finalized), drop the work that can never run, and refuse
    /// new work. Breaks the cycles through callbacks that capture the loop, so the loop is freed. Called on the
    /// exiting thread.
    func threadDidExit() {
        self.shared.withLock { state in
            state.hasEnded = true
            state.blocks = []
            state.controlMessages = []
            state.signalledSources = []
        }
        self.tracer = nil
        self.commonItems = [:]
        self.descriptorSourcesWithNewEvents.withLock { $0 = [] }
        self.sourcesWithNewEventsScratch = []
        for (item, mode) in self.scheduledItems() {
            self.detach(item, fromRealMode: mode)
        }
        // The queues still hold (stale) entries and the last pass's sources: let them go too.
        self.modeItemsByMode = [:]
        self.polledSources = []
        self.unrunSignalledSources = []
    }

    /// Every item in every mode, with the mode, in a stable order. Loop thread (or deinit).
    func scheduledItems() -> [(any LoopItem, LoopMode)] {
        var result: [(any LoopItem, LoopMode)] = []
        for mode in self.modeItemsByMode.keys.sorted(by: { $0.name < $1.name }) {
            guard let items = self.modeItemsByMode[mode] else { continue }
            for source in items.sources { result.append((source, mode)) }
            for source in items.descriptorSources { result.append((source, mode)) }
            for observer in items.observers { result.append((observer, mode)) }
            var seen = Set<ObjectIdentifier>()
            // A pass's due batch is off the queue while it fires (a timer callback may be what tears the loop down).
            for entry in items.dueTimers + items.timers.entries where entry.timer.modes.contains(mode) {
                if seen.insert(ObjectIdentifier(entry.timer)).inserted {
                    result.append((entry.timer, mode))
                }
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
        precondition(self.isCurrent, "must be called on the loop's own thread", file: file, line: line)
    }

    /// Traps unless called on the loop's thread, in debug builds only. Any thread.
    public func assertIsCurrent(file: StaticString = #fileID, line: UInt = #line) {
        assert(self.isCurrent, "must be called on the loop's own thread", file: file, line: line)
    }

    /// Traps unless called on the loop's thread, naming `call` in the message.
    func preconditionIsCurrent(_ call: StaticString, file: StaticString = #fileID, line: UInt = #line) {
        precondition(self.isCurrent, "\(call) must be called on the loop's own thread", file: file, line: line)
    }

    /// The loop clock's current instant. Any thread.
    public var now: LoopInstant {
        self.clock.now
    }

    /// Whether the loop is asleep waiting for work (CF's `CFRunLoopIsWaiting`). Any thread; a snapshot.
    public var isWaiting: Bool {
        self.waiting.load(ordering: .acquiring)
    }

    /// Records that `source`'s events changed, for the epoll registrations of large modes (each source listed once
    /// until the loop takes the list). Any thread; call it before waking the loop.
    func noteNewEvents(of source: LoopDescriptorSource) {
        guard !source.isListedWithNewEvents.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.descriptorSourcesWithNewEvents.withLock { list in
            list.append(source)
            self.hasDescriptorSourcesWithNewEvents.store(true, ordering: .releasing)
        }
    }

    /// Wakes the loop if it is asleep, so that it makes another pass. Any thread.
    ///
    /// Wake-ups coalesce: until the loop drains them, further calls make no system call.
    public func wakeUp() {
        self.updateShared { $0.requestWakeup() }
    }

    /// Changes the shared state under its lock; when `change` returns `true` (it asked for the first wake-up since
    /// the last drain), writes the wake-up byte once the lock is released, so no system call runs under it.
    /// Any thread.
    func updateShared(_ change: (inout SharedState) -> Bool) {
        if self.shared.withLock({ change(&$0) }) {
            self.wakeup.notify()
        }
    }

    /// Ends the innermost active `run` call with `.stopped`. Any thread, any callback.
    ///
    /// While no `run` call is active this does nothing (as in CF). A stop that arrives while a nested run is ending
    /// for another reason (a handled source, its deadline) ends the outer run; at the outermost run it is spent.
    public func stop() {
        self.updateShared { state in
            guard state.runDepth > 0 else { return false }
            state.isStopRequested = true
            return state.requestWakeup()
        }
    }

    /// Makes every present and future run return `.stopped` (sticky). Any thread. Used by `LoopThread`.
    func shutDown() {
        self.updateShared { state in
            state.isShutDown = true
            return state.requestWakeup()
        }
    }

    /// Whether `shutDown()` was called. Any thread.
    var isShutDown: Bool {
        self.shared.withLock { $0.isShutDown }
    }

    /// Runs `body` with the loop now if called on the loop's thread, else at the loop's next pass (waking it).
    ///
    /// Once the loop has ended (its thread exited, or its `LoopThread` finished), item changes are moot and dropped.
    func onLoopThread(_ body: @escaping @Sendable (Loop) -> Void) {
        if self.isCurrent {
            body(self)
            return
        }
        self.updateShared { state in
            guard !state.hasEnded else { return false }
            state.controlMessages.append(body)
            return state.requestWakeup()
        }
    }

    /// Applies the item changes that other threads queued. Loop thread.
    func applyControlMessages() {
        let messages = self.shared.withLock { state -> [@Sendable (Loop) -> Void] in
            guard !state.controlMessages.isEmpty else { return [] }
            defer { state.controlMessages = [] }
            return state.controlMessages
        }
        for message in messages {
            message(self)
        }
    }
}

/// What a thread's slot holds for `Loop.current`: released when the thread exits, which tears the loop down.
final class ThreadLoopHolder {
    let loop: Loop
    /// The thread's token, kept because the thread's slot for it may already be cleared when this is released.
    private let token: UInt64

    init(_ loop: Loop) {
        self.loop = loop
        self.token = ThreadLocal.currentToken
    }

    deinit {
        guard self.loop !== Loop.main else { return }
        ThreadLocal.restoreToken(self.token)  // so that `isCurrent` holds during the teardown's callbacks
        self.loop.threadDidExit()
    }
}
