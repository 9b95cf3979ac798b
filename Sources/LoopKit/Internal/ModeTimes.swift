/// How long a loop ran each mode innermost, added up at every run's entry and exit; the time no run is active (the
/// caller, or a host loop driving a pass at a time, between its calls) is in no mode. Kept while a `HitchMonitor` is
/// attached, so that a display link's frame can leave out of the ratio's span the time the loop ran a mode the link is
/// not in: the link was not ticking then (DESIGN §4, "per second of ticking"). A monitor compares what
/// `timeOutside(at:ticksIn:)` gives at two frames of one link, so however many runs come and go between them (a drag
/// run a `run` call per event), the time is exact. Loop thread only.
struct ModeTimes {
    /// Nanoseconds each mode ran innermost, up to `since`.
    private var totals: [LoopMode: UInt64] = [:]
    /// The mode the loop runs innermost from `since` on (`nil`: none).
    private var current: LoopMode?
    private var since: UInt64 = 0

    /// Notes that from `instant` on, the loop runs `mode` innermost (`nil`: no run).
    mutating func switchTo(_ mode: LoopMode?, at instant: LoopInstant) {
        if let current, instant.nanoseconds > self.since {
            self.totals[current, default: 0] &+= instant.nanoseconds - self.since
        }
        self.current = mode
        self.since = instant.nanoseconds
    }

    /// Starts counting again from `mode` at `instant`, without adding the time since the last switch: a monitor is
    /// attached after none was, and what the loop ran meanwhile was not followed.
    mutating func resume(in mode: LoopMode?, at instant: LoopInstant) {
        self.current = mode
        self.since = instant.nanoseconds
    }

    /// Nanoseconds the loop ran, innermost, a mode in which `ticks` is false, up to `instant`, since the times began.
    func timeOutside(at instant: LoopInstant, ticksIn ticks: (LoopMode) -> Bool) -> UInt64 {
        var outside: UInt64 = 0
        for (mode, time) in self.totals where !ticks(mode) {
            outside &+= time
        }
        if let current, !ticks(current), instant.nanoseconds > self.since {
            outside &+= instant.nanoseconds - self.since
        }
        return outside
    }
}
