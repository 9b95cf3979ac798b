import Testing
@testable import LoopKit

/// The timer queue's in-place sort (`sortUnstably`), on the inputs that break hand-written quicksorts: runs, equal
/// keys, few distinct keys, and heapsort's takeover.
@Suite("Unstable sort")
struct UnstableSortTests {
    /// Sorts `input` by the key only (so equal keys are a real test of the partition) and checks the result against
    /// the standard sort: the same multiset, in order.
    private func checkSorts(_ input: [Int], depthLimit: Int? = nil) {
        var elements = input.enumerated().map { (key: $0.element, origin: $0.offset) }
        elements.withUnsafeMutableBufferPointer { buffer in
            if let depthLimit {
                buffer.sortUnstably(by: { $0.key < $1.key }, depthLimit: depthLimit)
            } else {
                buffer.sortUnstably(by: { $0.key < $1.key })
            }
        }
        #expect(elements.map(\.key) == input.sorted(), "input of \(input.count)")
        #expect(elements.map(\.origin).sorted() == Array(input.indices), "every element once")
    }

    @Test(arguments: [0, 1, 2, 3, 16, 17, 18, 100, 1_000, 10_000])
    func sortsRandomKeys(count: Int) {
        var random = SplitMix64(seed: UInt64(count))
        self.checkSorts((0..<count).map { _ in Int.random(in: 0..<1_000_000, using: &random) })
    }

    @Test func sortsRunsAndRepeatedKeys() {
        var random = SplitMix64(seed: 7)
        let count = 5_000
        self.checkSorts(Array(0..<count))
        self.checkSorts(Array((0..<count).reversed()))
        self.checkSorts(Array(repeating: 42, count: count))
        self.checkSorts((0..<count).map { _ in Int.random(in: 0..<3, using: &random) })
        self.checkSorts((0..<count).map { $0 % 2 == 0 ? $0 : count - $0 })  // organ pipe
        self.checkSorts(Array(0..<count / 2) + Array(0..<count / 2))
    }

    @Test(arguments: [0, 1, 3])
    func heapsortTakesOverPastTheDepthLimit(depthLimit: Int) {
        var random = SplitMix64(seed: 11)
        self.checkSorts((0..<3_000).map { _ in Int.random(in: 0..<500, using: &random) }, depthLimit: depthLimit)
        self.checkSorts(Array((0..<3_000).reversed()), depthLimit: depthLimit)
    }

    /// A burst of the queue (more than a 64th of a large queue due at once) comes out in `(deadline, push)` order
    /// after the entries popped before it.
    @Test func aBurstComesOutInOrder() {
        var queue = TimerQueue()
        var random = SplitMix64(seed: 3)
        let count = TimerQueue.burstMinimumCount * 4
        var inserted: [TimerEntry] = []
        for push in 1...UInt64(count) {
            let entry = TimerEntry(deadline: UInt64.random(in: 0..<1_000, using: &random), push: push, tolerance: 0,
                                   slot: 0)
            queue.insert(entry)
            inserted.append(entry)
        }
        let isLive = { (entry: TimerEntry) in entry.push % 3 != 0 }
        var batch: [TimerEntry] = []
        queue.removeDue(at: 600, into: &batch, isLive: isLive)
        let expected = inserted.filter { $0.deadline <= 600 && isLive($0) }
            .sorted(by: TimerEntry.precedes)
        #expect(expected.count > count / 64, "a burst")
        #expect(batch.map(\.push) == expected.map(\.push))
        #expect(queue.entries.map(\.push).sorted() == inserted.filter { $0.deadline > 600 }.map(\.push).sorted())
        queue.checkInvariants()
    }
}
