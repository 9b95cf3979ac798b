/// Blocks: closures queued to run on the loop's thread in chosen modes.
extension Loop {
    /// Queues `block` to run on the loop's thread the next time the loop drains blocks in the default mode. Any thread.
    ///
    /// Blocks run in the order they were queued, nested runs or not, at fixed points of a pass; a block queued while
    /// a drain is running waits for the next drain point. A block waiting for another mode does not hold back later
    /// blocks of the running one (as in CF). Unlike CF, this wakes a sleeping loop. Pending blocks keep their mode
    /// alive.
    ///
    /// - Precondition: The loop's `LoopThread` has not ended (its blocks would never run); where that may race, use
    ///   `performUnlessEnded(inModes:_:)`.
    /// - Complexity: O(1) amortized; one wake-up write at most per sleep, however many blocks are queued.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        self.perform(call: "Loop.perform(_:)", block)
    }

    /// `perform(_:)`, whose trap names `call` (the API the user called).
    func perform(call: StaticString, _ block: @escaping @Sendable () -> Void) {
        self.enqueue(.defaultMode, block, call: call)
    }

    /// Queues `block` to run in any of `modes` (`.common` stands for the common modes at the time it runs). Any thread.
    ///
    /// - Precondition: `modes` is not empty; the loop's `LoopThread` has not ended.
    public func perform(inModes modes: [LoopMode], _ block: @escaping @Sendable () -> Void) {
        self.perform(inModes: modes, call: "Loop.perform(inModes:_:)", block)
    }

    /// Queues `block` as `perform(inModes:_:)` does, unless the loop has ended: then it returns `false` and lets go of
    /// `block` without running it. Any thread.
    ///
    /// For code that may race the loop's end, such as a producer posting to a `LoopThread` that another thread shuts
    /// down, or a block on one loop of a `LoopGroup` forwarding work to another while the group shuts down: a `perform`
    /// there would trap. The answer is decided with the queueing, in one step: `true` means the block was queued, and
    /// runs unless the loop ends by `invalidate()` or its thread's exit, which drop queued blocks as CF does (a
    /// `LoopThread`'s end runs them in its final drain).
    ///
    /// - Precondition: `modes` is not empty.
    @discardableResult
    public func performUnlessEnded(inModes modes: [LoopMode] = [.default],
                                   _ block: @escaping @Sendable () -> Void) -> Bool {
        self.performUnlessEnded(inModes: modes, call: "Loop.performUnlessEnded(inModes:_:)", block)
    }

    /// `performUnlessEnded(inModes:_:)`, whose trap names `call` (the API the user called).
    func performUnlessEnded(inModes modes: [LoopMode], call: StaticString,
                            _ block: @escaping @Sendable () -> Void) -> Bool {
        self.enqueueUnlessEnded(Self.blockModes(modes, call: call), block)
    }

    /// `perform(inModes:_:)`, whose traps name `call` (the API the user called).
    func perform(inModes modes: [LoopMode], call: StaticString, _ block: @escaping @Sendable () -> Void) {
        self.enqueue(Self.blockModes(modes, call: call), block, call: call)
    }

    /// `modes` as a block is queued with them; traps, naming `call`, when there are none.
    private static func blockModes(_ modes: [LoopMode], call: StaticString) -> BlockModes {
        if modes.isEmpty {
            fatalError("\(call): the list of modes is empty, so the block could never run")
        }
        return BlockModes(modes)
    }

    /// Queues an executor's job (`LoopJobTarget`). Any thread. A job for a loop that has ended traps, naming the usual
    /// cause: the job could never run, and its task would wait for ever. A job queued before the end runs in the
    /// end's final drain (`Loop.end(finalDrain:)`), whatever its modes.
    ///
    /// - Parameter serialExecutor: The actor identity whose job this is; `nil` for a task's job.
    func enqueueJob(inModes modes: BlockModes, serialExecutor: ObjectIdentifier?, _ job: @escaping @Sendable () -> Void) {
        self.enqueue(modes, job, isJob: true, serialExecutor: serialExecutor, call: Self.jobCall)
    }

    /// What a refused executor job's trap names as the call.
    private static let jobCall: StaticString = """
        Loop.executor: a job of an actor or task whose executor is this loop, coming back after the loop's end (from \
        an await elsewhere, such as its own LoopGroup's shutdownGracefully(); after hopping through the loop more \
        times than the end's final drain has rounds; or resumed by what runs after the end: a source's onUnschedule, \
        a released capture's deinit)
        """

    /// Queues `block`, or traps, naming `call`, if the loop has ended.
    private func enqueue(_ modes: BlockModes, _ block: @escaping @Sendable () -> Void, isJob: Bool = false,
                         serialExecutor: ObjectIdentifier? = nil, call: StaticString) {
        guard self.enqueueUnlessEnded(modes, block, isJob: isJob, serialExecutor: serialExecutor) else {
            fatalError("\(call): the loop has ended (its LoopThread finished, its thread exited, or it was "
                + "invalidated); the block would never run")
        }
    }

    /// Queues `block` and wakes the loop if it sleeps; `false`, queueing nothing, if the loop has ended.
    private func enqueueUnlessEnded(_ modes: BlockModes, _ block: @escaping @Sendable () -> Void, isJob: Bool = false,
                                    serialExecutor: ObjectIdentifier? = nil) -> Bool {
        switch self.state.withLock({ $0.enqueue(modes, block, isJob: isJob, serialExecutor: serialExecutor) }) {
        case .queued(let action):
            self.wake(if: action)
            return true
        case .refused:
            return false
        }
    }

    /// Runs the blocks queued so far that may run in `mode`, in order; later ones wait for the next drain. A run
    /// nested in one of them continues this batch (see `BlockQueue`). Loop thread.
    ///
    /// - Returns: Whether any block ran.
    @discardableResult
    @inline(__always)
    func performBlocks(in mode: LoopMode) -> Bool {
        // Most passes have no block: decided here, in the pass's own code, without a call into the drain's.
        guard !self.blockQueue.isEmpty || self.state.pending.contains(.blocks) else { return false }
        return self.drainBlocks(in: mode)
    }

    /// `performBlocks(in:)` with blocks queued, or being queued.
    @inline(never)
    private func drainBlocks(in mode: LoopMode) -> Bool {
        self.takeQueuedBlocks()
        // Item changes queued before these blocks take effect first, as in CF, where an add or a remove is done when
        // it returns: a block queued after an `add` from another thread finds the item in its mode.
        self.applyControlMessages()
        guard let limit = self.blockQueue.lastSequence else { return false }
        // The common set as this drain began (as CF copies it), copied only when a block may name `.common`.
        let commonModes = self.blockQueue.mayHoldCommonBlocks ? self.commonModeSet : nil
        // The jobs of an actor whose job is on the stack (it ran the loop nested) wait: its executor is serial, so
        // another of its jobs must not start before that one returns, as the main queue's blocks wait under CF.
        let heldBack = self.runningSerialExecutors
        var position = 0
        var ranAny = false
        self.blockQueue.beginDrain()
        while let block = self.blockQueue.takeNext(upTo: limit, admittedIn: mode, commonModes: commonModes,
                                                   holdingBack: heldBack, from: &position) {
            if let executor = block.serialExecutor {
                self.runningSerialExecutors.append(executor)
                self.callOut(.block) { block.body() }
                self.runningSerialExecutors.removeLast()
            } else {
                self.callOut(.block) { block.body() }
            }
            ranAny = true
        }
        self.blockQueue.endDrain(capacityLimit: Loop.spareBlocksCapacityLimit)
        return ranAny
    }

    /// Moves the blocks queued since the last take from the shared state to `blockQueue`.
    func takeQueuedBlocks() {
        guard self.state.pending.contains(.blocks) else { return }
        self.takeQueuedBlocks(along: { _ in })
    }

    /// Moves the blocks queued so far from the shared state to `blockQueue`, in the lock round trip that makes
    /// `transition`, and returns what it returns.
    @inline(__always)
    func takeQueuedBlocks<Result>(along transition: (inout LoopStateMachine) -> Result) -> Result {
        var taken = self.spareBlocks
        self.spareBlocks = []
        let result = self.state.withLock { state in
            state.takeBlocks(into: &taken)
            return transition(&state)
        }
        self.blockQueue.take(&taken, capacityLimit: Loop.spareBlocksCapacityLimit)
        self.spareBlocks = taken  // empty; the storage of the queue's last batch, or of the state's list
        return result
    }

    /// Takes every queued block, in any mode, first queued first, for an ending loop's final drain. When
    /// `endsWith(blocks, sourcesOrChangesQueued)` holds, the loop ends with them, so that a block queued from now on
    /// is refused rather than lost (`LoopStateMachine.takeRemainingBlocks`). Loop thread.
    ///
    /// - Returns: The blocks, and what the end dropped (`nil` if the loop has not ended), to be released by the caller
    ///   (user code may run in a capture's deinit).
    func takeRemainingBlocks(
        endingIf endsWith: (_ blocks: [QueuedBlock], _ sourcesOrChangesQueued: Bool) -> Bool
    ) -> (blocks: [QueuedBlock], dropped: LoopStateMachine.DroppedWork?) {
        var blocks = self.blockQueue.takeAll()
        let dropped = self.state.withLock { $0.takeRemainingBlocks(into: &blocks, endingIf: endsWith) }
        return (blocks, dropped)
    }

    /// Whether a block that `mode` admits is queued. Loop thread.
    func hasBlocks(for mode: LoopMode) -> Bool {
        if self.blockQueue.isEmpty && !self.state.pending.contains(.blocks) {
            return false  // without a copy of the common modes or a look at the queue
        }
        let commonModes = self.commonModeSet
        return self.hasTakenBlock(for: mode, commonModes: commonModes)
            || (self.state.pending.contains(.blocks)
                && self.state.withLock { $0.hasBlock(admittedIn: mode, commonModes: commonModes) })
    }

    /// Whether a block that `mode` admits waits in `blockQueue`, taken from the shared state and not run yet; the
    /// jobs of an executor whose job is running (`runningSerialExecutors`) do not count. Loop thread.
    ///
    /// - Parameter commonModes: The loop's common set, if the caller has a copy; read only when the queue holds one.
    func hasTakenBlock(for mode: LoopMode, commonModes: Set<LoopMode>? = nil) -> Bool {
        !self.blockQueue.isEmpty
            && self.blockQueue.hasBlock(admittedIn: mode, commonModes: commonModes ?? self.commonModeSet,
                                        holdingBack: self.runningSerialExecutors)
    }
}
