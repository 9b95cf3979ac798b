/// Everything one mode of one loop holds. Loop thread only.
final class ModeItems {
    let mode: LoopMode

    /// Signalled sources, in the order they were added.
    var sources: [LoopSource] = []
    /// Descriptor sources, sorted by `(order, sequence)`: the order in which ready ones are called.
    var descriptorSources: [LoopDescriptorSource] = []
    /// Observers, sorted by `(order, sequence)`.
    var observers: [LoopObserver] = []
    /// The timers of this mode, and their queue by next fire date (see `ModeTimers`).
    var timers = ModeTimers()

    init(mode: LoopMode) {
        self.mode = mode
    }

    /// Whether sources or timers keep this mode alive (observers don't; pending blocks are checked by the loop).
    var hasSourcesOrTimers: Bool {
        !self.sources.isEmpty || !self.descriptorSources.isEmpty || self.timers.count > 0
    }

    /// Inserts `element` after every element that sorts before or equal to it, keeping `(order, sequence)` order.
    static func insertSorted<Element: AnyObject>(
        _ element: Element,
        into array: inout [Element],
        by key: (Element) -> (Int, UInt64)
    ) {
        let elementKey = key(element)
        let index = array.firstIndex { key($0) > elementKey } ?? array.endIndex
        array.insert(element, at: index)
    }

    static func remove<Element: AnyObject>(_ element: Element, from array: inout [Element]) {
        if let index = array.firstIndex(where: { $0 === element }) {
            array.remove(at: index)
        }
    }
}
