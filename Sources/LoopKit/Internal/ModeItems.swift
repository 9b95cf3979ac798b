/// Everything one mode of one loop holds. Loop thread only.
final class ModeItems {
    let mode: LoopMode
    /// Where the loop keeps these items in `Loop.modeItemsByIndex`: how a timer in several modes finds the others'
    /// queues when it fires, without hashing mode names.
    let index: Int32

    // `@exclusivity(unchecked)`: touched on every pass, on the loop's thread only, never across a callout (see the
    // note in `Loop`).
    /// Signalled sources, in the order they were added.
    @exclusivity(unchecked) var sources: [LoopSource] = []
    /// Descriptor sources, sorted by `(order, sequence)`: the order in which ready ones are called.
    @exclusivity(unchecked) var descriptorSources: [LoopDescriptorSource] = []
    /// Observers, sorted by `(order, sequence)`.
    @exclusivity(unchecked) var observers: [LoopObserver] = []
    /// The timers of this mode, and their queue by next fire date (see `ModeTimers`).
    @exclusivity(unchecked) var timers = ModeTimers()

    init(mode: LoopMode, index: Int32) {
        self.mode = mode
        self.index = index
    }

    /// Whether sources or timers keep this mode alive (observers don't; pending blocks are checked by the loop).
    var hasSourcesOrTimers: Bool {
        !self.sources.isEmpty || !self.descriptorSources.isEmpty || self.timers.count > 0
    }

    /// Inserts `element` after every element that sorts before or equal to it, keeping `(order, sequence)` order.
    ///
    /// - Complexity: O(1) for the usual case, a new item of the highest order (it goes last); O(log n) comparisons
    ///   otherwise, plus the move of what follows. A server adding its ten-thousandth connection pays no scan.
    static func insertSorted<Element: AnyObject>(
        _ element: Element,
        into array: inout [Element],
        by key: (Element) -> (Int, UInt64)
    ) {
        let elementKey = key(element)
        if let last = array.last, key(last) > elementKey {
            array.insert(element, at: self.firstIndex(in: array, past: elementKey, orEqual: false, by: key))
        } else {
            array.append(element)
        }
    }

    /// Removes `element` from an array kept in `key` order, where each key is unique (an item's order and sequence
    /// never change).
    ///
    /// - Complexity: O(log n) comparisons, plus the move of what follows.
    static func removeSorted<Element: AnyObject>(
        _ element: Element,
        from array: inout [Element],
        by key: (Element) -> (Int, UInt64)
    ) {
        let elementKey = key(element)
        let index = self.firstIndex(in: array, past: elementKey, orEqual: true, by: key)
        if index < array.endIndex, array[index] === element {
            array.remove(at: index)
        }
    }

    static func remove<Element: AnyObject>(_ element: Element, from array: inout [Element]) {
        if let index = array.firstIndex(where: { $0 === element }) {
            array.remove(at: index)
        }
    }

    /// The first index whose key is past `bound`: greater than it, or with `orEqual`, not less (binary search).
    private static func firstIndex<Element>(
        in array: [Element], past bound: (Int, UInt64), orEqual: Bool, by key: (Element) -> (Int, UInt64)
    ) -> Int {
        var low = 0
        var high = array.count
        while low < high {
            let middle = (low + high) / 2
            let middleKey = key(array[middle])
            if middleKey > bound || (orEqual && middleKey == bound) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
