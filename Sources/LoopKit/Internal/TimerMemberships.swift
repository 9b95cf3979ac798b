/// The modes a timer is in, with its slot in each mode's `ModeTimers`.
///
/// Almost always one, so the first is stored inline and the rest in an array that stays empty (and unallocated) for a
/// timer in one mode, as `ModeSet` does for modes: a million timers allocate a million blocks fewer, and removing a
/// fired timer from its mode reads no cache line outside the timer. Loop thread only.
struct TimerMemberships: Sequence {
    /// A mode the timer is in, and its slot in that mode's `ModeTimers`.
    struct Membership {
        let mode: LoopMode
        let slot: Int32
    }

    private var first: Membership?
    private var others: [Membership] = []

    /// Records that the timer joined `mode` in `slot`.
    mutating func append(mode: LoopMode, slot: Int32) {
        let membership = Membership(mode: mode, slot: slot)
        if self.first == nil {
            self.first = membership
        } else {
            self.others.append(membership)
        }
    }

    /// Forgets the membership in `mode`, keeping the others in order.
    ///
    /// - Returns: The timer's slot in `mode`, or `nil` if it was not there.
    mutating func remove(mode: LoopMode) -> Int32? {
        if let first = self.first, first.mode == mode {
            self.first = self.others.isEmpty ? nil : self.others.removeFirst()
            return first.slot
        }
        guard let index = self.others.firstIndex(where: { $0.mode == mode }) else { return nil }
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
