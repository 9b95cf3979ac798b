/// Where a loop reads the time: the monotonic clock by default, or a `ManualLoopClock` (or another
/// `VirtualLoopClock`) in tests.
///
/// Conforming types must be safe to read from any thread.
public protocol LoopClock: Sendable {
    /// The current instant. Never goes backwards.
    var now: LoopInstant { get }

    /// Whether `now` reads the system's monotonic clock (`CLOCK_MONOTONIC`), so that a loop may sleep until one of
    /// its instants on a kernel timer, and its passes may read `CLOCK_MONOTONIC` themselves in place of `now`. Only a
    /// clock whose `now` is exactly that reading may say `true`. `false` by default: the loop then sleeps for the time
    /// left, read from `now`, and reads the time only from `now`.
    var readsSystemMonotonicClock: Bool { get }

    /// This clock, if it is virtual: a loop then advances it instead of sleeping. `nil` by default;
    /// `VirtualLoopClock` supplies it, so a clock declares itself virtual by conforming to that protocol.
    var virtualClock: (any VirtualLoopClock)? { get }
}

extension LoopClock {
    public var readsSystemMonotonicClock: Bool { false }

    public var virtualClock: (any VirtualLoopClock)? { nil }
}

/// A clock whose time moves only when told to: a loop on one never sleeps in real time to wait for an instant.
///
/// When a loop on a virtual clock would sleep until its next timer or its run deadline, it looks at its descriptors
/// without blocking and, if nothing is ready, calls `advance(to:)` with that instant instead, as if it had slept.
/// Conform your own test clock to use it; `ManualLoopClock` is LoopKit's.
public protocol VirtualLoopClock: LoopClock {
    /// Moves the clock forward to `instant`; an instant in the past leaves it unchanged. Any thread.
    func advance(to instant: LoopInstant)
}

extension VirtualLoopClock {
    public var virtualClock: (any VirtualLoopClock)? { self }
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds. Readable from any thread.
public struct SystemLoopClock: LoopClock {
    public init() {}

    public var now: LoopInstant {
        LoopInstant(nanoseconds: monotonicNanoseconds())
    }

    public var readsSystemMonotonicClock: Bool { true }
}
