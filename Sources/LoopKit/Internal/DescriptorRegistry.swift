/// The descriptor sources of a large mode, kept registered in an `EpollSet`, so that a pass of the loop costs the same
/// with ten thousand idle descriptors as with one.
///
/// ppoll(2) on n descriptors does O(n) work twice per sleep: each descriptor joins a wait queue before the sleep, and
/// is polled again and leaves the queue after the wake-up. With a thousand idle descriptors that is ~130 µs on a
/// 2-vCPU VM, all of it between the wake-up and the first callback. A mode with `PollWaiter.largeModeThreshold`
/// descriptor sources or more instead sleeps in epoll_wait(2) on this registry's set, which also holds the waiter's
/// wake-up pipe and deadline timer (the set's own descriptors), and is told which sources are ready.
///
/// epoll silently forgets a closed descriptor, so it cannot report the close to the source as DESIGN §1 promises.
/// Every few waits, the loop therefore also polls a few registered numbers in turn, for a close only
/// (`appendDirectlyPolled`), and the first wait of a run polls them all unless the last full look is recent: a close
/// without a cancel is reported within 2n waits, at a number of calls per wait that does not grow with n. (libuv and SwiftNIO
/// simply require a cancel before the close; LoopKit asks for it too, and keeps its promise when it is forgotten.)
///
/// Registrations follow the sources as they join and leave the mode (`add`, `remove`) and, before each sleep, the
/// `events` of the sources whose events changed (`refresh`, from `PollWaiter.noteNewEvents(of:)`). A descriptor
/// closed before its source left may live on in the kernel's set under its old number (when a `dup` of its file is
/// still open elsewhere) and report readiness that belongs to no source, even after the number is reused. `EpollSet`
/// confirms every report with poll on the number as it is now; a report that is not confirmed twice in a row, a number
/// reported twice, or one no source watches makes the registry start over with a new epoll instance before the next
/// sleep, instead of calling a source for another file's events or waking again and again (see `collectReady`).
///
/// Loop thread only.
final class DescriptorRegistry {
    private struct Registration {
        /// The sources of the mode on this descriptor (usually one), in the order they joined.
        var sources: [LoopDescriptorSource]
        /// The events registered: the union of the sources' events when last synced.
        var events: DescriptorEvents
        /// Whether epoll holds the descriptor.
        var isInEpoll: Bool
        /// Whether epoll refused it: a regular file (poll calls it always ready, so the poll of every wait finds it
        /// and the loop never sleeps while it is watched, as with ppoll), or a closed number. Not tried again until a
        /// source joins on the number.
        var isRefused: Bool
        /// Whether the number is one of the waiter's own now (its pipe, its timer, or the epoll set itself, made after
        /// the close): the sources' descriptor was closed without a cancel. Reported `invalid`, never polled.
        var isTakenByWaiter = false
    }

    private var epoll: EpollSet
    private let isWaiterNumber: (CInt) -> Bool
    private var registrations: [CInt: Registration] = [:]
    private var needsRebuild = false
    /// When a number whose reports poll does not confirm may make the registry start over again.
    private var rebuildSpacing = RebuildSpacing()
    /// The numbers of the last collect, reused so that collecting allocates nothing: those reported (a number
    /// reported twice in one collect has a stale twin registration) and those poll did not confirm.
    private var reportedNumbers: [CInt] = []
    private var unconfirmedNumbers: [CInt] = []
    private var previouslyUnconfirmed: [CInt] = []
    /// Set when epoll refused a registration for a reason that starting over does not cure (the watch limit): the
    /// mode then goes back to ppoll.
    private(set) var hasFailed = false
    /// The numbers epoll refused, whose sources every wait polls itself.
    private var refusedNumbers: Set<CInt> = []
    /// The refused numbers that are the waiter's own (`Registration.isTakenByWaiter`).
    private var numbersTakenByWaiter: Set<CInt> = []
    /// Every registered number, in the order the sweep visits them, and where it is; remade when numbers come or go.
    private var sweepNumbers: [CInt] = []
    private var sweepCursor = 0
    private var isSweepStale = true
    /// The next wait sweeps every number: it is the registry's first, or a run asked (`requestFullSweep()`).
    private var sweepsAllAtNextWait = true
    private var waitsSinceSweep = 0
    private var waitsSinceFullSweep = 0
    /// The waits a sweep cycle takes: full sweeps are no more frequent than this.
    private var fullSweepSpacing = 0
    /// When the waiter last swept every number because the loop had gone idle (`PollWaiter`'s idle sweep).
    var lastIdleSweep: LoopInstant?

    /// The set's own descriptor: readable while a registered descriptor, the wake-up pipe or the deadline timer is
    /// ready.
    var descriptor: CInt { self.epoll.descriptor }

    /// Registers `sources`, and the waiter's own descriptors (`waiterDescriptors`: its wake-up pipe and deadline
    /// timer) as the set's own, so that a wait can sleep in the epoll set itself; `nil` where there is no epoll or no
    /// descriptor left (the mode keeps ppoll). Check `hasFailed` after: epoll may refuse the sources.
    ///
    /// `isWaiterNumber` names the waiter's other descriptors (its pipe's write end, other modes' epoll sets): a source
    /// on one of those is reported `invalid` too, as on the set's own.
    init?(sources: [LoopDescriptorSource], waiterDescriptors: [CInt] = [],
          isWaiterNumber: @escaping (CInt) -> Bool = { _ in false }) {
        guard let epoll = EpollSet() else { return nil }
        self.epoll = epoll
        self.isWaiterNumber = isWaiterNumber
        self.addOwn(waiterDescriptors)
        for source in sources where !self.hasFailed {
            self.add(source)
        }
    }

    /// Adds the waiter's descriptors to the epoll set as its own; a set that refuses them cannot be slept in.
    private func addOwn(_ descriptors: [CInt]) {
        for descriptor in descriptors where self.epoll.addOwn(descriptor) != .done {
            self.hasFailed = true
        }
    }

    /// Registers a source that joined the mode.
    func add(_ source: LoopDescriptorSource) {
        let descriptor = source.descriptor
        self.rebuildSpacing.forget(descriptor)  // the number may name another file now
        guard var registration = self.registrations[descriptor] else {
            var registration = Registration(sources: [source], events: [], isInEpoll: false, isRefused: false)
            self.enter(descriptor, &registration)
            self.save(registration, for: descriptor)
            return
        }
        registration.sources.append(source)
        // Registered again even when the events stay the same: the number may now name another file (an earlier
        // source's descriptor was closed without cancelling it, and the number reused), which epoll does not hold.
        registration.isInEpoll = false
        registration.isRefused = false
        self.update(descriptor, &registration)
        self.save(registration, for: descriptor)
    }

    /// Unregisters a source that left the mode.
    func remove(_ source: LoopDescriptorSource) {
        let descriptor = source.descriptor
        guard var registration = self.registrations[descriptor],
              let index = registration.sources.firstIndex(where: { $0 === source }) else { return }
        registration.sources.remove(at: index)
        guard registration.sources.isEmpty else {
            self.update(descriptor, &registration)
            self.save(registration, for: descriptor)
            return
        }
        self.save(nil, for: descriptor)
        self.rebuildSpacing.forget(descriptor)
        guard registration.isInEpoll else { return }
        switch self.epoll.remove(descriptor) {
        case .done, .closed, .notRegistered:
            // Closed (maybe reused) before its source left: epoll dropped the file with its last descriptor, or keeps
            // it under this number while a dup lives on; a report from it is then not confirmed, and starts over.
            break
        case .alreadyRegistered, .unsupported, .failed:
            self.needsRebuild = true
        }
    }

    /// Registers what a source whose `events` changed now watches.
    func refresh(_ source: LoopDescriptorSource) {
        let descriptor = source.descriptor
        guard var registration = self.registrations[descriptor],
              registration.sources.contains(where: { $0 === source }) else { return }
        self.update(descriptor, &registration)
        self.save(registration, for: descriptor)
    }

    /// Appends the sources a wait must poll itself: those on numbers epoll refused (a regular file, which poll calls
    /// always ready, or a closed number), then, at every `interval`-th wait, those on the next `count` registered
    /// numbers in turn.
    ///
    /// The sweep is how a descriptor closed without cancelling its source is still reported: epoll forgets a closed
    /// descriptor without a word, and poll reports it invalid. A close is found within n × `interval` / `count`
    /// waits, at a cost per wait that does not grow with n; after `requestFullSweep()`, the next wait looks at every
    /// number, and so does the waiter once the loop has gone idle (`appendEveryRegistered`). (libuv and NIO instead
    /// require a cancel before the close; LoopKit asks for it too, see `LoopDescriptorSource`.) The numbers a cycle
    /// visits are taken afresh when it begins, so joins and leaves cost nothing here.
    ///
    /// - Returns: The index in `sources` where the swept ones begin: the wait reports only their closes (epoll reports
    ///   their readiness), and everything about the refused ones.
    func appendDirectlyPolled(into sources: inout [LoopDescriptorSource], sweeping count: Int, every interval: Int)
        -> Int {
        for number in self.refusedNumbers where !self.numbersTakenByWaiter.contains(number) {
            sources.append(contentsOf: self.registrations[number]?.sources ?? [])
        }
        let firstSwept = sources.count
        let sweepsAll = self.sweepsAllAtNextWait
        self.sweepsAllAtNextWait = false
        self.waitsSinceSweep += 1
        self.waitsSinceFullSweep += 1
        guard !self.registrations.isEmpty, sweepsAll || self.waitsSinceSweep >= interval else { return firstSwept }
        self.waitsSinceSweep = 0
        self.fullSweepSpacing = self.registrations.count * interval / max(count, 1)
        if sweepsAll {
            self.waitsSinceFullSweep = 0
            self.beginSweepCycle()
        }
        for _ in 0..<(sweepsAll ? self.sweepNumbers.count : min(count, self.registrations.count)) {
            if self.sweepCursor >= self.sweepNumbers.count {
                self.beginSweepCycle()
                guard !self.sweepNumbers.isEmpty else { break }
            }
            let number = self.sweepNumbers[self.sweepCursor]
            self.sweepCursor += 1
            guard !self.refusedNumbers.contains(number), var registration = self.registrations[number] else { continue }
            guard !self.isOwnNumber(number) else {
                // Closed without a cancel, and the waiter made a descriptor of its own on the number since (another
                // mode's epoll set): polled, it would show the waiter's file, open. Reported `invalid` from the next
                // wait on (`appendSourcesOnWaiterNumbers`), as `enter` does when a source joins on such a number.
                registration.isInEpoll = false
                registration.isRefused = true
                registration.isTakenByWaiter = true
                self.save(registration, for: number)
                continue
            }
            sources.append(contentsOf: registration.sources)
        }
        return firstSwept
    }

    /// Appends, as `invalid`, the sources whose number the waiter has taken for its own (their descriptor was closed
    /// without a cancel): polling the number would report the waiter's file as theirs. The loop cancels each.
    ///
    /// - Returns: Whether it appended any: the wait then reports them at once, without sleeping.
    func appendSourcesOnWaiterNumbers(into ready: inout [(LoopDescriptorSource, DescriptorEvents)]) -> Bool {
        guard !self.numbersTakenByWaiter.isEmpty else { return false }
        let start = ready.count
        for number in self.numbersTakenByWaiter {
            for source in self.registrations[number]?.sources ?? [] {
                ready.append((source, .invalid))
            }
        }
        ready.sortInCallOrder(from: start)
        return ready.count > start
    }

    /// Whether a wait has begun since the last full sweep: the loop woke since, and its callbacks may have closed a
    /// descriptor without cancelling its source.
    var hasWaitedSinceFullSweep: Bool {
        self.waitsSinceFullSweep > 0
    }

    /// Appends the sources on every registered number, as `appendDirectlyPolled` does at a full sweep (and counts as
    /// one): for the waiter's look at closes once the loop has gone idle.
    ///
    /// - Returns: The index in `sources` where the swept ones begin.
    func appendEveryRegistered(into sources: inout [LoopDescriptorSource], sweeping count: Int, every interval: Int)
        -> Int {
        self.sweepsAllAtNextWait = true
        return self.appendDirectlyPolled(into: &sources, sweeping: count, every: interval)
    }

    /// Makes the next wait sweep every number, unless a sweep cycle's worth of waits has not passed since the last
    /// full one (a loop run again and again, as `while run(…, returnAfterSourceHandled: true)` does, would otherwise
    /// look at every descriptor each time).
    func requestFullSweep() {
        if self.waitsSinceFullSweep >= self.fullSweepSpacing {
            self.sweepsAllAtNextWait = true
        }
    }

    /// Starts the sweep over, with the numbers registered now.
    private func beginSweepCycle() {
        if self.isSweepStale {
            self.sweepNumbers = Array(self.registrations.keys)
            self.isSweepStale = false
        }
        self.sweepCursor = 0
    }

    /// Stores `registration` (or forgets the number, for `nil`), keeping the refused set and the sweep current.
    private func save(_ registration: Registration?, for descriptor: CInt) {
        guard let registration else {
            if self.registrations.removeValue(forKey: descriptor) != nil { self.isSweepStale = true }
            self.refusedNumbers.remove(descriptor)
            self.numbersTakenByWaiter.remove(descriptor)
            return
        }
        if self.registrations.updateValue(registration, forKey: descriptor) == nil { self.isSweepStale = true }
        if registration.isRefused {
            self.refusedNumbers.insert(descriptor)
        } else {
            self.refusedNumbers.remove(descriptor)
        }
        if registration.isTakenByWaiter {
            self.numbersTakenByWaiter.insert(descriptor)
        } else {
            self.numbersTakenByWaiter.remove(descriptor)
        }
    }

    /// Starts over if a report showed a registration that outlived its descriptor, before a sleep.
    ///
    /// - Returns: Whether the registry stands for the mode's sources; `false` when epoll refused them (`hasFailed`):
    ///   the loop then polls every descriptor itself.
    func prepareToSleep() -> Bool {
        if self.needsRebuild {
            self.rebuild()
        }
        return !self.hasFailed
    }

    /// What epoll reports whatever a registration watches.
    private static let alwaysReported: DescriptorEvents = [.error, .hangUp, .invalid]

    /// Notes a report that the descriptor's current file does not bear out: one for a number no source has, or the
    /// second in a row (when `rebuildSpacing` allows: a number whose reports an earlier rebuild did not cure is read by
    /// another reader too), makes the next sleep rebuild the epoll set, which drops registrations of old files.
    private func noteUnconfirmed(_ descriptor: CInt) {
        if self.registrations[descriptor] == nil {
            self.needsRebuild = true
        } else if self.previouslyUnconfirmed.contains(descriptor) && self.rebuildSpacing.mayRebuild(for: descriptor) {
            self.needsRebuild = true
        }
        self.unconfirmedNumbers.append(descriptor)
    }

    /// Appends the sources that epoll reports ready, with what poll confirms for them, to `ready`, in
    /// `(order, sequence)` order; each source once.
    ///
    /// What is not passed on, and makes the registry start over before the next sleep (level-triggered, what is
    /// really ready is reported again by the new set):
    /// - a report for a number no source watches;
    /// - a second report for the same number in one collect: a stale registration of an old file under a reused
    ///   number, beside the new file's;
    /// - a report that poll does not confirm twice in a row. Once may be a lost race (another thread or process read
    ///   the descriptor between epoll's report and the poll), which is not worth an O(n) rebuild; a stale
    ///   registration that stays ready is reported again at once. A confirmed report of nothing the number's
    ///   sources watch counts as one that poll does not confirm. A number that keeps losing such races after a
    ///   rebuild (a listening socket several processes accept on) rebuilds ever less often (`RebuildSpacing`).
    ///
    /// - Parameters:
    ///   - timeoutMilliseconds: How long epoll may wait for a report (0: a look; negative: until one comes).
    ///   - waiterDescriptor: Called with each of the waiter's descriptors that epoll reports ready.
    /// - Returns: How the wait ended (`EpollSet.WaitResult`): only `.collected` took anything.
    func collectReady(
        waitingUpTo timeoutMilliseconds: CInt = 0,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)],
        waiterDescriptor: (CInt) -> Void = { _ in }
    ) -> EpollSet.WaitResult {
        let start = ready.count
        self.rebuildSpacing.noteWait()
        self.reportedNumbers.removeAll(keepingCapacity: true)
        self.unconfirmedNumbers.removeAll(keepingCapacity: true)
        let result = self.epoll.forEachReady(waitingUpTo: timeoutMilliseconds, own: waiterDescriptor,
                                                  confirmed: { descriptor, events in
            guard let registration = self.registrations[descriptor] else {
                self.needsRebuild = true
                return
            }
            guard !self.reportedNumbers.contains(descriptor) else {
                self.needsRebuild = true
                return
            }
            // The confirming poll asks the number for what epoll reported. A report of nothing the number's sources
            // watch comes from a registration left for an old file under the number (closed before its source was
            // cancelled, alive in a duplicate), confirmed by the new file's state: stale too, or the loop would wake
            // for it on every wait and call no one.
            guard !events.isDisjoint(with: registration.events.union(Self.alwaysReported)) else {
                self.noteUnconfirmed(descriptor)
                return
            }
            self.reportedNumbers.append(descriptor)
            for source in registration.sources {
                ready.append((source, events))
            }
        }, stale: { descriptor in
            self.noteUnconfirmed(descriptor)
        })
        guard result == .collected else { return result }
        swap(&self.previouslyUnconfirmed, &self.unconfirmedNumbers)
        ready.sortInCallOrder(from: start)
        return .collected
    }

    /// Adds `descriptor` to epoll, watching what its sources ask for.
    private func enter(_ descriptor: CInt, _ registration: inout Registration) {
        registration.events = Self.union(of: registration.sources)
        registration.isTakenByWaiter = false
        guard !self.isOwnNumber(descriptor) else {
            // A number the waiter uses itself: the source's descriptor was closed without a cancel and the loop's
            // pipe, its timer or this epoll set (made lazily, or anew) got its number. Never registered, so that the
            // waiter's own registration is not changed or removed with the source, and never polled, which would
            // report the waiter's file: reported `invalid`, as poll reports a closed number.
            registration.isRefused = true
            registration.isTakenByWaiter = true
            return
        }
        switch self.epoll.add(descriptor, watching: registration.events) {
        case .done:
            registration.isInEpoll = true
        case .alreadyRegistered:
            // A registration from before this number was reused: watch the new events under it.
            registration.isInEpoll = self.epoll.modify(descriptor, watching: registration.events) == .done
        case .unsupported, .closed, .notRegistered:
            registration.isRefused = true  // every wait polls it itself (ready, or invalid)
        case .failed:
            self.hasFailed = true
        }
    }

    /// Whether `number` is the waiter's: the set itself, one the set holds as its own (the wake-up pipe, the deadline
    /// timer), or another of the waiter's descriptors (`isWaiterNumber`).
    private func isOwnNumber(_ number: CInt) -> Bool {
        number == self.epoll.descriptor || self.epoll.ownDescriptors.contains(number) || self.isWaiterNumber(number)
    }

    /// Re-registers `descriptor` if the union of its sources' events changed, or enters it if it is not in epoll.
    private func update(_ descriptor: CInt, _ registration: inout Registration) {
        guard registration.isInEpoll else {
            if !registration.isRefused {
                self.enter(descriptor, &registration)
            }
            return
        }
        let events = Self.union(of: registration.sources)
        guard events != registration.events else { return }
        registration.events = events
        switch self.epoll.modify(descriptor, watching: events) {
        case .done:
            break
        case .notRegistered:
            registration.isInEpoll = false
            self.enter(descriptor, &registration)  // its file was closed and the number reused
        case .closed, .unsupported:
            registration.isInEpoll = false
            registration.isRefused = true
        case .alreadyRegistered:
            self.needsRebuild = true
        case .failed:
            self.hasFailed = true
        }
    }

    /// Starts over with a new epoll instance holding exactly the current registrations.
    private func rebuild() {
        self.needsRebuild = false
        guard let epoll = EpollSet() else {
            self.hasFailed = true
            return
        }
        let own = self.epoll.ownDescriptors
        self.epoll = epoll
        self.addOwn(own)
        for (descriptor, old) in self.registrations where !self.hasFailed {
            var registration = old
            registration.isInEpoll = false
            registration.isRefused = false
            self.enter(descriptor, &registration)
            self.save(registration, for: descriptor)
        }
    }

    private static func union(of sources: [LoopDescriptorSource]) -> DescriptorEvents {
        sources.reduce(into: []) { $0.formUnion($1.events) }
    }
}
