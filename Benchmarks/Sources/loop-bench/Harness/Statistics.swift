/// A sorted set of samples and its order statistics.
struct Distribution: Sendable {
    /// The samples, ascending.
    let sorted: [Double]

    init(_ values: some Sequence<Double>) {
        self.sorted = values.sorted()
    }

    /// Samples recorded in nanoseconds, kept in microseconds.
    init(nanoseconds: [UInt64]) {
        self.init(nanoseconds.lazy.map { Double($0) / 1_000 })
    }

    var count: Int { self.sorted.count }
    var isEmpty: Bool { self.sorted.isEmpty }
    var min: Double { self.sorted.first ?? .nan }
    var max: Double { self.sorted.last ?? .nan }
    var mean: Double { self.isEmpty ? .nan : self.sorted.reduce(0, +) / Double(self.count) }

    /// The nearest-rank percentile: the smallest sample with at least `p` percent of the samples at or below it.
    ///
    /// - Complexity: O(1).
    func percentile(_ p: Double) -> Double {
        guard !self.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(self.count)).rounded(.up))
        return self.sorted[Swift.min(Swift.max(rank, 1), self.count) - 1]
    }

    var p50: Double { self.percentile(50) }
    var p90: Double { self.percentile(90) }
    var p99: Double { self.percentile(99) }
    var p999: Double { self.percentile(99.9) }

    /// The fraction of samples at or below `value` (the empirical CDF).
    ///
    /// - Complexity: O(log *n*).
    func fraction(atOrBelow value: Double) -> Double {
        var low = 0
        var high = self.count
        while low < high {
            let middle = (low + high) / 2
            if self.sorted[middle] <= value { low = middle + 1 } else { high = middle }
        }
        return self.isEmpty ? 0 : Double(low) / Double(self.count)
    }
}

/// Where each fire of a periodic callback fell against its grid `first + k × period`.
struct GridLateness {
    /// Lateness of each fire against the latest slot at or before it, in nanoseconds. A fire up to `earlyAllowance`
    /// before a slot counts for that slot (with lateness 0 and a count in `early`).
    private(set) var lateness: [UInt64] = []
    /// Fires for a slot that had already fired (a catch-up burst).
    private(set) var repeated = 0
    /// Fires up to `earlyAllowance` before their slot.
    private(set) var early = 0
    /// The times of the slots in `0..<slots` with no fire, ascending.
    private(set) var missedSlotTimes: [UInt64] = []
    /// Stretches between two fires (or a run's first slot and its first fire, or its last fire and the end of its
    /// slots) longer than a period and `stallAllowance`: where the ticker's thread did not run when it should have.
    private(set) var stalls: [ClosedRange<UInt64>] = []

    /// Slots in `0..<slots` with no fire.
    var missed: Int { self.missedSlotTimes.count }

    /// - Parameters:
    ///   - fires: Monotonic fire times, ascending.
    ///   - first: The first slot.
    ///   - period: The grid's period in nanoseconds.
    ///   - slots: How many slots the run covered; fires for later slots are ignored.
    ///   - stallAllowance: How much longer than a period a stretch without fires must be to count as a stall.
    init(fires: [UInt64], first: UInt64, period: UInt64, slots: Int, earlyAllowance: UInt64 = 50_000,
         stallAllowance: UInt64 = 500_000) {
        var seen = [Bool](repeating: false, count: slots)
        let end = first &+ UInt64(slots) &* period
        var previous = first &- period  // as if a fire had come on time for the slot before the first
        for fire in fires {
            guard fire &+ earlyAllowance >= first else {
                self.early += 1
                continue
            }
            let slot = Int((fire &+ earlyAllowance &- first) / period)
            guard slot < slots else { continue }
            if fire &- previous > period &+ stallAllowance { self.stalls.append(previous...fire) }
            previous = fire
            let slotTime = first &+ UInt64(slot) &* period
            if fire < slotTime {
                self.early += 1
                self.lateness.append(0)
            } else {
                self.lateness.append(fire &- slotTime)
            }
            if seen[slot] { self.repeated += 1 } else { seen[slot] = true }
        }
        if end &- previous > period &+ stallAllowance { self.stalls.append(previous...end) }
        self.missedSlotTimes = seen.indices.lazy.filter { !seen[$0] }.map { first &+ UInt64($0) &* period }
    }

    /// How many of this ticker's missed slots fell in a stall of its own that overlaps a stall of one of `others`:
    /// a stretch when neither thread ran (as when the host stops the processor both sleep on), rather than one when
    /// only this ticker fell behind (as behind a kernel thread on its processor).
    func missedInSharedStalls(with others: [GridLateness]) -> Int {
        self.missedSlotTimes.lazy.filter { slotTime in
            let own = self.stalls.first { $0.contains(slotTime) } ?? slotTime...slotTime
            return others.contains { other in other.stalls.contains { $0.overlaps(own) } }
        }.count
    }
}
