/// The source phases of a pass: signalled sources, and ready descriptor sources.
extension Loop {
    /// Runs the signalled sources of `items`' mode, lower `order` first, then first signalled first; with
    /// `returnAfterSourceHandled`, only the first (as CF), leaving the others signalled.
    ///
    /// The sources taken from the shared state go to `signalledCandidates`, which nested runs share: a run nested in a
    /// source's callback runs the sources still signalled, and the outer pass then skips them (their flag is clear).
    /// A source signalled while its loop runs another mode keeps its signal there for a mode it is in.
    ///
    /// - Returns: Whether a source ran.
    @inline(__always)
    func performSignalledSources(in items: ModeItems, returnAfterSourceHandled: Bool) -> Bool {
        // Most passes have no signalled source: decided here, without a call.
        guard self.state.pending.contains(.signalledSources) || !self.signalledCandidates.isEmpty else { return false }
        return self.runSignalledSources(in: items, returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// `performSignalledSources(in:returnAfterSourceHandled:)` with a source signalled, or being signalled.
    @inline(never)
    private func runSignalledSources(in items: ModeItems, returnAfterSourceHandled: Bool) -> Bool {
        self.takeSignalledSources()
        guard !self.signalledCandidates.isEmpty else { return false }
        let mode = items.mode
        // The buffer is taken out for the drain, since a callback's nested run drains with its own.
        var runnable = self.spareRunnableSources
        self.spareRunnableSources = []
        defer {
            runnable.removeAll(keepingCapacity: true)
            self.spareRunnableSources = runnable
        }
        for (index, candidate) in self.signalledCandidates.enumerated()
        where candidate.source.candidateTicket == candidate.ticket && candidate.source.modes.contains(mode) {
            runnable.append((index, candidate.source))
        }
        guard !runnable.isEmpty else { return false }
        if runnable.count > 1 {
            runnable.sort { ($0.source.order, $0.index) < ($1.source.order, $1.index) }
        }

        var handled = false
        for (_, source) in runnable where source.isValid && source.isSignalled && source.candidateTicket != 0 {
            guard source.modes.contains(mode) else { continue }  // an earlier callback took it out of this mode
            source.candidateTicket = 0  // no longer a candidate: a nested run does not run it again
            self.callOut(.source) { source.perform() }
            handled = true
            if returnAfterSourceHandled { break }
        }
        self.dropSpentCandidates()
        return handled
    }

    /// Whether a source of `mode` waits among the candidates with its signal: a run nested since the pass's source
    /// phase (in a block, or a `beforeWaiting` observer) took it from the shared state, where the sleep would have
    /// seen it. Loop thread.
    func hasSignalledCandidate(in mode: LoopMode) -> Bool {
        guard !self.signalledCandidates.isEmpty else { return false }
        return self.signalledCandidates.contains { candidate in
            let source = candidate.source
            return source.candidateTicket == candidate.ticket && source.isValid && source.isSignalled
                && source.modes.contains(mode)
        }
    }

    /// Runs every source still signalled, whatever mode it is in: a thread's final drain, so that a signal made
    /// before a shutdown is not lost. Loop thread.
    func performRemainingSignalledSources() {
        self.takeSignalledSources()
        let pending = self.signalledCandidates
        for (source, ticket) in pending where source.candidateTicket == ticket && !source.modes.isEmpty {
            guard source.isValid, source.isSignalled else { continue }
            source.candidateTicket = 0
            self.callOut(.source) { source.perform() }
        }
        self.dropSpentCandidates()
    }

    /// Has every descriptor source with a final-drain hand-over (`LoopDescriptorSource.whenLoopDrains`: a
    /// `LoopSignalSource`'s) hand over what it holds: a thread's final drain waits no more, so nothing else would read
    /// it while the loop can still take work. Loop thread.
    func handOverBeforeEnd() {
        var sources: [ObjectIdentifier: LoopDescriptorSource] = [:]
        for items in self.modeItemsByMode.values {
            for source in items.descriptorSources where source.whenLoopDrains != nil {
                sources[ObjectIdentifier(source)] = source
            }
        }
        for source in sources.values.sorted(by: { $0.sequence < $1.sequence }) where source.isValid {
            guard let handOver = source.whenLoopDrains else { continue }
            self.callOut(.descriptor(source.descriptor)) { handOver() }
        }
    }

    /// Moves the sources signalled since the last take from the shared state to `signalledCandidates`.
    func takeSignalledSources() {
        guard self.state.pending.contains(.signalledSources) else { return }
        var taken = self.spareSignalled
        self.spareSignalled = []
        self.state.withLock { $0.takeSignalledSources(into: &taken) }
        for source in taken where source.isValid {
            if source.modes.isEmpty {
                // In no mode (removed, then signalled): ranked now, and parked, held by no list. Added again, it
                // comes back to `taken` (`LoopSource.attach`) and takes its place among the candidates.
                if source.candidateTicket == 0 {
                    source.candidateTicket = self.nextCandidateTicket()
                    source.isParked = true
                }
            } else if source.isParked {
                source.isParked = false
                self.insertCandidate(source)
            } else if source.candidateTicket == 0 {
                source.candidateTicket = self.nextCandidateTicket()
                self.signalledCandidates.append((source, source.candidateTicket))
            }
        }
        taken.removeAll(keepingCapacity: true)
        self.spareSignalled = taken
    }

    private func nextCandidateTicket() -> UInt64 {
        self.lastCandidateTicket &+= 1
        return self.lastCandidateTicket
    }

    /// Puts a parked source back among the candidates, in the place its ticket gives it (the list is in ticket order).
    private func insertCandidate(_ source: LoopSource) {
        let ticket = source.candidateTicket
        var low = 0
        var high = self.signalledCandidates.count
        while low < high {
            let middle = (low + high) / 2
            if self.signalledCandidates[middle].ticket < ticket {
                low = middle + 1
            } else {
                high = middle
            }
        }
        self.signalledCandidates.insert((source, ticket), at: low)
    }

    /// Forgets candidates that ran, were invalidated or lost their signal, and parks those that left every mode, so
    /// the list keeps none of them alive. A parked source keeps its flag and its ticket: added again, it runs in its
    /// place among the signals (first signalled first).
    func dropSpentCandidates() {
        // Filtered outside the property: dropping a candidate may free the last reference to its source, and the
        // deinit of what its callbacks capture is user code, which may invalidate another source and so come back.
        var candidates = self.signalledCandidates
        self.signalledCandidates = []
        defer {
            candidates.append(contentsOf: self.signalledCandidates)  // whatever such user code added meanwhile
            self.signalledCandidates = candidates
        }
        candidates.removeAll { candidate in
            let source = candidate.source
            guard source.candidateTicket == candidate.ticket, source.isValid, source.isSignalled else {
                if source.candidateTicket == candidate.ticket {
                    source.candidateTicket = 0
                }
                return true
            }
            if source.modes.isEmpty {
                source.isParked = true
                return true
            }
            return false
        }
    }

    /// Calls the ready descriptor sources in `order`, skipping any that an earlier callback cancelled or removed;
    /// with `returnAfterSourceHandled`, only the first, unless a source was handled already (level-triggered: the
    /// others are reported again on the next pass).
    ///
    /// A source is told only of the events it still watches (plus error, hang-up and invalid): an earlier callback of
    /// the pass, or another thread during the wait, may have changed its `events` since the poll.
    ///
    /// - Parameter generation: `waitGeneration` just after the wait or look that found `ready`.
    /// - Returns: Whether a source was called.
    func performReadyDescriptorSources(
        _ ready: [(LoopDescriptorSource, DescriptorEvents)],
        polledAt generation: UInt64,
        in items: ModeItems,
        returnAfterSourceHandled: Bool
    ) -> Bool {
        var handled = false
        for (source, polled) in ready where source.isValid && source.modes.contains(items.mode) {
            // A run nested in a callback since the poll (an afterWaiting observer, a timer, an earlier handler) polled
            // again and served what was ready; what this pass saw is stale now. Level-triggered, so anything still
            // ready is reported on the next pass.
            guard self.waitGeneration == generation else { break }
            let events = polled.intersection(source.events.union([.error, .hangUp, .invalid]))
            guard !events.isEmpty else { continue }
            self.callOut(.descriptor(source.descriptor)) { source.handle(events) }
            handled = true
            if events.contains(.invalid) {
                source.invalidate()  // the descriptor is closed: reported once, never polled again
            }
            if returnAfterSourceHandled { break }
        }
        return handled
    }
}
