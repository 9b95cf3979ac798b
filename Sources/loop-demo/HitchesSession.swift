import LoopKit

/// The session behind `loop-demo hitches`: a 120 Hz display link whose frame work is light except for scripted heavy
/// frames, measured by a `HitchMonitor`, with a report per second.
///
/// A frame's work lasts until a fixed time after the frame's timestamp (1 ms, or a heavy frame's length), so the
/// hitches are the script's and not the machine's wake-up latency: on a `ManualLoopClock` (the work advances the
/// clock) the numbers are exact, and in real time they are the same give or take a loaded machine's delays. The
/// session ends on a second boundary, where the display link is invalidated, so every frame lies in a second.
///
/// Loop-confined: create and run it on the loop's thread.
final class HitchesSession {
    /// A frame whose work is `work` long, the first frame at or after `offset` in each cycle.
    struct HeavyFrame: Equatable, Sendable {
        let offset: Duration
        let work: Duration
    }

    struct Configuration: Equatable {
        var duration: Duration = .seconds(3)
        /// The display's rate; the link runs at it.
        var rate = 120
        /// The work of an ordinary frame.
        var lightWork: Duration = .milliseconds(1)
        /// The heavy frames of one cycle, repeated every `cycle`.
        var heavyFrames: [HeavyFrame] = HitchesSession.standardHeavyFrames
        var cycle: Duration = .seconds(3)
    }

    /// With a 8.33 ms budget: a small hitch in second 1 (2.7 ms/s, good), two in second 2 (6.3 ms/s, warning), a
    /// big one in second 3 (13.7 ms/s, critical); about 7.6 ms/s overall (warning), with room for a busy machine.
    static let standardHeavyFrames = [
        HeavyFrame(offset: .milliseconds(500), work: .milliseconds(11)),
        HeavyFrame(offset: .milliseconds(1300), work: .microseconds(11_500)),
        HeavyFrame(offset: .milliseconds(1700), work: .microseconds(11_500)),
        HeavyFrame(offset: .milliseconds(2500), work: .milliseconds(22)),
    ]

    /// What the monitor measured in one second of the session.
    struct Second: Equatable {
        /// 0 for the first second.
        let index: Int
        /// Where the second ends, from the start: `index + 1` seconds, or less for a last, partial second.
        let end: Duration
        /// The measurements of this second alone (a difference of the monitor's reports).
        let report: HitchReport
    }

    let loop: Loop
    let configuration: Configuration
    /// Does a frame's work until the given instant: spins on the loop's clock by default; a test on a manual clock
    /// advances it instead.
    private let workUntil: (LoopInstant) -> Void

    /// Called when a second is complete.
    var onSecond: ((Second) -> Void)?
    /// The seconds so far.
    private(set) var seconds: [Second] = []
    /// The heavy frames that ran: when (since the start) and how long their work was.
    private(set) var heavyFramesRun: [(time: Duration, work: Duration)] = []
    private var isStopping = false

    init(loop: Loop, configuration: Configuration = Configuration(), workUntil: ((LoopInstant) -> Void)? = nil) {
        self.loop = loop
        self.configuration = configuration
        self.workUntil = workUntil ?? { [loop] end in
            while loop.now < end {}  // busy, as real frame work is: the loop cannot do anything else meanwhile
        }
    }

    /// Runs the session; returns everything the monitor measured.
    @available(*, noasync)
    func run() -> HitchReport {
        let loop = self.loop
        let start = loop.now
        let deadline = start + self.configuration.duration
        var pending = self.scheduledHeavyFrames()
        let monitor = HitchMonitor(loop: loop)
        var previous = HitchReport.empty

        let display = LoopDisplay(maximumRate: self.configuration.rate)
        var link: LoopDisplayLink?
        // Added before the link: at a second that falls on a frame, the second closes before that frame runs.
        let isolated = loop.assumeIsolated()
        let secondTimer = LoopTimer(interval: .seconds(1), repeats: true, on: isolated) { [unowned self] _ in
            previous = self.closeSecond(monitor.report, previous: previous)
            if start + .seconds(self.seconds.count) >= deadline {
                link?.invalidate()  // no frame of a next second, even one due in this same pass
                loop.stop()
            }
        }
        link = LoopDisplayLink(display: display, on: isolated) { [unowned self] _, frame in
            let elapsed = frame.timestamp - start
            if let next = pending.first, elapsed >= next.offset {
                pending.removeFirst()
                self.heavyFramesRun.append((elapsed, next.work))
                self.workUntil(frame.timestamp + next.work)
            } else {
                self.workUntil(frame.timestamp + self.configuration.lightWork)
            }
        }
        monitor.attach(to: link!)
        loop.add(secondTimer, forMode: .common)
        loop.add(link!, forMode: .common)

        while !self.isStopping, loop.now < deadline, loop.run(mode: .default, before: deadline) == .stopped,
              link?.isValid == true {}
        secondTimer.invalidate()
        link?.invalidate()
        let total = monitor.report
        if total.frames > previous.frames {
            // The last, partial second: it ends where the session did (Ctrl-C), not at the next whole second.
            _ = self.closeSecond(total, previous: previous, endingAt: loop.now - start)
        }
        monitor.invalidate()
        return total
    }

    /// Ends the session early (Ctrl-C). Loop thread.
    func stop() {
        self.isStopping = true
        self.loop.stop()
    }

    /// The heavy frames of every cycle that starts within the duration, in order.
    private func scheduledHeavyFrames() -> [HeavyFrame] {
        var frames: [HeavyFrame] = []
        var cycleStart = Duration.zero
        while cycleStart < self.configuration.duration {
            for frame in self.configuration.heavyFrames where cycleStart + frame.offset < self.configuration.duration {
                frames.append(HeavyFrame(offset: cycleStart + frame.offset, work: frame.work))
            }
            cycleStart += self.configuration.cycle
        }
        return frames
    }

    private func closeSecond(_ report: HitchReport, previous: HitchReport, endingAt end: Duration? = nil)
        -> HitchReport {
        let second = report.since(previous)
        let index = self.seconds.count
        let wholeSecondEnd = min(.seconds(index + 1), self.configuration.duration)
        let closed = Second(index: index, end: min(end ?? wholeSecondEnd, wholeSecondEnd), report: second)
        self.seconds.append(closed)
        self.onSecond?(closed)
        return report
    }
}

@available(*, unavailable, message: "HitchesSession is confined to its loop's thread")
extension HitchesSession: Sendable {}
