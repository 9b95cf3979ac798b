import Testing
@testable import LoopKit

/// The sorted lists of a mode: inserting and removing by `(order, sequence)` with a binary search keeps the same list
/// as sorting everything afresh, whatever the orders.
@Suite("Mode items")
struct ModeItemsTests {
    final class Item {
        let order: Int
        let sequence: UInt64

        init(order: Int, sequence: UInt64) {
            self.order = order
            self.sequence = sequence
        }
    }

    @Test func sortedInsertAndRemoveMatchAFreshSort() {
        var generator = SplitMix64(seed: 2026)
        var list: [Item] = []
        var all: [Item] = []
        for sequence in 1...800 as ClosedRange<UInt64> {
            if !all.isEmpty && Int.random(in: 0..<3, using: &generator) == 0 {
                let item = all.remove(at: Int.random(in: 0..<all.count, using: &generator))
                ModeItems.removeSorted(item, from: &list) { ($0.order, $0.sequence) }
            } else {
                // Mostly one order, as a server's connections; sometimes another, which goes in the middle.
                let order = Int.random(in: 0..<10, using: &generator) == 0 ? Int.random(in: -3...3, using: &generator) : 0
                let item = Item(order: order, sequence: sequence)
                all.append(item)
                ModeItems.insertSorted(item, into: &list) { ($0.order, $0.sequence) }
            }
            let expected = all.sorted { ($0.order, $0.sequence) < ($1.order, $1.sequence) }
            #expect(list.count == expected.count)
            #expect(zip(list, expected).allSatisfy { $0 === $1 })
        }
    }
}
