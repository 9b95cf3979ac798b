/// Where a loop reads the time: the monotonic clock by default, or a `ManualLoopClock` in tests.
///
/// Conforming types must be safe to read from any thread.
public protocol LoopClock: Sendable {
    /// The current instant. Never goes backwards.
    var now: LoopInstant { get }
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds. Readable from any thread.
public struct SystemLoopClock: LoopClock {
    public init() {}

    public var now: LoopInstant {
        LoopInstant(nanoseconds: monotonicNanoseconds())
    }
}
