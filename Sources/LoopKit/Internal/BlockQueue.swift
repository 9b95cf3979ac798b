/// The blocks the loop has taken from its shared state and not run yet, in the order they were queued, across
/// nested runs. Loop thread only.
///
/// A drain runs the blocks queued before it began (`limit`), in order, skipping those its mode does not admit; a run
/// nested in one of them drains the same queue, so it continues the outer batch instead of overtaking it (block A
/// queues C and runs the loop nested: B, queued before C, runs before C). A block that waits for another mode does
/// not hold back later ones, as in CF.
///
/// The usual batch arrives in an empty queue and leaves it empty: it is taken by trading storage with the shared
/// state's list (no copy, no reference counting), and each block is moved out, leaving `QueuedBlock.taken` in its
/// place, so that the wake-up of a sleeping loop runs its block through as little code as it can.
struct BlockQueue {
    /// Blocks in queue order; taken ones are `QueuedBlock.taken` until the outermost drain compacts the storage, and
    /// `head` skips the taken prefix.
    private var entries: [QueuedBlock] = []
    private var head = 0
    /// How many drains are running (nested in each other's blocks): only the outermost compacts.
    private var drainDepth = 0
    /// The sequence number of the last block appended (blocks arrive in sequence order).
    private var lastAppended: UInt64 = 0
    /// Whether a block taken since the queue was last empty may name `.common`: while none does, a drain judges
    /// blocks without the loop's common set, and does not copy it.
    private(set) var mayHoldCommonBlocks = false

    var isEmpty: Bool { self.head == self.entries.count }

    /// Takes the blocks of `blocks` (the shared state's list, in queue order) to the end of the queue, leaving
    /// `blocks` empty. When the queue holds nothing, not even taken places (no drain is running), the two arrays trade
    /// storage: `blocks` comes back with the queue's empty buffer and its capacity, for the shared state's next list.
    /// Otherwise `blocks` keeps its own storage if it holds no more than `capacityLimit` blocks.
    ///
    /// - Complexity: O(1) into an empty queue; O(*k*) for *k* blocks otherwise.
    mutating func take(_ blocks: inout [QueuedBlock], capacityLimit: Int) {
        guard let last = blocks.last else { return }
        if !self.mayHoldCommonBlocks {
            // By index: the element is read in place, not copied (which would retain its closure).
            for index in blocks.indices where blocks[index].modes.mayNameCommon {
                self.mayHoldCommonBlocks = true
                break
            }
        }
        if self.entries.isEmpty {
            swap(&self.entries, &blocks)
        } else {
            self.entries.append(contentsOf: blocks)
            blocks.removeAll(keepingCapacity: blocks.capacity <= capacityLimit)
        }
        self.lastAppended = last.sequence
    }

    /// The sequence number of the last block in the queue, or `nil` when it is empty: a drain's limit.
    var lastSequence: UInt64? {
        self.isEmpty ? nil : self.lastAppended
    }

    /// Whether a block that `mode` admits is waiting, not counting the jobs of the serial executors in `heldBack`.
    func hasBlock(admittedIn mode: LoopMode, commonModes: Set<LoopMode>?,
                  holdingBack heldBack: [ObjectIdentifier] = []) -> Bool {
        self.entries[self.head...].contains { entry in
            !entry.isTaken && Self.isFree(entry, heldBack: heldBack) && entry.modes.admit(mode, commonModes: commonModes)
        }
    }

    /// Whether `entry` is not a job of one of the serial executors in `heldBack` (read in place, without a copy).
    @inline(__always)
    private static func isFree(_ entry: borrowing QueuedBlock, heldBack: [ObjectIdentifier]) -> Bool {
        guard !heldBack.isEmpty, let executor = entry.serialExecutor else { return true }
        return !heldBack.contains(executor)
    }

    mutating func beginDrain() {
        self.drainDepth += 1
    }

    /// Takes the first block with a sequence up to `limit` that `mode` admits, searching from `position` (a
    /// cursor the drain keeps; a nested drain never moves entries, so it stays valid). The jobs of the serial
    /// executors in `heldBack` are passed over, and stay queued in their place.
    ///
    /// - Complexity: O(1) amortized when every block is admitted.
    mutating func takeNext(
        upTo limit: UInt64,
        admittedIn mode: LoopMode,
        commonModes: Set<LoopMode>?,
        holdingBack heldBack: [ObjectIdentifier] = [],
        from position: inout Int
    ) -> QueuedBlock? {
        position = max(position, self.head)
        while position < self.entries.count {
            // Read in place: a copy of the entry would retain and release its closure.
            if self.entries[position].isTaken {
                position += 1
                continue
            }
            guard self.entries[position].sequence <= limit else { return nil }
            if Self.isFree(self.entries[position], heldBack: heldBack)
                && self.entries[position].modes.admit(mode, commonModes: commonModes) {
                var block = QueuedBlock.taken
                swap(&block, &self.entries[position])  // moved out: the queue keeps no reference to it
                self.advanceHead()
                position += 1
                return block
            }
            position += 1
        }
        return nil
    }

    /// Ends a drain; the outermost one lets go of the taken entries' storage.
    mutating func endDrain(capacityLimit: Int) {
        self.drainDepth -= 1
        guard self.drainDepth == 0 else { return }
        if self.isEmpty {
            let keep = self.entries.capacity <= capacityLimit
            self.entries.removeAll(keepingCapacity: keep)
            self.head = 0
            self.mayHoldCommonBlocks = false
        } else if self.head > self.entries.count / 2 {
            self.entries.removeFirst(self.head)
            self.head = 0
        }
    }

    /// Takes every block left, in order (the thread's final drain).
    mutating func takeAll() -> [QueuedBlock] {
        let blocks = self.entries[self.head...].filter { !$0.isTaken }
        self.entries = []
        self.head = 0
        self.mayHoldCommonBlocks = false
        return blocks
    }

    private mutating func advanceHead() {
        while self.head < self.entries.count, self.entries[self.head].isTaken {
            self.head += 1
        }
    }
}
