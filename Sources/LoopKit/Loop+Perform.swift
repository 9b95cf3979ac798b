/// Blocks: closures queued to run on the loop's thread in chosen modes.
extension Loop {
    /// Queues `block` to run on the loop's thread the next time the loop drains blocks in the default mode. Any thread.
    ///
    /// Blocks run in FIFO order at fixed points of a pass; a block queued while a drain is running waits for the next
    /// drain point. Unlike CF, this wakes a sleeping loop. Pending blocks keep their mode alive.
    ///
    /// - Precondition: The loop's `LoopThread` has not ended (its blocks would never run).
    /// - Complexity: O(1) amortized; one wake-up write at most per drain, however many blocks are queued.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        self.enqueue(QueuedBlock(modes: .one(.default), body: block))
    }

    /// Queues `block` to run in any of `modes` (`.common` stands for the common modes at the time it runs). Any thread.
    ///
    /// - Precondition: `modes` is not empty; the loop's `LoopThread` has not ended.
    public func perform(inModes modes: [LoopMode], _ block: @escaping @Sendable () -> Void) {
        precondition(!modes.isEmpty,
                     "Loop.perform(inModes:_:): the list of modes is empty, so the block could never run")
        let queued = modes.count == 1 ? BlockModes.one(modes[0]) : BlockModes.several(modes)
        self.enqueue(QueuedBlock(modes: queued, body: block))
    }

    private func enqueue(_ block: QueuedBlock) {
        self.updateShared { state in
            precondition(!state.hasEnded,
                         "Loop.perform: the loop's thread has ended (its LoopThread finished or the thread exited); "
                            + "the block would never run")
            state.blocks.append(block)
            return state.requestWakeup()
        }
    }

    /// Runs the blocks queued so far that may run in `mode`; later ones wait for the next drain. Loop thread.
    ///
    /// - Returns: Whether any block ran.
    @discardableResult
    func performBlocks(in mode: LoopMode) -> Bool {
        let commonModes = self.commonModeSet
        // The queue and the loop's spare buffer trade places, so that neither producers' appends nor the drain
        // allocate once both have grown. The spare is taken: a run nested in a block drains into its own.
        var spare = self.spareBlocks
        self.spareBlocks = []
        var runnable = self.shared.withLock { state -> [QueuedBlock] in
            guard !state.blocks.isEmpty else { return [] }
            if state.blocks.allSatisfy({ $0.modes.admit(mode, commonModes: commonModes) }) {
                swap(&state.blocks, &spare)
                return spare
            }
            var runnable: [QueuedBlock] = []
            var waiting: [QueuedBlock] = []
            for block in state.blocks {
                if block.modes.admit(mode, commonModes: commonModes) {
                    runnable.append(block)
                } else {
                    waiting.append(block)
                }
            }
            state.blocks = waiting
            return runnable
        }
        if spare.isEmpty {
            self.spareBlocks = spare  // not traded (nothing queued, or some blocks wait for another mode): keep it
        }
        spare = []  // after a trade, `runnable` is left the only reference to the drained buffer, reused below
        for block in runnable {
            self.callOut(.block) { block.body() }
        }
        let ranAny = !runnable.isEmpty
        runnable.removeAll(keepingCapacity: true)
        if runnable.capacity > self.spareBlocks.capacity && runnable.capacity <= Loop.spareBlocksCapacityLimit {
            self.spareBlocks = runnable  // a burst's huge buffer is let go instead
        }
        return ranAny
    }

    /// Whether a queued block may run in `mode`. Loop thread.
    func hasBlocks(for mode: LoopMode) -> Bool {
        let commonModes = self.commonModeSet
        return self.shared.withLock { state in
            state.blocks.contains { $0.modes.admit(mode, commonModes: commonModes) }
        }
    }
}
