/// The modes a timer is in, with its slot in each mode's `ModeTimers`.
///
/// Almost always one, so the first is stored inline and the rest in an array that stays empty (and unallocated) for a
/// timer in one mode, as `ModeSet` does for modes: a million timers allocate a million blocks fewer, and removing a
/// fired timer from its mode reads no cache line outside the timer. Loop thread only.
struct TimerMemberships: Sequence {
    /// A mode the timer is in (its `ModeItems.index`), and the timer's slot in that mode's `ModeTimers`.
    struct Membership {
        let modeIndex: Int32
        let slot: Int32
    }

    private var first: Membership?
    private var others: [Membership] = []

    /// Records that the timer joined the mode of `ModeItems.index` `modeIndex` in `slot`.
    mutating func append(modeIndex: Int32, slot: Int32) {
        let membership = Membership(modeIndex: modeIndex, slot: slot)
        if self.first == nil {
            self.first = membership
        } else {
            self.others.append(membership)
        }
    }

    /// Forgets the membership in the mode of `ModeItems.index` `modeIndex`, keeping the others in order.
    ///
    /// - Returns: The timer's slot in that mode, or `nil` if it was not there.
    mutating func remove(modeIndex: Int32) -> Int32? {
        if let first = self.first, first.modeIndex == modeIndex {
            self.first = self.others.isEmpty ? nil : self.others.removeFirst()
            return first.slot
        }
        guard let index = self.others.firstIndex(where: { $0.modeIndex == modeIndex }) else { return nil }
        return self.others.remove(at: index).slot
    }

    func makeIterator() -> Iterator {
        Iterator(first: self.first, others: self.others.makeIterator())
    }

    /// The first membership, then the others, without copying them into a new array.
    struct Iterator: IteratorProtocol {
        fileprivate var first: Membership?
        fileprivate var others: IndexingIterator<[Membership]>

        mutating func next() -> Membership? {
            if let first = self.first {
                self.first = nil
                return first
            }
            return self.others.next()
        }
    }
}
