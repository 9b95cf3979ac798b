import Testing
@testable import LoopKit

/// The loop's queue of taken blocks, on its own: order, modes, storage traded with the shared state's list, and no
/// reference kept to a block once it is taken.
@Suite("The queue of taken blocks")
struct BlockQueueTests {
    /// A closure context whose release the tests can see.
    private final class Marker: Sendable {}

    private static func block(_ sequence: UInt64, _ mode: LoopMode = .default, _ body: @escaping @Sendable () -> Void = {})
        -> QueuedBlock {
        QueuedBlock(sequence: sequence, modes: .one(mode), body: body)
    }

    private static let common: Set<LoopMode> = [.default, .tracking]

    /// Runs one drain of `queue` in `mode`, as the loop does, and returns the sequence numbers it took.
    private static func drain(_ queue: inout BlockQueue, in mode: LoopMode) -> [UInt64] {
        guard let limit = queue.lastSequence else { return [] }
        var taken: [UInt64] = []
        var position = 0
        queue.beginDrain()
        while let block = queue.takeNext(upTo: limit, admittedIn: mode, commonModes: Self.common, from: &position) {
            taken.append(block.sequence)
        }
        queue.endDrain(capacityLimit: 4_096)
        return taken
    }

    /// Whether `queue` holds a block that may run in `mode` (a search, which the queue remembers).
    private static func finds(_ queue: inout BlockQueue, _ mode: LoopMode, commonModes: Set<LoopMode>) -> Bool {
        queue.hasBlock(admittedIn: mode, commonModes: commonModes)
    }

    @Test func aBatchTakenIntoAnEmptyQueueTradesStorageAndRunsInOrder() {
        var queue = BlockQueue()
        var batch = [Self.block(1), Self.block(2), Self.block(3)]
        queue.take(&batch, capacityLimit: 4_096)
        #expect(batch.isEmpty)
        #expect(queue.lastSequence == 3)
        #expect(Self.drain(&queue, in: .default) == [1, 2, 3])
        #expect(queue.isEmpty && queue.lastSequence == nil)

        // The drained queue's storage goes back out with the next batch's take, for the state's next list.
        var next = [Self.block(4)]
        queue.take(&next, capacityLimit: 4_096)
        #expect(next.isEmpty && next.capacity >= 3)
        #expect(Self.drain(&queue, in: .default) == [4])
    }

    @Test func aBlockForAnotherModeStaysQueuedWithoutHoldingBackLaterOnes() {
        var queue = BlockQueue()
        var batch = [Self.block(1), Self.block(2, .tracking), Self.block(3), Self.block(4, .common)]
        queue.take(&batch, capacityLimit: 4_096)
        #expect(Self.drain(&queue, in: .default) == [1, 3, 4])
        #expect(!queue.isEmpty)
        #expect(Self.finds(&queue, .tracking, commonModes: Self.common))
        #expect(!Self.finds(&queue, .default, commonModes: Self.common))
        #expect(queue.takeAll().map(\.sequence) == [2])
        #expect(queue.isEmpty)
    }

    /// A queue whose drain of blocks 1 and 2 has taken block 1, in which block 1 queued block 3: the drain's limit
    /// and cursor come with it.
    private static func queueWithBlockThreeQueuedByBlockOne() -> (queue: BlockQueue, limit: UInt64, position: Int) {
        var queue = BlockQueue()
        var batch = [Self.block(1), Self.block(2)]
        queue.take(&batch, capacityLimit: 4_096)
        let limit = queue.lastSequence!
        var position = 0
        queue.beginDrain()
        #expect(queue.takeNext(upTo: limit, admittedIn: .default, commonModes: Self.common, from: &position)?
            .sequence == 1)
        var late = [Self.block(3)]
        queue.take(&late, capacityLimit: 4_096)
        #expect(late.isEmpty)
        return (queue, limit, position)
    }

    @Test func aBatchTakenDuringADrainWaitsBehindItForTheNextDrain() {
        var (queue, limit, position) = Self.queueWithBlockThreeQueuedByBlockOne()
        #expect(queue.takeNext(upTo: limit, admittedIn: .default, commonModes: Self.common, from: &position)?
            .sequence == 2)
        #expect(queue.takeNext(upTo: limit, admittedIn: .default, commonModes: Self.common, from: &position) == nil)
        queue.endDrain(capacityLimit: 4_096)
        #expect(Self.drain(&queue, in: .default) == [3])
        #expect(queue.isEmpty)
    }

    @Test func aDrainNestedInABlockContinuesTheBatchInOrder() {
        var (queue, limit, position) = Self.queueWithBlockThreeQueuedByBlockOne()
        // Block 1 runs the loop nested: 2, queued before 3, runs first, then 3.
        #expect(Self.drain(&queue, in: .default) == [2, 3])
        #expect(queue.takeNext(upTo: limit, admittedIn: .default, commonModes: Self.common, from: &position) == nil)
        queue.endDrain(capacityLimit: 4_096)
        #expect(queue.isEmpty && queue.lastSequence == nil)
    }

    @Test func aTakenBlockIsNoLongerReferencedByTheQueue() {
        var queue = BlockQueue()
        weak var weakMarker: Marker?
        do {
            let marker = Marker()
            weakMarker = marker
            var batch = [Self.block(1) { withExtendedLifetime(marker) {} }, Self.block(2, .tracking)]
            queue.take(&batch, capacityLimit: 4_096)
        }
        #expect(weakMarker != nil)  // queued: the queue holds the block
        let limit = queue.lastSequence!
        var position = 0
        queue.beginDrain()
        do {
            let block = queue.takeNext(upTo: limit, admittedIn: .default, commonModes: Self.common, from: &position)
            #expect(block?.sequence == 1)
        }
        // Taken and dropped while the drain still runs, and block 2 keeps the storage in use.
        #expect(weakMarker == nil)
        queue.endDrain(capacityLimit: 4_096)
        #expect(!queue.isEmpty)
    }

    @Test func aTakeOverTheCapacityLimitDoesNotKeepTheLargeStorage() {
        var queue = BlockQueue()
        var first = [Self.block(1, .tracking)]
        queue.take(&first, capacityLimit: 4_096)
        var burst = (2...100).map { Self.block(UInt64($0)) }
        queue.take(&burst, capacityLimit: 16)  // appended behind block 1: the burst's own storage is let go
        #expect(burst.isEmpty && burst.capacity < 99)
        #expect(Self.drain(&queue, in: .default) == Array(2...100))
    }

    // MARK: Blocks parked for another mode

    @Test func aBlockParkedForAnotherModeDoesNotMakeTheStorageGrowWithTheBlocksThatRunPastIt() {
        var queue = BlockQueue()
        var parked = [Self.block(1, .tracking)]
        queue.take(&parked, capacityLimit: 4_096)
        var largest = 0
        for sequence in 2...1_000 as ClosedRange<UInt64> {
            var batch = [Self.block(sequence)]
            queue.take(&batch, capacityLimit: 4_096)
            #expect(Self.drain(&queue, in: .default) == [sequence])
            largest = max(largest, queue.storedEntryCount)
        }
        // The taken places behind block 1 are compacted away: a few entries, not 1,000.
        #expect(largest <= 4)
        #expect(Self.drain(&queue, in: .tracking) == [1])
        #expect(queue.isEmpty && queue.storedEntryCount == 0)
    }

    @Test func aSearchPassesOverParkedBlocksOnceAndStillFindsTheBlocksQueuedAfterThem() {
        var queue = BlockQueue()
        var parked = (1...100).map { Self.block(UInt64($0), .tracking) }
        queue.take(&parked, capacityLimit: 4_096)
        #expect(Self.drain(&queue, in: .default) == [])
        // Judged once: the next search for the default mode starts past them.
        #expect(queue.searchStart(for: .default, commonModes: Self.common) == 100)
        #expect(!Self.finds(&queue, .default, commonModes: Self.common))

        var late = [Self.block(101), Self.block(102, .tracking), Self.block(103)]
        queue.take(&late, capacityLimit: 4_096)
        #expect(Self.finds(&queue, .default, commonModes: Self.common))
        #expect(Self.drain(&queue, in: .default) == [101, 103])
        #expect(queue.searchStart(for: .default, commonModes: Self.common) == 103)
        // Another mode's search starts from the beginning, and finds them all, in order.
        #expect(queue.searchStart(for: .tracking, commonModes: Self.common) == 0)
        #expect(Self.drain(&queue, in: .tracking) == Array(1...100) + [102])
        #expect(queue.isEmpty)
    }

    @Test func aJudgementDoesNotHoldForAnotherCommonSetOrAnotherExecutorHeldBack() {
        var queue = BlockQueue()
        let executor = ObjectIdentifier(Marker.self)
        var batch = [Self.block(1, .common),
                     QueuedBlock(sequence: 2, modes: .one(.default), body: {}, isJob: true, serialExecutor: executor)]
        queue.take(&batch, capacityLimit: 4_096)

        // In tracking, with a common set without it, block 1 may not run.
        let defaultOnly: Set<LoopMode> = [.default]
        #expect(!Self.finds(&queue, .tracking, commonModes: defaultOnly))
        #expect(queue.searchStart(for: .tracking, commonModes: defaultOnly) == 2)
        // Tracking joins the common modes: judged anew, block 1 may run.
        #expect(queue.searchStart(for: .tracking, commonModes: Self.common) == 0)
        #expect(Self.finds(&queue, .tracking, commonModes: Self.common))

        // In default, with the executor's job held back (one of its jobs runs the loop nested), block 1 alone.
        var position = 0
        queue.beginDrain()
        #expect(queue.takeNext(upTo: 2, admittedIn: .default, commonModes: Self.common, holdingBack: [executor],
                               from: &position)?.sequence == 1)
        #expect(queue.takeNext(upTo: 2, admittedIn: .default, commonModes: Self.common, holdingBack: [executor],
                               from: &position) == nil)
        #expect(queue.searchStart(for: .default, commonModes: Self.common, holdingBack: [executor]) == 2)
        queue.endDrain(capacityLimit: 4_096)
        // The job's executor is free again: its job is found.
        #expect(queue.searchStart(for: .default, commonModes: Self.common) < 2)
        #expect(Self.finds(&queue, .default, commonModes: Self.common))
        #expect(Self.drain(&queue, in: .default) == [2])
        #expect(queue.isEmpty)
    }

    @Test func aDrainNestedInAnotherModeLeavesTheOuterDrainItsBlocks() {
        var queue = BlockQueue()
        var batch = [Self.block(1), Self.block(2, .tracking), Self.block(3), Self.block(4, .tracking)]
        queue.take(&batch, capacityLimit: 4_096)
        var position = 0
        queue.beginDrain()
        #expect(queue.takeNext(upTo: 4, admittedIn: .default, commonModes: Self.common, from: &position)?
            .sequence == 1)
        // Block 1 runs the loop nested in tracking: 2 and 4 run there, and it judges 3 as not for it.
        #expect(Self.drain(&queue, in: .tracking) == [2, 4])
        #expect(queue.takeNext(upTo: 4, admittedIn: .default, commonModes: Self.common, from: &position)?
            .sequence == 3)
        #expect(queue.takeNext(upTo: 4, admittedIn: .default, commonModes: Self.common, from: &position) == nil)
        queue.endDrain(capacityLimit: 4_096)
        #expect(queue.isEmpty && queue.storedEntryCount == 0)
    }
}
