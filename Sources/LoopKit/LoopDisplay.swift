/// A display's refresh grid: the instants `epoch + n × period` at which frames are presented, with `period`
/// `1 / maximumRate` seconds.
///
/// All display links of one display land on the same instants, as on a real screen. The grid is computed exactly
/// (in rational nanoseconds, never by adding a rounded period), so it does not drift over hours. The default
/// epoch is the clock's origin, so links on any loop and any clock (a `ManualLoopClock` too) share it.
///
/// Immutable; usable from any thread.
public final class LoopDisplay: Sendable, CustomStringConvertible {
    /// The refresh rate in Hz: 60, 120 (ProMotion-like), or any rate configured, e.g. 144.
    public let maximumRate: Int
    /// The instant of frame 0.
    public let epoch: LoopInstant

    /// A display refreshing `maximumRate` times a second, with frame 0 at `epoch`.
    ///
    /// - Precondition: `maximumRate` is in 1...1000.
    public init(maximumRate: Int, epoch: LoopInstant = LoopInstant(nanoseconds: 0)) {
        loopPrecondition((1...1000).contains(maximumRate),
                     "LoopDisplay(maximumRate:epoch:): the rate must be 1...1000 Hz (got \(maximumRate))")
        self.maximumRate = maximumRate
        self.epoch = epoch
    }

    /// The default display: 120 Hz.
    public static let `default` = LoopDisplay(maximumRate: 120)

    /// A 60 Hz display.
    public static let sixtyHertz = LoopDisplay(maximumRate: 60)

    /// One refresh: `1 / maximumRate` seconds.
    public var refreshPeriod: Duration {
        self.frameDuration(refreshesPerFrame: 1)
    }

    /// The rates a link can get: `maximumRate / k` for k = 1, 2, 3 ... (120: 120, 60, 40, 30, 24, 20 ...).
    public func supportedRates(downTo minimum: Double = 1) -> [Double] {
        (1...self.maximumRate).lazy.map { Double(self.maximumRate) / Double($0) }.filter { $0 >= minimum }
    }

    /// The number of refreshes per frame for a request: the largest rate `maximumRate / k` that is at most
    /// `preferred` and inside `range`; with none inside, the supported rate nearest to the range.
    ///
    /// `preferred <= 0` asks for the highest rate in the range.
    func refreshesPerFrame(preferred: Double, range: ClosedRange<Double>) -> Int {
        let target = preferred > 0 ? min(preferred, range.upperBound) : range.upperBound
        for k in 1...self.maximumRate {
            let rate = Double(self.maximumRate) / Double(k)
            if rate <= target + 1e-9 && rate >= range.lowerBound - 1e-9 {
                return k
            }
        }
        // Nothing fits: the supported rate nearest to the range (the faster one on a tie).
        var nearest = 1
        var nearestDistance = Double.infinity
        for k in 1...self.maximumRate {
            let rate = Double(self.maximumRate) / Double(k)
            let distance = rate < range.lowerBound ? range.lowerBound - rate : rate - range.upperBound
            if distance < nearestDistance - 1e-9 {
                nearest = k
                nearestDistance = distance
            }
        }
        return nearest
    }

    /// The length of a frame of `refreshesPerFrame` refreshes.
    func frameDuration(refreshesPerFrame k: Int) -> Duration {
        // k / maximumRate seconds, exactly, in attoseconds.
        let attoseconds = Int128(k) * 1_000_000_000_000_000_000 / Int128(self.maximumRate)
        return Duration(attoseconds: attoseconds)
    }

    /// The instant of frame `index` on the grid of frames `refreshesPerFrame` refreshes long.
    func instant(ofFrame index: Int64, refreshesPerFrame k: Int) -> LoopInstant {
        guard index >= 0 else { return self.epoch }
        let offset = Self.product(UInt64(index), UInt64(k) * 1_000_000_000, dividedBy: UInt64(self.maximumRate))
        return LoopInstant(nanoseconds: self.epoch.nanoseconds.addingClamped(offset))
    }

    /// The index of the last frame at or before `instant` (0 before the epoch): the largest `n` whose
    /// `instant(ofFrame: n)` is not after `instant`.
    func frameIndex(atOrBefore instant: LoopInstant, refreshesPerFrame k: Int) -> Int64 {
        guard instant > self.epoch else { return 0 }
        let elapsed = instant.nanoseconds - self.epoch.nanoseconds
        let quotient = Self.product(elapsed, UInt64(self.maximumRate), dividedBy: UInt64(k) * 1_000_000_000)
        var index = Int64(clamping: quotient)
        // Frame instants are rounded down to the nanosecond, so the exact quotient can be one frame short. A frame
        // clamped to the end of time is not one: at `.distantFuture` (a manual clock run to the end) every later
        // frame clamps there too, and counting them would not end.
        while index < .max {
            let next = self.instant(ofFrame: index + 1, refreshesPerFrame: k)
            guard next <= instant, next < .distantFuture else { break }
            index += 1
        }
        return index
    }

    /// `a × b ÷ c` rounded down, clamped to `UInt64`: exact, in 64-bit arithmetic while the product fits (for a
    /// 120 Hz display, the first 4.8 years after its epoch) and in 128-bit beyond, which costs ten times as much.
    private static func product(_ a: UInt64, _ b: UInt64, dividedBy c: UInt64) -> UInt64 {
        let (product, overflow) = a.multipliedReportingOverflow(by: b)
        if !overflow {
            return product / c
        }
        return UInt64(clamping: UInt128(a) * UInt128(b) / UInt128(c))
    }

    /// The first frame strictly after `instant` (none after `.distantFuture`: that is returned as is).
    func nextFrame(after instant: LoopInstant, refreshesPerFrame k: Int) -> (index: Int64, instant: LoopInstant) {
        guard instant != .distantFuture else { return (.max, .distantFuture) }
        var index = self.frameIndex(atOrBefore: instant, refreshesPerFrame: k)
        var next = self.instant(ofFrame: index, refreshesPerFrame: k)
        while next <= instant, next != .distantFuture {
            index += 1
            next = self.instant(ofFrame: index, refreshesPerFrame: k)
        }
        return (index, next)
    }

    public var description: String {
        "LoopDisplay(\(self.maximumRate) Hz)"
    }
}
