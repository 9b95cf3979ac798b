/// The real modes an item is in: almost always one or two, so the first is stored inline and the rest in an array
/// that stays empty (and unallocated) for an item in one mode.
///
/// A `Set<LoopMode>` would allocate its storage for every item, and reading it is one more cache line per check:
/// the loop asks "is this timer still in this mode?" for every timer entry it pops and fires. Loop thread only.
struct ModeSet: Sequence, ExpressibleByArrayLiteral {
    private var first: LoopMode?
    private var others: [LoopMode] = []

    init(arrayLiteral modes: LoopMode...) {
        for mode in modes {
            self.insert(mode)
        }
    }

    var isEmpty: Bool { self.first == nil }

    var count: Int { self.first == nil ? 0 : 1 + self.others.count }

    func contains(_ mode: LoopMode) -> Bool {
        self.first == mode || (!self.others.isEmpty && self.others.contains(mode))
    }

    /// Adds `mode`; returns whether it was not there yet.
    @discardableResult
    mutating func insert(_ mode: LoopMode) -> Bool {
        guard !self.contains(mode) else { return false }
        if self.first == nil {
            self.first = mode
        } else {
            self.others.append(mode)
        }
        return true
    }

    /// Removes `mode`; returns whether it was there.
    @discardableResult
    mutating func remove(_ mode: LoopMode) -> Bool {
        if self.first == mode {
            self.first = self.others.isEmpty ? nil : self.others.removeFirst()
            return true
        }
        guard let index = self.others.firstIndex(of: mode) else { return false }
        self.others.remove(at: index)
        return true
    }

    func makeIterator() -> Iterator {
        Iterator(first: self.first, others: self.others.makeIterator())
    }

    /// The first mode, then the others, without copying them into a new array.
    struct Iterator: IteratorProtocol {
        fileprivate var first: LoopMode?
        fileprivate var others: IndexingIterator<[LoopMode]>

        mutating func next() -> LoopMode? {
            if let first = self.first {
                self.first = nil
                return first
            }
            return self.others.next()
        }
    }
}
