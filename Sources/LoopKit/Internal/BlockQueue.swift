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
///
/// Blocks parked for a mode the loop is not running cost a pass nothing once judged: a search remembers how far it
/// found no block for its mode (`searchStart`), and the places of blocks taken around them are compacted away, so
/// neither the storage nor a drain grows with the blocks that ran past them.
struct BlockQueue {
    /// Blocks in queue order; taken ones are `QueuedBlock.taken` until the outermost drain compacts the storage, and
    /// `head` skips the taken prefix.
    private var entries: [QueuedBlock] = []
    private var head = 0
    /// How many of `entries` are the places of taken blocks (those of the prefix `head` skips included).
    private var takenPlaces = 0
    /// What the last search that found nothing knows: no block in `entries[head..<judgedEnd]` may run in `judgedMode`
    /// with `judgedCommonModes` (`nil` while no block may name `.common`) and the jobs of `judgedHeldBack` held back.
    /// Taking blocks and appending new ones keep it true; compacting the storage, which moves entries, forgets it
    /// (`judgedEnd` 0). Apart fields, not an optional tuple: the usual drain reads one integer, and copies nothing.
    private var judgedEnd = 0
    private var judgedMode = LoopMode.default
    private var judgedCommonModes: Set<LoopMode>?
    private var judgedHeldBack: [ObjectIdentifier] = []
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
    ///
    /// - Complexity: O(*k*) for the *k* entries queued since the last search for `mode` that found none.
    mutating func hasBlock(admittedIn mode: LoopMode, commonModes: Set<LoopMode>?,
                           holdingBack heldBack: [ObjectIdentifier] = []) -> Bool {
        var position = self.searchStart(for: mode, commonModes: commonModes, holdingBack: heldBack)
        while position < self.entries.count {
            if self.mayRun(at: position, in: mode, commonModes: commonModes, heldBack: heldBack) {
                self.noteNothingRuns(before: position, in: mode, commonModes: commonModes, heldBack: heldBack)
                return true
            }
            position += 1
        }
        self.noteNothingRuns(before: position, in: mode, commonModes: commonModes, heldBack: heldBack)
        return false
    }

    /// Where a search for a block that may run in `mode` starts: past the entries that an earlier search with the
    /// same mode, common set and held-back executors judged (none of them could run), or at `head`.
    func searchStart(for mode: LoopMode, commonModes: Set<LoopMode>?,
                     holdingBack heldBack: [ObjectIdentifier] = []) -> Int {
        guard self.judgedEnd > self.head, self.judgedMode == mode, self.judgedHeldBack == heldBack,
              self.judgedCommonModes == self.judgingKey(commonModes) else {
            return self.head
        }
        return self.judgedEnd
    }

    /// Records that no entry before `end` may run in `mode` (searched from `searchStart`).
    @inline(__always)
    private mutating func noteNothingRuns(before end: Int, in mode: LoopMode, commonModes: Set<LoopMode>?,
                                          heldBack: [ObjectIdentifier]) {
        self.judgedEnd = min(end, self.entries.count)  // never past the storage, should a cursor outlive a move
        self.judgedMode = mode
        self.judgedCommonModes = self.judgingKey(commonModes)
        self.judgedHeldBack = heldBack
    }

    /// The common set as a judgement depends on it: not at all while no block may name `.common` (a drain passes
    /// `nil` then, other searches the set, and both judge alike).
    @inline(__always)
    private func judgingKey(_ commonModes: Set<LoopMode>?) -> Set<LoopMode>? {
        self.mayHoldCommonBlocks ? commonModes : nil
    }

    /// Whether the entry at `position` is a block, not held back, that `mode` admits (read in place, without a copy,
    /// which would retain its closure).
    @inline(__always)
    private func mayRun(at position: Int, in mode: LoopMode, commonModes: Set<LoopMode>?,
                        heldBack: [ObjectIdentifier]) -> Bool {
        !self.entries[position].isTaken && Self.isFree(self.entries[position], heldBack: heldBack)
            && self.entries[position].modes.admit(mode, commonModes: commonModes)
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
    /// - Complexity: O(1) amortized when every block is admitted; blocks parked for other modes are passed over once,
    ///   not at every drain.
    mutating func takeNext(
        upTo limit: UInt64,
        admittedIn mode: LoopMode,
        commonModes: Set<LoopMode>?,
        holdingBack heldBack: [ObjectIdentifier] = [],
        from position: inout Int
    ) -> QueuedBlock? {
        // The entries before the cursor were judged by this drain, those before `searchStart` by an earlier search:
        // none of them may run now (taking and appending cannot change that, and the drain's mode and held-back
        // executors stay as they are).
        position = max(position, self.searchStart(for: mode, commonModes: commonModes, holdingBack: heldBack))
        while position < self.entries.count {
            // Read in place: a copy of the entry would retain and release its closure.
            if self.entries[position].isTaken {
                position += 1
                continue
            }
            guard self.entries[position].sequence <= limit else { break }
            if self.mayRun(at: position, in: mode, commonModes: commonModes, heldBack: heldBack) {
                var block = QueuedBlock.taken
                swap(&block, &self.entries[position])  // moved out: the queue keeps no reference to it
                self.takenPlaces += 1
                self.advanceHead()
                position += 1
                return block
            }
            position += 1
        }
        // Nothing before the cursor may run: later searches start there. (A queue left empty, as the usual drain
        // leaves it, is reset by the drain's end instead.)
        if !self.isEmpty {
            self.noteNothingRuns(before: position, in: mode, commonModes: commonModes, heldBack: heldBack)
        }
        return nil
    }

    /// Ends a drain; the outermost one lets go of the taken entries' storage, and compacts it once most of it is taken
    /// places (behind a block parked for another mode, say), so that it does not grow with the blocks that ran.
    mutating func endDrain(capacityLimit: Int) {
        self.drainDepth -= 1
        guard self.drainDepth == 0 else { return }
        if self.isEmpty {
            let keep = self.entries.capacity <= capacityLimit
            self.entries.removeAll(keepingCapacity: keep)
            self.forgetPlaces()
            self.mayHoldCommonBlocks = false
        } else if self.takenPlaces > self.entries.count / 2 {
            // O(n) for more than n/2 blocks taken since the last compaction: O(1) amortized per block.
            self.entries.removeAll { $0.isTaken }
            self.forgetPlaces()
        }
    }

    /// Takes every block left, in order (the thread's final drain).
    mutating func takeAll() -> [QueuedBlock] {
        let blocks = self.entries[self.head...].filter { !$0.isTaken }
        self.entries = []
        self.forgetPlaces()
        self.mayHoldCommonBlocks = false
        return blocks
    }

    /// How many entries the storage holds, taken places included (for tests).
    var storedEntryCount: Int { self.entries.count }

    /// After the entries moved or went: no taken place is left, and no judgement holds.
    private mutating func forgetPlaces() {
        self.head = 0
        self.takenPlaces = 0
        self.judgedEnd = 0
    }

    private mutating func advanceHead() {
        while self.head < self.entries.count, self.entries[self.head].isTaken {
            self.head += 1
        }
    }
}
