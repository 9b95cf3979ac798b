/// How smooth a loop's frames were: what `HitchMonitor` measured so far.
///
/// A hitch is a frame whose work (the busy stretch of the loop in which its display link's callback ran) finished after
/// the frame's `targetTimestamp`, or the first of frames the link skipped because a busy stretch of other work, in one
/// of the link's modes, went on past their target. Hitch time is how long frames were late: in each busy stretch, from
/// the earliest late target to the stretch's end, counted once however many frames were late in it. The hitch time
/// ratio is milliseconds of hitch per second of frames, the figure Apple's tools rate: good below 5 ms/s, warning 5–10,
/// critical above 10. Only frames in a mode the monitor watches count.
public struct HitchReport: Sendable, Hashable, CustomStringConvertible {
    /// Display-link callbacks seen in a mode the monitor watches.
    public internal(set) var frames = 0
    /// Frames the link skipped (`DisplayFrame.skippedFrames`: a callback overran, other work kept the loop busy, or
    /// its mode was not running).
    public internal(set) var skippedFrames = 0
    /// Frames whose work finished after their target (a target two links share counts once), and runs of frames
    /// skipped while other work kept the loop busy past them (one per busy stretch).
    public internal(set) var hitches = 0
    /// How long frames were late: per busy stretch, from its earliest late target to its end.
    public internal(set) var totalHitchTime: Duration = .zero
    /// The time the ratio is taken over: what the frames seen cover (each from its target back over the frames it
    /// skipped), counted once however many links there are, so not the time while a link was paused, nor the time the
    /// loop ran a mode the link is not in (a drag run in `tracking`, for a link in `default` alone; with several links,
    /// time none of them ticked in): the ratio is per second of ticking. Time between run calls (a host loop's own
    /// wait between the passes it drives) counts.
    public internal(set) var frameSpan: Duration = .zero
    /// Busy stretches of the loop (from waking or entry to sleeping or exit).
    public internal(set) var busyPasses = 0
    /// The longest busy stretch.
    public internal(set) var longestBusyPass: Duration = .zero
    /// Busy stretches longer than the monitor's hang threshold.
    public internal(set) var hangs = 0

    init() {}

    /// A report of nothing: no frames, no busy passes. Any thread.
    public static let empty = HitchReport()

    /// What happened between `earlier` and this report (both from one monitor): the counts and times added since.
    /// The longest busy pass is this report's, which is not a difference. Any thread.
    public func since(_ earlier: HitchReport) -> HitchReport {
        var span = HitchReport()
        span.frames = self.frames - earlier.frames
        span.skippedFrames = self.skippedFrames - earlier.skippedFrames
        span.hitches = self.hitches - earlier.hitches
        span.totalHitchTime = self.totalHitchTime - earlier.totalHitchTime
        span.frameSpan = self.frameSpan - earlier.frameSpan
        span.busyPasses = self.busyPasses - earlier.busyPasses
        span.longestBusyPass = self.longestBusyPass
        span.hangs = self.hangs - earlier.hangs
        return span
    }

    /// Milliseconds of hitch per second of frames, `frameSpan` (0 before any frame).
    public var hitchTimeRatio: Double {
        let seconds = HitchReport.seconds(self.frameSpan)
        guard seconds > 0 else { return 0 }
        return HitchReport.seconds(self.totalHitchTime) * 1000 / seconds
    }

    /// The rating of `hitchTimeRatio`.
    public var rating: HitchRating {
        HitchRating(hitchTimeRatio: self.hitchTimeRatio)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.attoseconds) / 1e18  // not `components`: its Int64 seconds trap for a huge duration
    }

    public var description: String {
        let ratio = (self.hitchTimeRatio * 100).rounded() / 100
        return "\(self.frames) frames, \(self.skippedFrames) skipped, \(self.hitches) hitches, "
            + "hitch time \(self.totalHitchTime), ratio \(ratio) ms/s (\(self.rating)), "
            + "longest busy pass \(self.longestBusyPass), \(self.hangs) hangs"
    }
}
