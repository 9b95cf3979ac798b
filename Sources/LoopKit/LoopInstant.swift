/// A point on a loop clock's time line, in nanoseconds.
///
/// Points and intervals are distinct types: `LoopInstant - LoopInstant` is a `Duration`, and
/// `LoopInstant + Duration` is a `LoopInstant`. Arithmetic saturates instead of overflowing, for any duration
/// (`Duration` reaches far beyond 2⁶³ ns): results stop at `0` and `.distantFuture`, which stays `.distantFuture`.
/// A duration's fraction of a nanosecond rounds the result up, so a deadline computed from a delay is never early.
/// Values can be used from any thread.
public struct LoopInstant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin (for the system clock, an arbitrary point such as boot).
    public let nanoseconds: UInt64

    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    /// An instant later than any the clock will reach: "no deadline".
    public static let distantFuture = LoopInstant(nanoseconds: .max)

    public static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    public static func + (lhs: LoopInstant, rhs: Duration) -> LoopInstant {
        LoopInstant(nanoseconds: lhs.nanoseconds.clampedAdding(rhs))
    }

    public static func - (lhs: LoopInstant, rhs: Duration) -> LoopInstant {
        LoopInstant(nanoseconds: lhs.nanoseconds.clampedSubtracting(rhs))
    }

    /// The signed interval from `rhs` to `lhs`.
    public static func - (lhs: LoopInstant, rhs: LoopInstant) -> Duration {
        if lhs >= rhs {
            return .nanoseconds(Int64(clamping: lhs.nanoseconds - rhs.nanoseconds))
        }
        return .nanoseconds(-Int64(clamping: rhs.nanoseconds - lhs.nanoseconds))
    }

    public var description: String {
        self == .distantFuture ? "distantFuture" : "\(self.nanoseconds)ns"
    }
}

extension UInt64 {
    /// `self + other`, stopping at `UInt64.max` instead of overflowing (an instant plus a delay in nanoseconds).
    func addingClamped(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = self.addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    /// `self + delta` in nanoseconds, a fraction rounded up, clamped to `0...UInt64.max`: exact for any duration.
    func clampedAdding(_ delta: Duration) -> UInt64 {
        Self.clamped(Int128(self) + delta.wholeNanoseconds(roundingUp: true))
    }

    /// `self - delta` in nanoseconds, a fraction rounded so that the result is rounded up, clamped likewise.
    func clampedSubtracting(_ delta: Duration) -> UInt64 {
        Self.clamped(Int128(self) - delta.wholeNanoseconds(roundingUp: false))
    }

    private static func clamped(_ value: Int128) -> UInt64 {
        value < 0 ? 0 : value > Int128(UInt64.max) ? .max : UInt64(value)
    }
}

extension Duration {
    /// The duration in whole nanoseconds, a fraction rounded up (never shorter, so never early as a delay or a
    /// period), clamped to `Int64`'s range.
    var clampedNanoseconds: Int64 {
        Int64(clamping: self.wholeNanoseconds(roundingUp: true))
    }

    /// The duration in whole nanoseconds (a fraction rounded up) for a length that cannot be negative (a period, a
    /// tolerance): 0 for a negative one, clamped to `UInt64`'s range, the instants' own, so that a period of 292 years
    /// or more is not cut to `Int64.max` nanoseconds (its next slot would come early).
    var nonNegativeNanoseconds: UInt64 {
        UInt64(clamping: max(self.wholeNanoseconds(roundingUp: true), 0))
    }

    /// The duration in whole nanoseconds, a fraction rounded toward positive infinity (`roundingUp`) or negative
    /// infinity; exact for any duration. Read from `attoseconds`, not `components`, whose `Int64` seconds trap beyond
    /// some 292 billion years (`.seconds(1e19)` is a valid `Duration`).
    func wholeNanoseconds(roundingUp: Bool) -> Int128 {
        if self == .zero { return 0 }  // most timers' tolerance, and a dated one-shot's interval: skip the division
        let (quotient, remainder) = self.attoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)  // toward zero
        if roundingUp && remainder > 0 { return quotient + 1 }
        if !roundingUp && remainder < 0 { return quotient - 1 }
        return quotient
    }

    /// A duration of `seconds`, checked: NaN, infinite and negative values are a precondition failure naming `call`.
    /// One of 9.2e9 s (some 292 years) or more saturates at `Int64.max` nanoseconds, as the same length given as a
    /// `Duration` does once it meets an instant.
    static func checkedSeconds(_ seconds: Double, call: StaticString) -> Duration {
        loopPrecondition(!seconds.isNaN, "\(call): the interval is NaN")
        loopPrecondition(seconds.isFinite, "\(call): the interval is infinite")
        loopPrecondition(seconds >= 0, "\(call): the interval is negative (\(seconds) s)")
        guard seconds < 9.2e9 else { return .nanoseconds(Int64.max) }
        return .nanoseconds(Int64((seconds * 1e9).rounded(.up)))  // never a shorter delay than asked for
    }
}
