/// A point on a loop clock's time line, in nanoseconds.
///
/// Points and intervals are distinct types: `LoopInstant - LoopInstant` is a `Duration`, and
/// `LoopInstant + Duration` is a `LoopInstant`. Arithmetic clamps instead of overflowing, so
/// `.distantFuture + anything` stays `.distantFuture`. Values can be used from any thread.
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
        LoopInstant(nanoseconds: lhs.nanoseconds.clampedAdding(rhs.clampedNanoseconds))
    }

    public static func - (lhs: LoopInstant, rhs: Duration) -> LoopInstant {
        LoopInstant(nanoseconds: lhs.nanoseconds.clampedAdding(-rhs.clampedNanoseconds))
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
    /// `self + delta`, clamped to `0...UInt64.max`.
    func clampedAdding(_ delta: Int64) -> UInt64 {
        if delta >= 0 {
            let (sum, overflow) = self.addingReportingOverflow(UInt64(delta))
            return overflow ? .max : sum
        }
        let magnitude = delta.magnitude
        return magnitude > self ? 0 : self - magnitude
    }
}

extension Duration {
    /// The duration in whole nanoseconds, clamped to `Int64`'s range.
    var clampedNanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return sum
    }

    /// A duration of `seconds`, checked: NaN, infinite and negative values are a precondition failure naming `call`.
    static func checkedSeconds(_ seconds: Double, call: StaticString) -> Duration {
        loopPrecondition(!seconds.isNaN, "\(call): the interval is NaN")
        loopPrecondition(seconds.isFinite, "\(call): the interval is infinite")
        loopPrecondition(seconds >= 0, "\(call): the interval is negative (\(seconds) s)")
        loopPrecondition(seconds < 9.2e9, "\(call): the interval is too large (\(seconds) s)")
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }
}
