/// Which mode a loop ran, innermost, over its last few run calls: an entry each time a run begins or ends, `nil` while
/// no run is active (the caller, or a host loop driving a pass at a time, between its calls). Kept while a
/// `HitchMonitor` is attached, so that a display link's frame can leave out of the ratio's span the time the loop ran a
/// mode the link is not in: the link was not ticking then (DESIGN §4, "per second of ticking").
///
/// A ring of `capacity` entries: time before the oldest kept counts as ticking, as all of it did before. Loop thread
/// only.
struct ModeHistory {
    private struct Entry {
        let instant: LoopInstant
        let mode: LoopMode?
    }

    static let capacity = 64

    private var entries: [Entry] = []
    /// Where the next entry goes once the ring is full (the oldest entry's index).
    private var next = 0

    /// Notes that from `instant` on, the loop runs `mode` innermost (`nil`: no run).
    mutating func record(_ mode: LoopMode?, at instant: LoopInstant) {
        let entry = Entry(instant: instant, mode: mode)
        if self.entries.count < Self.capacity {
            if self.entries.isEmpty {
                self.entries.reserveCapacity(Self.capacity)  // once: later entries allocate nothing
            }
            self.entries.append(entry)
        } else {
            self.entries[self.next] = entry
            self.next = (self.next + 1) % Self.capacity
        }
    }

    /// The time from `start` to `end` during which the loop ran, innermost, a mode in which `ticks` is false.
    func timeOutside(from start: LoopInstant, to end: LoopInstant, ticksIn ticks: (LoopMode) -> Bool) -> Duration {
        guard start < end else { return .zero }
        var outside: UInt64 = 0
        let count = self.entries.count
        for offset in 0..<count {
            let entry = self.entries[(self.next + offset) % count]
            guard let mode = entry.mode, !ticks(mode) else { continue }
            let until = offset + 1 < count ? self.entries[(self.next + offset + 1) % count].instant : end
            let from = max(entry.instant, start)
            let to = min(until, end)
            if to > from {
                outside += to.nanoseconds - from.nanoseconds
            }
        }
        return .nanoseconds(Int64(clamping: outside))
    }
}
