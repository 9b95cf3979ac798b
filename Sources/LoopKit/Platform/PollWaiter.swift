import CLoopKitSystem
import Synchronization

/// The waiter of the `linux` and `portable` backends: a poll set rebuilt per wait from the running mode, a pipe to
/// be woken through, and, on Linux, a timerfd for deadlines, epoll registrations for large modes and a futex.
///
/// A mode with no descriptor sources (Linux, the system clock) sleeps on the futex instead, until its next timer:
/// waking it is one system call, and so is its wait (see `WakeupFutex`). A wait with a deadline does so only on a
/// thread whose timer slack is at most 1 µs (a `LoopThread`'s), since the futex's timeout is late by up to the slack
/// where the timerfd is not.
///
/// A small mode (or any mode on the portable backend) waits in one poll on the wake-up pipe, the deadline timer and
/// all its descriptors. A mode with `largeModeThreshold` descriptor sources or more (Linux) keeps them registered in
/// an epoll set (`DescriptorRegistry`) that also holds the pipe and the timer, and sleeps in epoll_wait(2) on it;
/// every few waits it first looks at a few of its descriptors for closes, so that a wait costs the same however many
/// are idle, and at all of them once the loop has gone idle (`idleSweepDelay`). The deadline timer is used only for a
/// clock that reads the system's monotonic clock; any other clock gets relative timeouts.
///
/// A wait on descriptors that would block right after a wait that found sources ready first offers the processor to
/// any other runnable thread (`PlatformThread.offerProcessor()`). A busy server's loop then comes back to the
/// descriptors that became ready meanwhile and serves them in one pass, where otherwise it would sleep and be woken
/// for each: with more busy threads than processors (two loops and their client on two cores), every such sleep left
/// a processor idle while a wake-up was in flight. A loop whose last wait found nothing (idle, or woken for a timer
/// or a block) sleeps at once, and so does a mode without descriptors, or a wait whose deadline is less than
/// `offerLead` away (a timer must not wait for another thread's slice).
///
/// An offer taken by a thread that does not block (a CPU-bound neighbour, or the client of a benchmark) keeps the
/// processor away for that thread's whole slice, milliseconds, while the loop's descriptors wait. When two offers
/// within `lateOfferWindow` offers come back `stallThreshold` late or later (one alone may be a thread that ran out a
/// single slice), the next `napsAfterStall` offers are naps instead: `napLength` asleep on the wake-up pipe alone (a
/// wake-up from another thread or a signal ends it), which lets the neighbour run; when the nap's timeout ends it, a
/// `LoopThread`, whose slice is the shorter (`PlatformThread.tuneCurrentThreadForLatency`), takes the processor back
/// (a loop on another thread keeps the default slice and may wait longer). The descriptors wait at most about
/// `napLength` for the neighbour rather than its slice; on the portable backend poll(2) rounds a nap up to 1 ms. Naps
/// are for the processor the late offers were made on: once the scheduler runs the loop on another (Linux; elsewhere
/// the processor is not known), it offers again and finds out again. The window counts offers, not naps or idle time,
/// so after its naps one more late offer starts them again. A sibling loop that takes an offer gives the processor
/// back within its pass, far below the threshold.
///
/// Only `wakeUp(through:)`, `noteNewEvents(of:)`, `counts` and `wakeUpFutex` are safe from other threads; the rest is
/// loop thread only.
// @unchecked Sendable: every `var` is touched only on the loop's thread (the waiter's only caller there); the members
// other threads use are the pipe and the futex (thread-safe), the counters (atomic) and `sourcesWithNewEvents` (a
// lock).
final class PollWaiter: LoopWaiter, @unchecked Sendable {
    // MARK: What every wait touches
    // First, and side by side, so that they share the object's first cache lines (see the same note in `Loop`). The
    // `var`s are the loop thread's.
    /// What a mode without descriptors sleeps on (`nil`: the pipe): Linux, the system clock, and the system's poll.
    private let futex: WakeupFutex?
    let counts = WaitCounts()
    /// Whether `sourcesWithNewEvents` may hold a source (any thread).
    private let hasSourcesWithNewEvents = Atomic<Bool>(false)
    /// The large modes' epoll registrations, by `ModeItems` identity. Loop thread.
    @exclusivity(unchecked) private var registries: [ObjectIdentifier: DescriptorRegistry] = [:]
    /// The last wait or look found the wake-up pipe readable, and it has not been drained since.
    @exclusivity(unchecked) private var hasUnreadPipeWakeUp = false
    /// The last wait ended for the futex's wake-up, and it has not been consumed since.
    @exclusivity(unchecked) private var hasUnreadFutexWakeUp = false
    /// The last wait (or look) found descriptor sources ready: the loop is serving I/O, and the next blocking wait
    /// on descriptors offers the processor first.
    @exclusivity(unchecked) private var lastWaitFoundSources = false
    /// The loop's thread had at most 1 µs of timer slack when its run began (a `LoopThread`'s has): a futex wait then
    /// ends as close to its deadline as the timerfd does. With more (Linux's default is 50 µs), a wait with a deadline
    /// stays on the timerfd, which the kernel fires without slack.
    @exclusivity(unchecked) private var isTimerSlackTight = false

    // MARK: Immutable; readable from any thread
    let backend: LoopBackend
    let wakeupPipe: WakeupPipe
    private let clock: any LoopClock
    /// The sources whose `events` changed (any thread) since the loop last waited, so that the epoll registrations
    /// of large modes are brought up to date for those alone.
    private let sourcesWithNewEvents = LoopLock<[LoopDescriptorSource]>([])
    /// Set under `sourcesWithNewEvents`' lock by `forgetModes()` (the loop has ended): no change is listed after, where
    /// it could never be applied and the list would only keep its source alive.
    private let hasForgottenModes = Atomic<Bool>(false)

    // MARK: Loop thread only
    private let poller: any Poller
    /// Where the waiter sleeps until a deadline of the system clock (`nil`: the poll's own timeout). Made with the
    /// waiter, so that its number is taken before any source can be added: a large mode's epoll set holds it.
    private let deadlineTimer: DeadlineTimer?
    // `@exclusivity(unchecked)`: touched by every wait, on the loop's thread only, never across a callout (see the
    // note in `Loop`).
    @exclusivity(unchecked) private var polledSources: [LoopDescriptorSource] = []
    /// The sources `setUpPoll` left out because their number is the waiter's own (`isOwnNumber`).
    @exclusivity(unchecked) private var sourcesOnOwnNumbers: [LoopDescriptorSource] = []
    /// Where the swept sources of a large mode's wait begin in `polledSources`.
    @exclusivity(unchecked) private var firstSweptSource = 0
    @exclusivity(unchecked) private var directlyPolledScratch: [LoopDescriptorSource] = []
    /// Modes whose descriptors epoll refused once: they are polled directly from then on.
    @exclusivity(unchecked) private var refusedModes: Set<ObjectIdentifier> = []
    @exclusivity(unchecked) private var sourcesWithNewEventsScratch: [LoopDescriptorSource] = []
    /// How many of the next offers are naps, after two late offers (see the type's comment).
    @exclusivity(unchecked) private var napsLeft = 0
    /// The processor the loop's thread ran on when its second late offer came back: the one it shares with a thread
    /// that does not block. Naps are for that processor alone.
    @exclusivity(unchecked) private var contendedProcessor: CInt = -1
    /// Which offer (its number in `counts.processorOffers`) last came back late; far back at first.
    @exclusivity(unchecked) private var lastLateOffer: UInt64 = .max / 2
    /// From this many descriptor sources in a mode, the Linux backend registers them in epoll. Tests lower it. Where
    /// ppoll's cost per descriptor (a wait queue joined and left, twice polled) passes epoll's extra system call per
    /// wake-up (the confirming poll): `loop-bench --only echo`, 25 connections per loop, took 15% less server CPU per
    /// message with epoll (a threshold of 8) than with ppoll (32); 16 keeps ppoll for the handful of descriptors
    /// that most tools watch.
    var largeModeThreshold = PollWaiter.defaultLargeModeThreshold
    static let defaultLargeModeThreshold = 16
    /// How many registered numbers of a large mode a sweep checks for a close, and every how many waits it does (see
    /// `DescriptorRegistry.appendDirectlyPolled`): one look of 16 descriptors every 32 waits. A swept socket is cold
    /// in every cache, so the sweep's cost grows with n even at a fixed count: beside 10,000 idle connections, one
    /// every 8 waits took the server's CPU per echo round trip to 1.31–1.33× that beside none, one every 32 to 1.12×
    /// (`loop-bench --only scale/echo`, 2026-12-05). A close without a cancel is a misuse that the sweep only keeps
    /// from going unnoticed; it is found within 2n waits.
    static let sweepCount = 16
    static let sweepInterval = 32
    /// The idle sweep: a large mode's wait that would sleep past `idleSweepDelay` after the loop woke (its callbacks
    /// may have closed a descriptor without a cancel) first sleeps that long, then, if nothing came, looks at every
    /// registered number for closes before it sleeps on. A loop that goes idle would otherwise never reach the waits
    /// that sweep. One wake-up after the loop's last work, none while it stays idle; at most one such look of a mode
    /// per `idleSweepSpacing`, so that a server idle between requests pays O(n) at most once a second.
    static let idleSweepDelay = Duration.milliseconds(100)
    static let idleSweepSpacing = Duration.seconds(1)
    /// How far away a wait's deadline must be for the wait to offer the processor first (see
    /// `offerProcessorIfServing(before:)`).
    static let offerLead = Duration.milliseconds(10)
    /// How late an offer must come back to count as taken by a thread that does not block (see the type's comment):
    /// above a sibling loop's pass, below the 1.5 ms slice of a default thread on two processors.
    static let stallThreshold: UInt64 = 1_000_000
    /// How long a nap lasts, in nanoseconds: about 40% of the 1.5 ms slice the neighbour would otherwise run out
    /// (more with a scheduler tick of 4 ms). In `loop-bench --only echo`, whose two-loop server shares two processors
    /// with its client, naps of 600 µs kept the messages per second at 1.5-1.8× Dispatch's and took the round-trip
    /// p99 to 0.85-0.9 ms (1.4-1.9 ms with offers alone, against Dispatch's 1.2-1.5); naps of 150-250 µs cut the p99
    /// as far but gave the client too little of its processor (1.34-1.66×).
    static let napLength: Int64 = 600_000
    /// How many offers after a stall are naps (tests lower it); then the loop offers again, and naps again only
    /// after another stall.
    @exclusivity(unchecked) var napsAfterStall = 256
    /// How close two late offers must come, in offers, to count as a stall (tests lower it). A busy neighbour takes
    /// an offer every few passes; a thread that just happened to run out a slice here does not come back so soon
    /// (one late offer alone made a single-connection echo nap through 256 round trips now and then: a p99 of
    /// 650 µs instead of 100).
    @exclusivity(unchecked) var lateOfferWindow: UInt64 = 16
    /// Offers the processor and says how long it was away, in nanoseconds; and reads which processor the thread runs
    /// on. Tests stand in for a busy neighbour and for the scheduler's moves.
    @exclusivity(unchecked) var testsOnly_offerProcessor: () -> UInt64 = {
        let offeredAt = monotonicNanoseconds()
        PlatformThread.offerProcessor()
        return monotonicNanoseconds() &- offeredAt
    }
    @exclusivity(unchecked) var testsOnly_currentProcessor: () -> CInt = { PlatformThread.currentProcessor }

    /// A waiter for `backend` whose poll is `poller` (tests inject a fake).
    ///
    /// - Throws: `SystemCallError` when the wake-up pipe cannot be created (e.g. out of descriptors).
    init(backend: LoopBackend, clock: any LoopClock, poller: (any Poller)? = nil) throws(SystemCallError) {
        self.backend = backend
        self.clock = clock
        self.wakeupPipe = try WakeupPipe()
        let timesWithTheSystemClock = backend == .linux && clock.readsSystemMonotonicClock
        self.deadlineTimer = timesWithTheSystemClock ? (try? DeadlineTimer()) : nil
        self.poller = poller ?? SystemPoller(call: SystemPoller.Call(for: backend))
        // An injected poller sees every wait, so it gets no futex to sleep on beside it.
        self.futex = timesWithTheSystemClock && poller == nil ? WakeupFutex() : nil
    }

    deinit {
        self.futex?.deallocate()  // no producer is left: each holds the loop, and through it this waiter
    }

    // MARK: Any thread

    var wakeUpDescriptor: CInt { self.wakeupPipe.readEnd }

    /// Writes a byte to the wake-up pipe, or wakes the futex. The loop's state machine calls it at most once per wait.
    func wakeUp(through channel: WakeUpChannel) {
        if channel == .futex, let futex = self.futex {
            futex.notify()
        } else {
            self.wakeupPipe.notify()
        }
    }

    var wakeUpFutex: WakeupFutex? { self.futex }

    // MARK: Loop thread

    var hasUnreadWakeUp: Bool {
        self.hasUnreadPipeWakeUp || self.hasUnreadFutexWakeUp
    }

    func consumeWakeUp() -> Bool {
        guard self.hasUnreadWakeUp else { return false }
        self.counts.wakeUpDrains.wrappingAdd(1, ordering: .relaxed)
        if self.hasUnreadPipeWakeUp {
            self.hasUnreadPipeWakeUp = false
            self.wakeupPipe.drain()
        }
        if self.hasUnreadFutexWakeUp {
            self.hasUnreadFutexWakeUp = false
            self.futex?.consume()
        }
        return true
    }

    func wakeUpChannel(forWaitingIn items: ModeItems, until deadline: LoopInstant) -> WakeUpChannel {
        guard self.futex != nil, items.descriptorSources.isEmpty,
              self.isTimerSlackTight || deadline == .distantFuture else { return .descriptor }
        return .futex
    }

    func noteNewEvents(of source: LoopDescriptorSource) {
        guard self.backend == .linux else { return }
        // The flag and the list change together, under the list's lock: the loop takes a source out of the list
        // when it leaves its last mode, and must find it there whenever the flag says it is listed.
        self.sourcesWithNewEvents.withLock { list in
            guard !self.hasForgottenModes.load(ordering: .relaxed),
                  !source.isListedWithNewEvents.exchange(true, ordering: .acquiringAndReleasing) else { return }
            list.append(source)
            self.hasSourcesWithNewEvents.store(true, ordering: .releasing)
        }
    }

    func descriptorSource(_ source: LoopDescriptorSource, didJoin items: ModeItems) {
        self.registries[ObjectIdentifier(items)]?.add(source)
    }

    func descriptorSource(_ source: LoopDescriptorSource, didLeave items: ModeItems) {
        self.registries[ObjectIdentifier(items)]?.remove(source)
        if source.modes.isEmpty && source.isListedWithNewEvents.load(ordering: .acquiring) {
            // In no mode, no registry needs its new events, and the list must not keep it alive until a wait.
            let listed = self.sourcesWithNewEvents.withLock { list -> LoopDescriptorSource? in
                guard let index = list.firstIndex(where: { $0 === source }) else { return nil }
                source.isListedWithNewEvents.store(false, ordering: .releasing)
                return list.remove(at: index)
            }
            _ = listed  // released here, outside the lock
        }
    }

    func runWillBegin(in items: ModeItems) {
        self.registries[ObjectIdentifier(items)]?.requestFullSweep()
        if self.futex != nil {
            self.isTimerSlackTight = (0...1_000).contains(cloopkit_timer_slack())
        }
    }

    func forgetModes() {
        self.registries = [:]
        self.refusedModes = []
        self.polledSources = []
        // Taken out of the list, so no longer listed: a source that joins another loop is listed there afresh.
        let listed = self.sourcesWithNewEvents.withLock { list -> [LoopDescriptorSource] in
            self.hasForgottenModes.store(true, ordering: .relaxed)
            for source in list {
                source.isListedWithNewEvents.store(false, ordering: .releasing)
            }
            defer { list = [] }
            return list
        }
        withExtendedLifetime(listed) {}  // released here, outside the lock
        self.sourcesWithNewEventsScratch = []
    }

    /// The epoll registrations of `items`' mode, if it has them (tests).
    func registry(for items: ModeItems) -> DescriptorRegistry? {
        self.registries[ObjectIdentifier(items)]
    }

    /// The deadline timer's descriptor, if the waiter has one (tests).
    var deadlineTimerDescriptor: CInt? {
        self.deadlineTimer?.descriptor
    }

    /// Whether epoll refused `items`' descriptors, so that the mode is polled directly (tests).
    func hasRefusedRegistrations(of items: ModeItems) -> Bool {
        self.refusedModes.contains(ObjectIdentifier(items))
    }

    func wait(
        for items: ModeItems,
        until deadline: LoopInstant?,
        sleepingOn channel: WakeUpChannel,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        let start = ready.count
        defer { self.lastWaitFoundSources = ready.count > start }
        if channel == .futex, let deadline, let futex = self.futex {
            if !self.registries.isEmpty {
                _ = self.registry(forWaitingIn: items)  // a large mode left with no descriptors lets go of its set
            } else {
                // A source whose events changed after it left its last mode is listed still: let go of it here too.
                self.applyNewEvents()
            }
            return self.sleep(on: futex, until: deadline)
        }
        // The timerfd is polled only when there is a deadline, so a loop waiting for work alone polls just its pipe.
        let deadlineTimer = deadline.map { $0 != .distantFuture } == true ? self.deadlineTimer : nil
        defer { self.polledSources.removeAll(keepingCapacity: true) }  // keeps no source alive between waits
        if let registry = self.registry(forWaitingIn: items) {
            return self.wait(on: registry, until: deadline, deadlineTimer: deadlineTimer, into: &ready)
        }
        self.setUpPoll(deadlineTimer: deadlineTimer, sources: items.descriptorSources)
        if self.reportSourcesOnOwnNumbers(into: &ready) {
            return WaitOutcome()
        }
        if !items.descriptorSources.isEmpty {
            self.offerProcessorIfServing(before: deadline)
        }
        let readyCount = deadline.map { self.sleep(until: $0, on: deadlineTimer) } ?? self.look()
        return self.collectPolled(readyCount, deadlineTimer: deadlineTimer, until: deadline, into: &ready)
    }

    /// A large mode's wait or look: in the registry's epoll set, which holds the wake-up pipe and the deadline timer
    /// beside the mode's descriptors, so that a wake-up costs epoll_wait(2) and, when sources are ready, one poll(2)
    /// that confirms them; every few waits, a look at a few registered numbers first, for closes (see
    /// `DescriptorRegistry.appendDirectlyPolled`). It costs the same with ten thousand idle descriptors as with a
    /// hundred. While epoll refuses some of the mode's descriptors, or the deadline has no timer to arm (a clock other
    /// than the system's, or a timer the kernel would not arm), the wait is one poll on the wake-up pipe, the deadline
    /// timer, the epoll set's descriptor and the refused sources, then what epoll reports ready.
    private func wait(
        on registry: DescriptorRegistry,
        until deadline: LoopInstant?,
        deadlineTimer: DeadlineTimer?,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        if registry.appendSourcesOnWaiterNumbers(into: &ready) {
            return WaitOutcome()  // closes to report: no sleep (and no sweep taken, to be lost)
        }
        var direct = self.directlyPolledScratch
        self.directlyPolledScratch = []
        let firstSwept = registry.appendDirectlyPolled(into: &direct, sweeping: Self.sweepCount,
                                                       every: Self.sweepInterval)
        let start = ready.count
        defer {
            direct.removeAll(keepingCapacity: true)
            self.directlyPolledScratch = direct
            // The sources epoll refused and those it reports come from two polls, each in its own order. (No source
            // comes twice: a number is either refused or registered, and `collectReady` reports each number once.)
            ready.sortInCallOrder(from: start)
        }
        if firstSwept < direct.count {
            // The sweep is a look of its own, without waiting: in the sleep, each swept socket would join a wait
            // queue and leave it again, which costs more than the extra system call.
            let sweptOutcome = self.lookForCloses(among: direct[firstSwept...], into: &ready)
            if sweptOutcome.isWokenByChannel || ready.count > start {
                return sweptOutcome  // a close to report, or a wake-up already waiting: no sleep
            }
        }
        if deadline == .distantFuture {
            // Disarmed (a system call only when it was armed): the epoll set watches the timer in every wait, and an
            // old expiry would end this one. Should the kernel refuse, the expiry is cleared when reported.
            _ = self.deadlineTimer?.set(nil)
        }
        if firstSwept == 0, let timeout = self.epollTimeout(until: deadline) {
            if timeout != 0 {
                self.offerProcessorIfServing(before: deadline)
                if let deadline,
                   let outcome = self.sleepUntilIdleThenSweep(registry, until: deadline, using: &direct, into: &ready) {
                    return outcome
                }
            }
            return self.wait(inEpollOf: registry, timeoutMilliseconds: timeout, until: deadline, into: &ready)
        }
        self.setUpPoll(deadlineTimer: deadlineTimer, sources: direct[..<firstSwept])
        if self.reportSourcesOnOwnNumbers(into: &ready) {
            return WaitOutcome()
        }
        self.poller.append(registry.descriptor, events: .readable)
        self.offerProcessorIfServing(before: deadline)
        let readyCount = deadline.map { self.sleep(until: $0, on: deadlineTimer) } ?? self.look()
        let outcome = self.collectPolled(readyCount, deadlineTimer: deadlineTimer, until: deadline, into: &ready)
        if readyCount > 0, !self.poller.events(at: self.poller.count - 1).isEmpty {
            _ = registry.collectReady(into: &ready) { _ = self.noteReport(of: $0, until: deadline) }
        }
        return outcome
    }

    /// Offers the processor to other runnable threads before a wait on descriptors until `deadline`, if the last wait
    /// found sources ready (see the type's comment) and this one may sleep for a while: not before a look (`nil`, or a
    /// deadline that has passed), nor before a deadline closer than `offerLead`. After an offer the thread may get its
    /// processor back only when another thread's slice ends, or at a scheduler tick (4 ms at 250 Hz), and a due timer
    /// must not wait for that. After two late offers, it naps instead (see the type's comment).
    private func offerProcessorIfServing(before deadline: LoopInstant?) {
        guard self.lastWaitFoundSources, let deadline,
              deadline == .distantFuture || deadline >= self.clock.now + Self.offerLead else { return }
        if self.napsLeft > 0, self.testsOnly_currentProcessor() != self.contendedProcessor {
            self.napsLeft = 0  // moved away from the busy neighbour: offer, and find out again
        }
        if self.napsLeft > 0 {
            self.napsLeft -= 1
            self.counts.processorNaps.wrappingAdd(1, ordering: .relaxed)
            self.wakeupPipe.sleep(untilNotifiedOrFor: Self.napLength, call: SystemPoller.Call(for: self.backend))
            return
        }
        let offer = self.counts.processorOffers.wrappingAdd(1, ordering: .relaxed).newValue
        guard self.testsOnly_offerProcessor() >= Self.stallThreshold else { return }
        defer { self.lastLateOffer = offer }
        if offer &- self.lastLateOffer <= self.lateOfferWindow {
            self.napsLeft = self.napsAfterStall
            self.contendedProcessor = self.testsOnly_currentProcessor()
        }
    }

    /// Polls `swept`, sources of a large mode, for closes alone, without waiting (epoll reports the rest of what they
    /// have), beside the wake-up pipe.
    private func lookForCloses(
        among swept: ArraySlice<LoopDescriptorSource>,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        self.setUpPoll(deadlineTimer: nil, sources: EmptyCollection(), sweeping: swept)
        return self.collectPolled(self.look(), deadlineTimer: nil, until: nil, into: &ready)
    }

    /// The idle sweep's part of a large mode's wait until `deadline` (see `idleSweepDelay`): sleeps until the loop has
    /// been idle that long, then looks at every registered number for closes (`direct` is the wait's scratch buffer).
    ///
    /// - Returns: What ends the wait, or `nil` when it sleeps on, as it would have without the sweep.
    private func sleepUntilIdleThenSweep(
        _ registry: DescriptorRegistry,
        until deadline: LoopInstant,
        using direct: inout [LoopDescriptorSource],
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome? {
        guard let idle = self.idleSweep(of: registry, before: deadline) else { return nil }
        let start = ready.count
        let outcome = self.wait(inEpollOf: registry, timeoutMilliseconds: idle.timeout, until: deadline, into: &ready)
        if outcome.isWokenByChannel || ready.count > start {
            return outcome
        }
        // A wait that ended early with nothing (a report that poll did not confirm, an old timer expiry) is not
        // idleness: it returns, as any wait would, and the next one rebuilds a stale epoll set (waiting again here
        // would spin on the stale report) and waits for idleness afresh.
        let now = self.clock.now
        if now < idle.instant || (deadline != .distantFuture && now >= deadline) {
            return outcome
        }
        registry.lastIdleSweep = now
        direct.removeAll(keepingCapacity: true)
        let firstSwept = registry.appendEveryRegistered(into: &direct, sweeping: Self.sweepCount,
                                                        every: Self.sweepInterval)
        let sweptOutcome = self.lookForCloses(among: direct[firstSwept...], into: &ready)
        if sweptOutcome.isWokenByChannel || ready.count > start || registry.appendSourcesOnWaiterNumbers(into: &ready) {
            return sweptOutcome
        }
        return nil
    }

    /// When a wait of `registry`'s mode until `deadline` should stop to look at every registered number (see
    /// `idleSweepDelay`), and epoll_wait(2)'s timeout until then (rounded up); `nil` when the loop has not woken since
    /// the last full sweep, or the deadline comes first.
    private func idleSweep(of registry: DescriptorRegistry, before deadline: LoopInstant)
        -> (instant: LoopInstant, timeout: CInt)? {
        // Only on the system clock (which has the deadline timer): a virtual clock would never reach the instant.
        guard self.deadlineTimer != nil, registry.hasWaitedSinceFullSweep else { return nil }
        let now = self.clock.now
        var instant = now + Self.idleSweepDelay
        if let last = registry.lastIdleSweep {
            instant = max(instant, last + Self.idleSweepSpacing)
        }
        guard instant < deadline else { return nil }
        // `instant` is at least `now` plus the delay: the difference is positive.
        let nanoseconds = Int64(clamping: instant.nanoseconds - now.nanoseconds)
        return (instant, SystemPoller.milliseconds(nanoseconds))
    }

    /// The timeout of a wait in a large mode's epoll set until `deadline`: 0 for a look or a deadline that has passed,
    /// -1 for no deadline or one the deadline timer is armed for; `nil` when the timer cannot be armed for it, and the
    /// wait needs poll's nanosecond timeout instead.
    private func epollTimeout(until deadline: LoopInstant?) -> CInt? {
        guard let deadline else { return 0 }
        if deadline == .distantFuture { return -1 }
        guard let deadlineTimer = self.deadlineTimer else { return nil }
        if deadline <= self.clock.now { return 0 }
        return deadlineTimer.set(deadline.nanoseconds) ? -1 : nil
    }

    /// Sleeps in (or looks at) the registry's epoll set, and collects what it reports. A signal (EINTR) is not a
    /// wake-up: it waits again. Nor is a wait the kernel could not allocate for (ENOMEM, after a pause): it waits
    /// again until `deadline` has passed, as `sleep(until:on:)` does, so a lasting failure neither spins nor runs
    /// passes that have nothing to do; a look tries once.
    private func wait(
        inEpollOf registry: DescriptorRegistry,
        timeoutMilliseconds: CInt,
        until deadline: LoopInstant?,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        var outcome = WaitOutcome()
        while true {
            self.counts.count(timeoutNanoseconds: timeoutMilliseconds == 0 ? 0 : -1)
            let result = registry.collectReady(waitingUpTo: timeoutMilliseconds, into: &ready) { descriptor in
                if self.noteReport(of: descriptor, until: deadline) {
                    outcome.isWokenByChannel = true
                }
            }
            switch result {
            case .collected:
                return outcome
            case .interrupted:
                continue
            case .failed:
                if timeoutMilliseconds == 0 || deadline.map({ $0 != .distantFuture && self.clock.now >= $0 }) == true {
                    return outcome
                }
            }
        }
    }

    /// Takes note of a report of the wake-up pipe or the deadline timer in a wait until `deadline`. A readable
    /// deadline timer needs nothing when it is armed for this wait's deadline (the timers' phase fires what is due,
    /// and the next arming clears it); an expiry left from an earlier deadline (the kernel refused to re-arm the
    /// timer, or a large mode's epoll set watches it in a wait without a deadline) is cleared, or it would end every
    /// wait.
    ///
    /// - Returns: Whether it is the wake-up pipe.
    private func noteReport(of descriptor: CInt, until deadline: LoopInstant?) -> Bool {
        if descriptor == self.wakeupPipe.readEnd {
            self.hasUnreadPipeWakeUp = true
            return true
        }
        guard let deadlineTimer = self.deadlineTimer, descriptor == deadlineTimer.descriptor else { return false }
        if !(deadline.map { $0 != .distantFuture && deadlineTimer.isArmed(for: $0.nanoseconds) } ?? false) {
            deadlineTimer.clearExpiry()  // safe: expired means its instant has passed, so no wait relies on it
        }
        return false
    }

    /// Sets the poller up for one wait: the wake-up pipe, then the deadline timer if there is one, then `sources`, then
    /// `swept` sources (reported only when their number is closed: epoll reports the rest of what they have).
    private func setUpPoll(
        deadlineTimer: DeadlineTimer?,
        sources: some Collection<LoopDescriptorSource>,
        sweeping swept: some Collection<LoopDescriptorSource> = EmptyCollection()
    ) {
        self.poller.reset()
        self.polledSources.removeAll(keepingCapacity: true)
        self.poller.append(self.wakeupPipe.readEnd, events: .readable)
        if let deadlineTimer {
            self.poller.append(deadlineTimer.descriptor, events: .readable)
        }
        for source in sources where source.isValid {
            guard !self.isOwnNumber(source.descriptor) else {
                self.sourcesOnOwnNumbers.append(source)  // reported `invalid`: polled, it would report the waiter's file
                continue
            }
            self.poller.append(source.descriptor, events: source.events)
            self.polledSources.append(source)
        }
        self.firstSweptSource = self.polledSources.count
        for source in swept where source.isValid {
            self.poller.append(source.descriptor, events: [])  // error, hang-up and invalid are always reported
            self.polledSources.append(source)
        }
    }

    /// Whether `number` is one of the waiter's own descriptors: its pipe's two ends, its deadline timer, or a large
    /// mode's epoll set. A source on such a number had its descriptor closed without a cancel, and the waiter, making
    /// one of these later (an epoll set), got the number.
    private func isOwnNumber(_ number: CInt) -> Bool {
        number == self.wakeupPipe.readEnd || number == self.wakeupPipe.writeEnd
            || number == self.deadlineTimer?.descriptor || self.registries.values.contains { $0.descriptor == number }
    }

    /// Appends the sources `setUpPoll` found on the waiter's own numbers as `invalid` (the loop then cancels them).
    ///
    /// - Returns: Whether there were any: the wait then reports them at once, without sleeping.
    private func reportSourcesOnOwnNumbers(into ready: inout [(LoopDescriptorSource, DescriptorEvents)]) -> Bool {
        guard !self.sourcesOnOwnNumbers.isEmpty else { return false }
        for source in self.sourcesOnOwnNumbers {
            ready.append((source, .invalid))
        }
        self.sourcesOnOwnNumbers.removeAll(keepingCapacity: true)
        return true
    }

    /// Sleeps on the futex until a wake-up or `deadline` (the mode has no descriptors to watch).
    private func sleep(on futex: WakeupFutex, until deadline: LoopInstant) -> WaitOutcome {
        let isLook = deadline != .distantFuture && deadline <= self.clock.now
        self.counts.count(timeoutNanoseconds: isLook ? 0 : -1)
        let woken = isLook
            ? futex.hasUnreadWakeUp
            : futex.wait(until: deadline == .distantFuture ? nil : deadline.nanoseconds)
        if woken {
            self.hasUnreadFutexWakeUp = true
        }
        return WaitOutcome(isWokenByChannel: woken)
    }

    /// Polls without waiting (again after a signal, a few times at most).
    ///
    /// - Returns: The number of descriptors with events; 0 when every try failed (a lasting ENOMEM): a look promises
    ///   nothing, and level-triggered descriptors and the wake-up pipe stay ready for the next wait.
    private func look() -> Int {
        for _ in 0..<3 {
            let readyCount = self.poll(timeoutNanoseconds: 0)
            if readyCount >= 0 { return readyCount }
        }
        return 0
    }

    /// Sleeps until `deadline` or until a polled descriptor is ready; a signal interrupts the poll (EINTR) but is not
    /// a wake-up, so it waits again for what is left, as after a poll the kernel could not allocate for (ENOMEM, after
    /// a pause). A failed poll once the deadline has passed is a timeout, so a lasting failure never delays a due timer
    /// further or spins.
    ///
    /// - Returns: The number of descriptors with events.
    private func sleep(until deadline: LoopInstant, on deadlineTimer: DeadlineTimer?) -> Int {
        while true {
            let readyCount: Int
            let now = self.clock.now
            if deadline == .distantFuture {
                readyCount = self.poll(timeoutNanoseconds: -1)  // the timerfd is not polled: it may stay armed
            } else if deadline <= now {
                readyCount = self.poll(timeoutNanoseconds: 0)
            } else if let deadlineTimer, deadlineTimer.set(deadline.nanoseconds) {
                readyCount = self.poll(timeoutNanoseconds: -1)  // precise; re-armed only when the deadline changes
            } else {
                readyCount = self.poll(timeoutNanoseconds: Int64(clamping: deadline.nanoseconds - now.nanoseconds))
            }
            if readyCount >= 0 { return readyCount }
            if deadline != .distantFuture && self.clock.now >= deadline { return 0 }
        }
    }

    /// Reads what the last poll reported (`readyCount` descriptors with events), in a wait until `deadline`: notes a
    /// readable wake-up pipe (drained later by `consumeWakeUp()`) and deadline timer, and appends the polled sources
    /// with events.
    private func collectPolled(
        _ readyCount: Int,
        deadlineTimer: DeadlineTimer?,
        until deadline: LoopInstant?,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        var outcome = WaitOutcome()
        guard readyCount > 0 else { return outcome }
        if !self.poller.events(at: 0).isEmpty {
            self.hasUnreadPipeWakeUp = true
            outcome.isWokenByChannel = true
        }
        if let deadlineTimer, !self.poller.events(at: 1).isEmpty {
            _ = self.noteReport(of: deadlineTimer.descriptor, until: deadline)
        }
        let firstSource = deadlineTimer == nil ? 1 : 2
        for (offset, source) in self.polledSources.enumerated() {
            let events = self.poller.events(at: firstSource + offset)
            // A swept source is passed on only when its number is closed; epoll reports its other events.
            if !events.isEmpty && (offset < self.firstSweptSource || events.contains(.invalid)) {
                ready.append((source, events))
            }
        }
        return outcome
    }

    /// The epoll registrations of `items`, or `nil` to poll its descriptors directly: a small mode, the portable
    /// backend, or a mode whose registrations epoll refused. Made when a mode reaches `largeModeThreshold` descriptor
    /// sources; dropped when it falls below half of that, so a mode near the line does not flip every wait.
    private func registry(forWaitingIn items: ModeItems) -> DescriptorRegistry? {
        guard self.backend == .linux else { return nil }
        self.applyNewEvents()
        let key = ObjectIdentifier(items)
        let count = items.descriptorSources.count
        if let registry = self.registries[key] {
            if count >= self.largeModeThreshold / 2, registry.prepareToSleep() {
                return registry
            }
            if registry.hasFailed {
                self.refusedModes.insert(key)
            }
            self.registries[key] = nil
            return nil
        }
        guard count >= self.largeModeThreshold, !self.refusedModes.contains(key) else { return nil }
        let waiterDescriptors = [self.wakeupPipe.readEnd] + (self.deadlineTimer.map { [$0.descriptor] } ?? [])
        // Unowned: the registry lives in `registries`, so never longer than this waiter.
        guard let registry = DescriptorRegistry(sources: items.descriptorSources, waiterDescriptors: waiterDescriptors,
                                                isWaiterNumber: { [unowned self] in self.isOwnNumber($0) }) else {
            return nil  // no descriptor left for an epoll set: try again when the mode next sleeps
        }
        guard registry.prepareToSleep() else {
            self.refusedModes.insert(key)  // epoll refused the sources: this mode keeps the poll
            return nil
        }
        self.registries[key] = registry
        return registry
    }

    /// Brings the registrations of every large mode up to date with the sources whose `events` changed.
    ///
    /// - Complexity: O(*k*) for *k* changed sources (one epoll_ctl(2) each at most), O(1) when none changed.
    private func applyNewEvents() {
        guard self.hasSourcesWithNewEvents.load(ordering: .acquiring) else { return }
        var changed = self.sourcesWithNewEventsScratch
        self.sourcesWithNewEventsScratch = []
        self.sourcesWithNewEvents.withLock { list in
            swap(&list, &changed)
            self.hasSourcesWithNewEvents.store(false, ordering: .releasing)
        }
        for source in changed {
            // Before its events are read below, and a read-modify-write: a setter's exchange of the flag that still
            // finds it set (and lists nothing) then comes before this one, so its new events are seen. A plain store
            // could wait in the store buffer past the read, and the change would be lost.
            _ = source.isListedWithNewEvents.exchange(false, ordering: .acquiringAndReleasing)
            for registry in self.registries.values {
                registry.refresh(source)
            }
        }
        changed.removeAll(keepingCapacity: true)
        self.sourcesWithNewEventsScratch = changed
    }

    /// One call to the poller, counted.
    @inline(never)  // a stable name for profiles: this is where an idle loop spends its time
    private func poll(timeoutNanoseconds: Int64) -> Int {
        self.counts.count(timeoutNanoseconds: timeoutNanoseconds)
        return self.poller.waitForEvents(timeoutNanoseconds: timeoutNanoseconds)
    }
}
