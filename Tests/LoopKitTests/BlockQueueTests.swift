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
        #expect(queue.hasBlock(admittedIn: .tracking, commonModes: Self.common))
        #expect(!queue.hasBlock(admittedIn: .default, commonModes: Self.common))
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
}
