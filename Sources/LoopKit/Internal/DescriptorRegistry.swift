/// The descriptor sources of a large mode, kept registered in an `EpollSet`, so that the loop's sleep and wake-up
/// cost the same with a thousand idle descriptors as with one.
///
/// ppoll(2) on n descriptors does O(n) work twice per sleep: each descriptor joins a wait queue before the sleep, and
/// is polled again and leaves the queue after the wake-up. With a thousand idle descriptors that is ~130 µs on a
/// 2-vCPU VM, all of it between the wake-up and the first callback. A mode with `Loop.largeModeThreshold` descriptor
/// sources or more instead sleeps in ppoll on at most three descriptors (the wake-up pipe, the deadline timer and this
/// registry's epoll descriptor) and, when the epoll descriptor is readable, asks epoll which sources are ready.
///
/// epoll silently forgets a closed descriptor, so it cannot report the close to the source as DESIGN §1 promises.
/// Before it sleeps, the loop therefore looks at every descriptor of the mode once without waiting (ppoll with a zero
/// timeout, which joins no wait queue): that look reports a closed descriptor as invalid, exactly as a small mode
/// does, and anything already ready skips the sleep. It is O(n), but before the sleep rather than after the
/// wake-up, and cheaper than one of ppoll's two passes.
///
/// Registrations follow the sources as they join and leave the mode (`add`, `remove`) and, before each sleep, the
/// `events` of the sources whose events changed (`refresh`, from `Loop.descriptorSourcesWithNewEvents`). A descriptor
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
        /// Whether epoll refused it: a regular file (poll calls it always ready, so the look before each sleep finds
        /// it and the loop never sleeps while it is watched, as with ppoll), or a closed number. Not tried again until
        /// a source joins on the number.
        var isRefused: Bool
    }

    private var epoll: EpollSet
    private var registrations: [CInt: Registration] = [:]
    private var needsRebuild = false
    /// The numbers of the last collect, reused so that collecting allocates nothing: those reported (a number
    /// reported twice in one collect has a stale twin registration) and those poll did not confirm.
    private var reportedNumbers: [CInt] = []
    private var unconfirmedNumbers: [CInt] = []
    private var previouslyUnconfirmed: [CInt] = []
    /// Set when epoll refused a registration for a reason that starting over does not cure (the watch limit): the
    /// mode then goes back to ppoll.
    private(set) var hasFailed = false

    /// The descriptor to poll: readable while a registered descriptor is ready.
    var descriptor: CInt { self.epoll.descriptor }

    /// Registers `sources`; `nil` where there is no epoll or no descriptor left (the mode keeps ppoll). Check
    /// `hasFailed` after: epoll may refuse the sources.
    init?(sources: [LoopDescriptorSource]) {
        guard let epoll = EpollSet() else { return nil }
        self.epoll = epoll
        for source in sources where !self.hasFailed {
            self.add(source)
        }
    }

    /// Registers a source that joined the mode.
    func add(_ source: LoopDescriptorSource) {
        let descriptor = source.descriptor
        guard var registration = self.registrations[descriptor] else {
            var registration = Registration(sources: [source], events: [], isInEpoll: false, isRefused: false)
            self.enter(descriptor, &registration)
            self.registrations[descriptor] = registration
            return
        }
        registration.sources.append(source)
        // Registered again even when the events stay the same: the number may now name another file (an earlier
        // source's descriptor was closed without cancelling it, and the number reused), which epoll does not hold.
        registration.isInEpoll = false
        registration.isRefused = false
        self.update(descriptor, &registration)
        self.registrations[descriptor] = registration
    }

    /// Unregisters a source that left the mode.
    func remove(_ source: LoopDescriptorSource) {
        let descriptor = source.descriptor
        guard var registration = self.registrations[descriptor],
              let index = registration.sources.firstIndex(where: { $0 === source }) else { return }
        registration.sources.remove(at: index)
        guard registration.sources.isEmpty else {
            self.update(descriptor, &registration)
            self.registrations[descriptor] = registration
            return
        }
        self.registrations[descriptor] = nil
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
        self.registrations[descriptor] = registration
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

    /// Appends the sources that epoll reports ready, with what poll confirms for them, to `ready`, in
    /// `(order, sequence)` order; each source once.
    ///
    /// What is not passed on, and makes the registry start over before the next sleep (the look before that sleep
    /// then finds what is really ready):
    /// - a report for a number no source watches;
    /// - a second report for the same number in one collect: a stale registration of an old file under a reused
    ///   number, beside the new file's;
    /// - a report that poll does not confirm twice in a row. Once may be a lost race (another thread or process read
    ///   the descriptor between epoll's report and the poll), which is not worth an O(n) rebuild; a stale
    ///   registration that stays ready is reported again at once.
    func collectReady(into ready: inout [(LoopDescriptorSource, DescriptorEvents)]) {
        let start = ready.count
        self.reportedNumbers.removeAll(keepingCapacity: true)
        self.unconfirmedNumbers.removeAll(keepingCapacity: true)
        self.epoll.forEachReady(confirmed: { descriptor, events in
            guard let registration = self.registrations[descriptor] else {
                self.needsRebuild = true
                return
            }
            guard !self.reportedNumbers.contains(descriptor) else {
                self.needsRebuild = true
                return
            }
            self.reportedNumbers.append(descriptor)
            for source in registration.sources {
                ready.append((source, events))
            }
        }, stale: { descriptor in
            if self.previouslyUnconfirmed.contains(descriptor) || self.registrations[descriptor] == nil {
                self.needsRebuild = true
            }
            self.unconfirmedNumbers.append(descriptor)
        })
        swap(&self.previouslyUnconfirmed, &self.unconfirmedNumbers)
        if ready.count - start > 1 {
            ready[start...].sort { ($0.0.order, $0.0.sequence) < ($1.0.order, $1.0.sequence) }
        }
    }

    /// Adds `descriptor` to epoll, watching what its sources ask for.
    private func enter(_ descriptor: CInt, _ registration: inout Registration) {
        registration.events = Self.union(of: registration.sources)
        switch self.epoll.add(descriptor, watching: registration.events) {
        case .done:
            registration.isInEpoll = true
        case .alreadyRegistered:
            // A registration from before this number was reused: watch the new events under it.
            registration.isInEpoll = self.epoll.modify(descriptor, watching: registration.events) == .done
        case .unsupported, .closed, .notRegistered:
            registration.isRefused = true  // the look before each sleep reports it (ready, or invalid)
        case .failed:
            self.hasFailed = true
        }
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
        self.epoll = epoll
        for descriptor in Array(self.registrations.keys) where !self.hasFailed {
            self.registrations[descriptor]!.isInEpoll = false
            self.registrations[descriptor]!.isRefused = false
            self.enter(descriptor, &self.registrations[descriptor]!)
        }
    }

    private static func union(of sources: [LoopDescriptorSource]) -> DescriptorEvents {
        sources.reduce(into: []) { $0.formUnion($1.events) }
    }
}
