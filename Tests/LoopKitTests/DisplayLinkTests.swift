import Dispatch
import Testing
@testable import LoopKit

@Suite("Display links")
struct DisplayLinkTests {
    @Test func aLinkGetsTheLargestDivisorOfTheMaximumRateThatFits() {
        let display = LoopDisplay(maximumRate: 120)
        func rate(_ preferred: Double) -> Double {
            LoopDisplayLink(display: display, preferredRate: preferred) { _, _ in }.rate
        }
        #expect(rate(0) == 120)
        #expect(rate(120) == 120)
        #expect(rate(200) == 120)
        #expect(rate(60) == 60)
        #expect(rate(59) == 40)
        #expect(rate(40) == 40)
        #expect(rate(30) == 30)
        #expect(rate(25) == 24)
        #expect(rate(24) == 24)
        #expect(rate(20) == 20)
        #expect(LoopDisplayLink(display: .sixtyHertz, preferredRate: 120) { _, _ in }.rate == 60)
        #expect(LoopDisplayLink(display: .sixtyHertz, preferredRate: 45) { _, _ in }.rate == 30)
        #expect(LoopDisplayLink(display: LoopDisplay(maximumRate: 144), preferredRate: 100) { _, _ in }.rate == 72)
    }

    @Test func aRangeChoosesTheLargestFittingRateNotAbovePreferred() {
        let display = LoopDisplay(maximumRate: 120)
        let link = LoopDisplayLink(display: display, minimum: 30, maximum: 60, preferred: 50) { _, _ in }
        #expect(link.rate == 40)
        #expect(link.refreshesPerFrame == 3)
        // Nothing inside 50...55 on a 120 Hz display: the nearest supported rate (60) is used.
        #expect(LoopDisplayLink(display: display, minimum: 50, maximum: 55, preferred: 52) { _, _ in }.rate == 60)
    }

    @Test func aLinkAddedFromAnotherThreadWithNoReferenceKeptTicks() throws {
        let thread = try LoopThread(name: "unowned-link")
        let ticks = Recorder<Int64>()
        // The caller keeps no reference: the loop must, from the add on.
        thread.loop.add(LoopDisplayLink(display: .default) { link, frame in
            ticks.append(frame.index)
            if ticks.count == 3 {
                link.invalidate()
            }
        }, forMode: .default)
        #expect(waitUntil { ticks.count == 3 })
        thread.shutdownAndJoin()
    }

    @Test func theFrameBudgetIsOneFrameAtTheLinksRate() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<DisplayFrame>()
        let fast = LoopDisplayLink(display: .default) { link, frame in
            frames.append(frame)
            link.invalidate()
        }
        let slow = LoopDisplayLink(display: .sixtyHertz) { link, frame in
            frames.append(frame)
            link.invalidate()
        }
        loop.add(fast, forMode: .default)
        loop.add(slow, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let durations = frames.elements.map(\.duration)
        #expect(durations.contains(.nanoseconds(8_333_333)) || durations.contains(.nanoseconds(8_333_334)))
        #expect(durations.contains(.nanoseconds(16_666_666)) || durations.contains(.nanoseconds(16_666_667)))
        #expect(LoopDisplay.default.refreshPeriod == Duration(attoseconds: 8_333_333_333_333_333))
    }

    @Test func callbacksLandOnTheGridWithTargetsOnTheNextGridPoint() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay(maximumRate: 120)
        let seen = Recorder<(DisplayFrame, LoopInstant)>()
        let link = LoopDisplayLink(display: display) { link, frame in
            seen.append((frame, clock.now))
            if seen.count == 10 { link.invalidate() }
        }
        loop.add(link, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let first = display.frameIndex(atOrBefore: clock.now, refreshesPerFrame: 1) - 9
        for (offset, (frame, firedAt)) in seen.elements.enumerated() {
            let index = first + Int64(offset)
            #expect(frame.index == index)
            #expect(frame.timestamp == display.instant(ofFrame: index, refreshesPerFrame: 1))
            #expect(frame.targetTimestamp == display.instant(ofFrame: index + 1, refreshesPerFrame: 1))
            #expect(firedAt == frame.timestamp)
            #expect(frame.skippedFrames == 0)
        }
    }

    @Test func theFirstCallbackIsAtTheFirstGridPointAfterTheLinkIsAdded() throws {
        let clock = ManualLoopClock(start: LoopInstant(nanoseconds: 1_000_000_000 + 3_000_000))
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<DisplayFrame>()
        loop.add(LoopDisplayLink(display: .default) { link, frame in
            seen.append(frame)
            link.invalidate()
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        // 1 s is frame 120 of a 120 Hz grid from 0; 1.003 s is inside it, so the first callback is frame 121.
        #expect(seen.elements.map(\.index) == [121])
        #expect(seen.elements[0].timestamp == LoopInstant(nanoseconds: 1_008_333_333))
    }

    @Test func anOverrunSkipsAndCountsTheMissedFramesAndTheNextCallbackIsOnTheGrid() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let seen = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: display) { link, frame in
            seen.append(frame)
            if seen.count == 3 { clock.advance(by: .milliseconds(20)) }  // a slow frame
            if seen.count == 6 { link.invalidate() }
        }
        loop.add(link, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let frames = seen.elements
        let indices = frames.map(\.index)
        let base = indices[0]
        // Frame base+2 ran 20 ms (2.4 frames): base+3 and base+4 are skipped, the next callback is base+5.
        #expect(indices == [base, base + 1, base + 2, base + 5, base + 6, base + 7])
        #expect(frames.map(\.skippedFrames) == [0, 0, 0, 2, 0, 0])
        for frame in frames {
            #expect(frame.timestamp == display.instant(ofFrame: frame.index, refreshesPerFrame: 1))
        }
    }

    @Test func aCallbackEndingOnTheNextGridPointSkipsItAndALateFireReportsTheFrameItLandsIn() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let frameLength = display.frameDuration(refreshesPerFrame: 1)
        let seen = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: display) { link, frame in
            seen.append(frame)
            if seen.count == 2 {
                clock.advance(to: frame.targetTimestamp)  // ends on the target: that grid point is already gone
            }
            if seen.count == 5 { link.invalidate() }
        }
        // After the third frame the loop wakes for the fourth, and the clock jumps two frames on before the timers'
        // phase: the link fires late, for the frame the clock is in.
        let late = LoopObserver(activities: .afterWaiting) { _, _ in
            if seen.count == 3 { clock.advance(by: frameLength * 2 + .nanoseconds(1)) }
        }
        loop.add(late, forMode: .default)
        loop.add(link, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        late.invalidate()
        let frames = seen.elements
        let base = frames[0].index
        #expect(frames.map(\.index) == [base, base + 1, base + 3, base + 6, base + 7])
        #expect(frames.map(\.skippedFrames) == [0, 0, 1, 2, 0])
        for frame in frames {
            #expect(frame.timestamp == display.instant(ofFrame: frame.index, refreshesPerFrame: 1))
            #expect(frame.targetTimestamp == display.instant(ofFrame: frame.index + 1, refreshesPerFrame: 1))
        }
    }

    @Test func aPausedLinkResumesOnTheGridWithoutCountingPausedFramesAsSkipped() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let seen = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: display) { link, frame in
            seen.append(frame)
            if seen.count == 2 { link.isPaused = true }
            if seen.count == 4 { link.invalidate() }
        }
        loop.add(link, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        #expect(seen.count == 2)
        clock.advance(by: .microseconds(1500))  // resume between grid points
        let resumedAt = clock.now
        link.isPaused = false
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        let frames = seen.elements
        #expect(frames.count == 4)
        let expected = display.nextFrame(after: resumedAt, refreshesPerFrame: 1)
        #expect(frames[2].index == expected.index)
        #expect(frames[2].timestamp == expected.instant)
        #expect(frames[2].skippedFrames == 0)
        #expect(frames[3].index == expected.index + 1)
    }

    /// The frames paused are not skipped, but the frames a late loop misses after the resume are: the first frame after
    /// a resume (or an add) counts from the first grid point it was due on.
    @Test func framesMissedRightAfterAResumeAreCountedAsSkipped() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let seen = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: display) { link, frame in
            seen.append(frame)
            if seen.count == 2 { link.isPaused = true }
        }
        loop.add(link, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        #expect(seen.count == 2)
        let grid = display.nextFrame(after: clock.now + .milliseconds(100), refreshesPerFrame: 1)
        clock.advance(to: grid.instant + .milliseconds(1))
        link.isPaused = false  // due next at grid + 1 frame
        loop.add(LoopTimer(interval: .zero) { _ in clock.advance(by: .milliseconds(30)) }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(40))
        let resumed = try #require(seen.elements.dropFirst(2).first)
        // Grid + 1 and + 2 frames passed during the 30 ms; grid + 3 frames (25 ms) is the one reported.
        #expect(resumed.index == grid.index + 3)
        #expect(resumed.skippedFrames == 2)
        link.invalidate()
    }

    /// The same for a link's first frame: frames due after it was added that a busy loop missed are skipped.
    @Test func framesMissedRightAfterAnAddAreCountedAsSkipped() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.sixtyHertz
        let grid = display.nextFrame(after: clock.now, refreshesPerFrame: 1)
        clock.advance(to: grid.instant + .milliseconds(1))
        let seen = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: display) { _, frame in seen.append(frame) }
        loop.add(link, forMode: .default)  // due first at grid + 1 frame
        loop.add(LoopTimer(interval: .zero) { _ in clock.advance(by: .milliseconds(40)) }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(45))
        let first = try #require(seen.elements.first)
        // Grid + 1 frame (16.7 ms) passed during the 40 ms; grid + 2 frames (33.3 ms) is the one reported.
        #expect(first.index == grid.index + 2)
        #expect(first.skippedFrames == 1)
        link.invalidate()
    }

    @Test func linksOfOneDisplayShareTheirInstants() throws {
        let clock = ManualLoopClock(start: LoopInstant(nanoseconds: 1_234_567_891))
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fast = Recorder<LoopInstant>()
        let slow = Recorder<LoopInstant>()
        let other = Recorder<LoopInstant>()
        loop.add(LoopDisplayLink(display: .default, preferredRate: 120) { _, frame in fast.append(frame.timestamp) },
                 forMode: .default)
        loop.add(LoopDisplayLink(display: .default, preferredRate: 60) { _, frame in slow.append(frame.timestamp) },
                 forMode: .default)
        loop.add(LoopDisplayLink(display: .default, preferredRate: 120) { _, frame in other.append(frame.timestamp) },
                 forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(100))
        #expect(fast.count >= 11)
        #expect(fast.elements == other.elements)
        #expect(Set(slow.elements).isSubset(of: Set(fast.elements)))
        #expect(slow.count >= 5)
    }

    @Test func aDefaultModeLinkIsSilentDuringTrackingAndACommonModeLinkTicks() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let defaultFrames = Recorder<Int64>()
        let commonFrames = Recorder<Int64>()
        loop.add(LoopDisplayLink(display: .sixtyHertz) { _, frame in defaultFrames.append(frame.index) },
                 forMode: .default)
        loop.add(LoopDisplayLink(display: .sixtyHertz) { _, frame in commonFrames.append(frame.index) },
                 forMode: .common)
        loop.run(mode: .tracking, before: clock.now + .milliseconds(100))
        #expect(defaultFrames.count == 0)
        #expect(commonFrames.count == 6)
        let backInDefault = clock.now
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        // Back in default: a frame at once (the grid point that just passed), then every 16.7 ms up to the deadline.
        #expect(defaultFrames.count == 4)
        let first = try #require(defaultFrames.elements.first)
        #expect(LoopDisplay.sixtyHertz.instant(ofFrame: first, refreshesPerFrame: 1) == backInDefault)
    }

    @Test func theThousandthCallbackIsStillExactlyOnTheGrid() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        var first: Int64?
        var last: DisplayFrame?
        var count = 0
        loop.add(LoopDisplayLink(display: display, on: loop.assumeIsolated()) { link, frame in
            first = first ?? frame.index
            last = frame
            count += 1
            if count == 1001 { link.invalidate() }
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let frame = try #require(last)
        #expect(frame.index == first! + 1000)
        #expect(frame.timestamp == display.instant(ofFrame: first! + 1000, refreshesPerFrame: 1))
        // 1000 frames at 120 Hz from frame `first` is exactly 1000/120 s later, to the nanosecond (no drift).
        let expected = display.instant(ofFrame: first!, refreshesPerFrame: 1) + .nanoseconds(8_333_333_333)
        #expect(frame.timestamp - expected <= .nanoseconds(1))
        #expect(expected - frame.timestamp <= .nanoseconds(1))
    }

    @Test func aLinkMayInvalidateItselfFromItsCallback() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let count = Recorder<Int>()
        let link = LoopDisplayLink { link, _ in
            count.append(1)
            link.invalidate()
        }
        loop.add(link, forMode: .common)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(count.count == 1)
        #expect(!link.isValid)
        #expect(!loop.contains(link, inMode: .default))
    }

    /// A manual clock run to the end of time: the link's frame there is the last one the grid can name, and the run
    /// returns (counting the frames clamped to `.distantFuture` would not end).
    @Test(.timeLimit(.minutes(1)))
    func aLinkFiresOnceMoreAndStopsWhenAManualClockReachesTheEndOfTime() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<DisplayFrame>()
        loop.add(LoopDisplayLink { link, frame in
            frames.append(frame)
            link.invalidate()
        }, forMode: .default)
        clock.advance(by: .seconds(Int64.max))
        // The clock is at the deadline too: the pass ends the run `.timedOut` (before `.finished`, DESIGN's order).
        #expect(loop.run(mode: .default, before: .distantFuture) == .timedOut)
        #expect(frames.count == 1)
        #expect(frames.elements.first.map { $0.timestamp <= $0.targetTimestamp } == true)
    }

    /// Two threads setting opposite values at once: whichever change comes last wins, for the flag and the timer
    /// alike, so a link left unpaused ticks.
    @Test func pausingAndResumingFromTwoThreadsAtOnceLeavesALinkThatTicksWhenUnpaused() throws {
        let thread = try LoopThread(name: "link-pause")
        defer { thread.shutdownAndJoin() }
        let frames = Recorder<Int>()
        let link = LoopDisplayLink { _, _ in frames.append(1) }
        thread.loop.add(link, forMode: .default)
        for _ in 0..<200 {
            let pauser = startThread { link.isPaused = true }
            let resumer = startThread { link.isPaused = false }
            pauser.join()
            resumer.join()
        }
        link.isPaused = false
        let before = frames.count
        #expect(waitUntil { frames.count > before + 2 }, "an unpaused link ticks")
        link.invalidate()
    }

    /// A loop's clock is user code: one whose `now` pauses the link (here, once) is read outside the link's pause
    /// lock, so resuming does not deadlock on it.
    @Test func resumingALinkWhoseLoopsClockPausesItDoesNotDeadlock() throws {
        let clock = PausingClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let link = LoopDisplayLink { _, _ in }
        loop.add(link, forMode: .default)
        link.isPaused = true
        clock.link.withLock { $0 = link }
        let resumed = DispatchSemaphore(value: 0)
        let resumer = startThread {
            link.isPaused = false
            resumed.signal()
        }
        let didResume = resumed.wait(timeout: .now() + 20) == .success
        #expect(didResume, "resuming deadlocked on the clock")
        if didResume {
            resumer.join()  // not a deadlocked one: the test reports the failure instead of hanging
        }
        link.invalidate()
    }
}

/// A manual clock whose first read after `link` is set pauses that link.
private final class PausingClock: LoopClock {
    let base = ManualLoopClock()
    let link = LoopLock<LoopDisplayLink?>(nil)

    var now: LoopInstant {
        if let link = self.link.withLock({ link -> LoopDisplayLink? in
            defer { link = nil }
            return link
        }) {
            link.isPaused = true
        }
        return self.base.now
    }

    var readsSystemMonotonicClock: Bool { false }
    var virtualClock: (any VirtualLoopClock)? { nil }
}

@Suite("Hitch monitor")
struct HitchMonitorTests {
    @Test func scriptedSlowFramesGiveExactHitchTimeAndRatio() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        var count = 0
        var slow: [DisplayFrame] = []
        var first: DisplayFrame?
        var last: DisplayFrame?
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, frame in
            count += 1
            first = first ?? frame
            last = frame
            if count == 10 || count == 20 {
                clock.advance(by: .milliseconds(20))  // a heavy frame: 20 ms of work at 120 Hz
                slow.append(frame)
            } else {
                clock.advance(by: .milliseconds(1))
            }
            if count == 60 { link.invalidate() }
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .common)
        loop.run(mode: .default, before: .distantFuture)

        let report = monitor.report
        #expect(report.frames == 60)
        #expect(report.skippedFrames == 4)
        #expect(report.hitches == 2)
        let expectedHitch = slow.map { ($0.timestamp + .milliseconds(20)) - $0.targetTimestamp }
            .reduce(Duration.zero, +)
        #expect(report.totalHitchTime == expectedHitch)
        #expect(report.totalHitchTime > .milliseconds(23))
        #expect(report.totalHitchTime < .milliseconds(24))
        #expect(report.longestBusyPass == .milliseconds(20))
        #expect(report.hangs == 0)
        // Per second of ticking: from the first frame to the last one's target, the skipped frames included.
        // (Grid instants are whole nanoseconds: a skipped frame's start, worked back from the next frame, may be one
        // off.)
        let span = try #require(last).targetTimestamp - (try #require(first)).timestamp
        #expect(report.frameSpan >= span - .nanoseconds(4) && report.frameSpan <= span)
        #expect(span > .milliseconds(533) && span < .milliseconds(534), "64 frames at 120 Hz")
        let seconds = HitchReport.seconds(report.frameSpan)
        #expect(abs(report.hitchTimeRatio - HitchReport.seconds(expectedHitch) * 1000 / seconds) < 1e-9)
        #expect(report.rating == .critical)
    }

    /// DESIGN §4: a hitch is a frame that finishes after its target, whatever kept the loop from it. Here no callback
    /// of the link is slow: a timer fires between two frames and keeps the loop busy for 30 ms, so the frames due
    /// meanwhile are skipped, and the first of them is late from its target to the end of that work.
    @Test func workBetweenFramesThatDelaysThemIsAHitch() throws {
        let (work, frames, report) = try Self.workBetweenFrames { loop, _, start in
            loop.run(mode: .default, before: start + .milliseconds(150))
        }
        let delayed = try #require(frames.first { $0.timestamp > work.from })
        #expect(delayed.skippedFrames == 2, "30 ms at 120 Hz, from 2 ms after a frame")
        let firstSkippedTarget = Self.firstSkippedTarget(of: delayed)
        #expect(firstSkippedTarget > work.from && firstSkippedTarget < work.to)
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == work.to - firstSkippedTarget)
        #expect(report.skippedFrames == 2)
        // The skipped frames were ticking time: the span runs from the first frame to the last one's target.
        let span = frames.last!.targetTimestamp - frames.first!.timestamp
        #expect(report.frameSpan >= span - .nanoseconds(2) && report.frameSpan <= span)
        #expect(report.rating == .critical)
    }

    /// The scenario of the tests above and below: a 120 Hz link in `default` on a manual clock, watched by a monitor;
    /// a timer 52 ms after the start keeps the loop busy for 30 ms; `drive` runs the loop (on the clock it is given)
    /// from `start` for 150 ms.
    ///
    /// - Returns: When the timer's work began and ended, the link's frames, and the monitor's report.
    private static func workBetweenFrames(
        drive: (Loop, ManualLoopClock, LoopInstant) -> Void
    ) throws -> (work: (from: LoopInstant, to: LoopInstant), frames: [DisplayFrame], report: HitchReport) {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        let frames = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: .default) { _, frame in frames.append(frame) }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        let start = clock.now
        let busy = Recorder<(from: LoopInstant, to: LoopInstant)>()
        loop.add(LoopTimer(interval: .milliseconds(52)) { _ in
            let from = clock.now
            clock.advance(by: .milliseconds(30))  // an input handler's work, say
            busy.append((from, clock.now))
        }, forMode: .default)
        drive(loop, clock, start)
        return (try #require(busy.elements.first), frames.elements, monitor.report)
    }

    /// The target of the first frame `frame` skipped, on `display`'s grid at its maximum rate.
    private static func firstSkippedTarget(of frame: DisplayFrame, on display: LoopDisplay = .default) -> LoopInstant {
        display.instant(ofFrame: frame.index - Int64(frame.skippedFrames) + 1, refreshesPerFrame: 1)
    }

    /// The same when the loop is driven a pass at a time (as a host loop's dispatches drive it): runs of the link's
    /// mode one after another are one stretch of ticking.
    @Test func workBetweenFramesIsAHitchWhenTheLoopRunsAPassAtATime() throws {
        let (work, frames, report) = try Self.workBetweenFrames { loop, clock, start in
            let end = start + .milliseconds(150)
            while clock.now < end {
                loop.run(mode: .default, before: min(clock.now + .milliseconds(1), end))
            }
        }
        let delayed = try #require(frames.first { $0.timestamp > work.from })
        #expect(delayed.skippedFrames == 2)
        #expect(report.hitches == 1)
        let firstSkippedTarget = LoopDisplay.default.instant(ofFrame: delayed.index - 1, refreshesPerFrame: 1)
        #expect(report.totalHitchTime == work.to - firstSkippedTarget)
        let span = frames.last!.targetTimestamp - frames.first!.timestamp
        #expect(report.frameSpan >= span - .nanoseconds(2) && report.frameSpan <= span)
    }

    /// A timer whose wake-up is shared with a frame (its tolerance lets the loop wake once, on the frame) runs first,
    /// and its work keeps the frame waiting: the loop woke on time, so the frames skipped are a hitch.
    @Test func workOnAWakeUpSharedWithAFrameIsAHitch() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let monitor = HitchMonitor(loop: loop)
        var frames: [DisplayFrame] = []
        let link = LoopDisplayLink(display: display, on: loop.assumeIsolated()) { _, frame in frames.append(frame) }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        let frame = display.nextFrame(after: clock.now + .milliseconds(50), refreshesPerFrame: 1)
        var busyUntil: LoopInstant?
        loop.add(LoopTimer(fireAt: frame.instant - .milliseconds(1), tolerance: .milliseconds(5),
                           on: loop.assumeIsolated()) { _ in
            clock.advance(by: .milliseconds(30))
            busyUntil = clock.now
        }, forMode: .default)
        loop.run(mode: .default, before: frame.instant + .milliseconds(100))

        let until = try #require(busyUntil)
        #expect(until == frame.instant + .milliseconds(30), "woken once, on the frame")
        let delayed = try #require(frames.first { $0.timestamp > frame.instant - .milliseconds(1) })
        #expect(delayed.index == frame.index + 3)
        #expect(delayed.skippedFrames == 3, "the frame the wake-up was for, and the two after it")
        let report = monitor.report
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == until - display.instant(ofFrame: frame.index + 1, refreshesPerFrame: 1))
    }

    /// How a scroll begins: a mouse-down handler works, then runs `tracking` nested until the drag ends. A link in the
    /// common modes ticks on in it, and the frames the handler's work kept waiting are a hitch.
    @Test func workBeforeANestedTrackingRunIsAHitchOfACommonLink() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        var frames: [DisplayFrame] = []
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { _, frame in frames.append(frame) }
        monitor.attach(to: link)
        loop.add(link, forMode: .common)
        let start = clock.now
        var workEnd: LoopInstant?
        loop.add(LoopTimer(interval: .milliseconds(52), on: loop.assumeIsolated()) { _ in
            clock.advance(by: .milliseconds(30))
            workEnd = clock.now
            loop.run(mode: .tracking, before: clock.now + .milliseconds(20))  // the drag
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(150))

        let end = try #require(workEnd)
        let delayed = try #require(frames.first { $0.timestamp > start + .milliseconds(52) })
        #expect(delayed.skippedFrames == 2)
        let firstSkippedTarget = Self.firstSkippedTarget(of: delayed)
        let report = monitor.report
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == end - firstSkippedTarget)
    }

    /// The work of a default-mode handler before it runs `tracking` nested is default's: a link only in `tracking`
    /// was not ticking then, and the frames it skipped are no hitch of its.
    @Test func workInAModeTheLinkIsNotInIsNoHitchOfIts() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        let link = LoopDisplayLink(display: .default) { _, _ in }
        monitor.attach(to: link)
        loop.add(link, forMode: .tracking)
        let start = clock.now
        loop.add(LoopTimer(interval: .milliseconds(52), repeats: true, on: loop.assumeIsolated()) { _ in
            clock.advance(by: .milliseconds(30))
            loop.run(mode: .tracking, before: clock.now + .milliseconds(20))
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(150))
        #expect(monitor.report.frames > 0)
        #expect(monitor.report.hitches == 0)
    }

    /// Frames skipped by an overrun are the overrun's hitch: a short piece of work right after, on the frame the link
    /// is next due, does not charge them again.
    @Test func framesAnOverrunSkippedAreNotChargedAgainToWorkAfterIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let monitor = HitchMonitor(loop: loop)
        let heavy = display.nextFrame(after: clock.now + .milliseconds(50), refreshesPerFrame: 1)
        let link = LoopDisplayLink(display: display) { _, frame in
            if frame.index == heavy.index { clock.advance(by: .milliseconds(12)) }  // overruns the next frame
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        // Just before the frame the link is next due (two after the heavy one), 0.5 ms of other work.
        let next = display.instant(ofFrame: heavy.index + 2, refreshesPerFrame: 1)
        loop.add(LoopTimer(fireAt: next - .microseconds(200)) { _ in clock.advance(by: .microseconds(500)) },
                 forMode: .default)
        loop.run(mode: .default, before: heavy.instant + .milliseconds(100))
        let report = monitor.report
        #expect(report.skippedFrames == 1)
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == heavy.instant + .milliseconds(12)
            - display.instant(ofFrame: heavy.index + 1, refreshesPerFrame: 1))
    }

    /// A hang handler may run the loop nested (an alert): the link's first frame then comes in that run, and counts in
    /// nothing, but the frames the hang kept waiting are still its hitch.
    @Test func aHangThatDelaysFramesIsAHitchWhenItsHandlerRunsTheLoop() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        monitor.onHang { _ in loop.run(mode: .default, before: loop.now + .milliseconds(50)) }
        let link = LoopDisplayLink(display: .default) { _, _ in }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        let start = clock.now
        loop.add(LoopTimer(interval: .milliseconds(52)) { _ in clock.advance(by: .milliseconds(300)) },
                 forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(500))
        let report = monitor.report
        #expect(report.hangs == 1)
        #expect(report.hitches == 1)
        let firstSkippedTarget = LoopDisplay.default.instant(
            ofFrame: LoopDisplay.default.nextFrame(after: start + .milliseconds(52), refreshesPerFrame: 1).index + 1,
            refreshesPerFrame: 1)
        #expect(report.totalHitchTime == start + .milliseconds(352) - firstSkippedTarget)
    }

    /// A monitor attached to a link that has ticked for a while judges the next skipped frames as any others.
    @Test func aMonitorAttachedToATickingLinkSeesItsHitches() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let link = LoopDisplayLink(display: .default) { _, _ in }
        loop.add(link, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let start = clock.now
        loop.run(mode: .default, before: start + .milliseconds(100))
        let monitor = HitchMonitor(loop: loop)
        monitor.attach(to: link)
        loop.add(LoopTimer(interval: .milliseconds(52)) { _ in clock.advance(by: .milliseconds(30)) },
                 forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(150))
        #expect(monitor.report.hitches == 1)
    }

    /// A handler that adds a link and then works: the frames due after the add that the work kept waiting are a hitch
    /// (the link's first frame counts them from the slot it was armed for).
    @Test func workRightAfterALinkIsAddedThatDelaysItsFirstFramesIsAHitch() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        let link = LoopDisplayLink(display: .default) { _, _ in }
        monitor.attach(to: link)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let start = clock.now
        var added: LoopInstant?
        loop.add(LoopTimer(interval: .milliseconds(52), on: loop.assumeIsolated()) { _ in
            loop.add(link, forMode: .default)
            added = clock.now
            clock.advance(by: .milliseconds(50))  // laying out the new view
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(150))
        let addedAt = try #require(added)
        let firstSlot = LoopDisplay.default.nextFrame(after: addedAt, refreshesPerFrame: 1)
        let report = monitor.report
        #expect(report.skippedFrames >= 5)
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == addedAt + .milliseconds(50)
            - LoopDisplay.default.instant(ofFrame: firstSlot.index + 1, refreshesPerFrame: 1))
    }

    /// Two links of one display at 120 and 60 Hz, due together, and a timer that shares their wake-up and works first:
    /// the 60 Hz frame is on time, but the 120 Hz frames it kept waiting are a hitch.
    @Test func aLinkOnTimeDoesNotHideAnotherLinksSkippedFrames() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let monitor = HitchMonitor(loop: loop)
        let slow = LoopDisplayLink(display: display, preferredRate: 60) { _, _ in }
        let fast = LoopDisplayLink(display: display, preferredRate: 120) { _, _ in }
        monitor.attach(to: slow)
        monitor.attach(to: fast)
        loop.add(slow, forMode: .default)
        loop.add(fast, forMode: .default)
        // A grid point both links fire on, well after the start; the timer is due just before it and may wait for it.
        let both = display.nextFrame(after: clock.now + .milliseconds(50), refreshesPerFrame: 2)
        let instant = display.instant(ofFrame: both.index * 2, refreshesPerFrame: 1)
        var workEnd: LoopInstant?
        loop.add(LoopTimer(fireAt: instant - .microseconds(100), tolerance: .milliseconds(1),
                           on: loop.assumeIsolated()) { _ in
            clock.advance(by: .milliseconds(15))
            workEnd = clock.now
        }, forMode: .default)
        loop.run(mode: .default, before: instant + .milliseconds(60))
        let end = try #require(workEnd)
        let report = monitor.report
        #expect(report.hitches == 1)
        // The 120 Hz frame due at the shared instant was kept waiting past its target.
        #expect(report.totalHitchTime == end - display.instant(ofFrame: both.index * 2 + 1, refreshesPerFrame: 1))
    }

    /// A default-mode handler that waits a moment in a private mode (which the monitor does not watch) and then works:
    /// the work is default's, and the frames it kept waiting are the default link's hitch.
    @Test func workAfterARunOfAnUnwatchedModeIsChargedToTheModeItWentOnIn() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let privateMode = LoopMode("private-wait")
        let monitor = HitchMonitor(loop: loop)  // default and tracking
        let link = LoopDisplayLink(display: .default) { _, _ in }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: privateMode)
        let start = clock.now
        var work: (from: LoopInstant, to: LoopInstant)?
        loop.add(LoopTimer(interval: .milliseconds(52), on: loop.assumeIsolated()) { _ in
            loop.run(mode: privateMode, before: clock.now + .milliseconds(5))
            let from = clock.now
            clock.advance(by: .milliseconds(40))
            work = (from, clock.now)
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(150))
        let (from, to) = try #require(work)
        let firstKept = LoopDisplay.default.nextFrame(after: from, refreshesPerFrame: 1)
        let report = monitor.report
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == to - LoopDisplay.default.instant(ofFrame: firstKept.index + 1,
                                                                           refreshesPerFrame: 1))
    }

    /// A link taken out of its mode and put back later was not ticking in between: the work that followed its removal
    /// is no hitch of its, though its first frame back says how many grid points passed.
    @Test func workWhileALinkIsOutOfItsModeIsNoHitch() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        var frames: [DisplayFrame] = []
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { _, frame in frames.append(frame) }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        let start = clock.now
        loop.add(LoopTimer(interval: .milliseconds(52), on: loop.assumeIsolated()) { _ in
            loop.remove(link, forMode: .default)
            clock.advance(by: .milliseconds(20))
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(1), on: loop.assumeIsolated()) { _ in
            loop.add(link, forMode: .default)
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(1100))

        let back = try #require(frames.first { $0.timestamp >= start + .seconds(1) })
        #expect(back.skippedFrames > 100)
        #expect(monitor.report.hitches == 0)
    }

    /// A loop driven by a host's dispatches (each a run that only looks, `before: now`) with the host's own wait in
    /// between: work in one dispatch that keeps the frames from running is a hitch all the same.
    @Test func workInAHostsDispatchThatDelaysFramesIsAHitch() throws {
        let (work, frames, report) = try Self.workBetweenFrames { loop, clock, start in
            while clock.now < start + .milliseconds(150) {
                loop.run(mode: .default, before: clock.now)
                clock.advance(by: .milliseconds(1))  // the host's own wait
            }
        }
        let delayed = try #require(frames.first { $0.timestamp > work.from })
        #expect(delayed.skippedFrames >= 2)
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == work.to - Self.firstSkippedTarget(of: delayed))
        // The host's waits between its dispatches are ticking time: the span is all the frames cover.
        let whole = try #require(frames.last).targetTimestamp - (try #require(frames.first)).timestamp
        #expect(report.frameSpan >= whole - .nanoseconds(4) && report.frameSpan <= whole)
    }

    /// Per second of ticking: a drag the loop runs in `tracking`, nested in a callback of `default`, is no ticking
    /// time for a link in `default` alone, and the ratio's span leaves it out (but for the frame that was under way
    /// when it began), whether the drag is one run or a run per event (as AppKit's `nextEvent` loops make); a link in
    /// the common modes ticks through it, and all of it counts.
    @Test(arguments: [(false, false), (false, true), (true, false)])
    func aDragInAModeTheLinkIsNotInIsLeftOutOfTheSpan(linkIsCommon: Bool, runPerEvent: Bool) throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        let frames = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: .default) { _, frame in frames.append(frame) }
        monitor.attach(to: link)
        loop.add(link, forMode: linkIsCommon ? .common : .default)
        let start = clock.now
        let drag = Duration.milliseconds(900)
        loop.add(LoopTimer(interval: .milliseconds(100)) { _ in
            loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .tracking)  // keeps `tracking` alive
            let end = clock.now + drag
            if runPerEvent {
                while clock.now < end {  // 450 runs of 2 ms: far more than a few dozen
                    #expect(loop.run(mode: .tracking, before: clock.now + .milliseconds(2)) == .timedOut)
                }
            } else {
                #expect(loop.run(mode: .tracking, before: end) == .timedOut)
            }
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(1100))

        let whole = try #require(frames.elements.last).targetTimestamp - (try #require(frames.elements.first)).timestamp
        let report = monitor.report
        #expect(report.hitches == 0)
        if linkIsCommon {
            #expect(report.frameSpan >= whole - .nanoseconds(4) && report.frameSpan <= whole)
        } else {
            let back = try #require(frames.elements.first { $0.timestamp >= start + .milliseconds(1000) })
            #expect(back.skippedFrames >= 100)
            let frame = LoopDisplay.default.frameDuration(refreshesPerFrame: 1)
            #expect(report.frameSpan >= whole - drag - .microseconds(1))  // grid instants are whole nanoseconds
            #expect(report.frameSpan <= whole - drag + frame)
        }
    }

    /// Hang handlers' time counts in nothing: a hang that delays frames is a hitch up to the hang's end, not through
    /// the handler that reports it.
    @Test func aHangsHandlerTimeIsNotChargedToTheFramesItDelays() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        monitor.onHang { _ in clock.advance(by: .milliseconds(100)) }
        var frames: [DisplayFrame] = []
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { _, frame in frames.append(frame) }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        let start = clock.now
        var hangEnd: LoopInstant?
        loop.add(LoopTimer(interval: .milliseconds(52), on: loop.assumeIsolated()) { _ in
            clock.advance(by: .milliseconds(300))
            hangEnd = clock.now
        }, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(500))

        let end = try #require(hangEnd)
        let delayed = try #require(frames.first { $0.timestamp > start + .milliseconds(52) })
        #expect(delayed.timestamp > end, "called back after the hang and its handler")
        let firstSkippedTarget = Self.firstSkippedTarget(of: delayed)
        let report = monitor.report
        #expect(report.hangs == 1)
        #expect(report.hitches == 1)
        #expect(report.totalHitchTime == end - firstSkippedTarget)
    }

    @Test func ratingsFollowApplesThresholds() {
        #expect(HitchRating(hitchTimeRatio: 0) == .good)
        #expect(HitchRating(hitchTimeRatio: 4.99) == .good)
        #expect(HitchRating(hitchTimeRatio: 5) == .warning)
        #expect(HitchRating(hitchTimeRatio: 10) == .warning)
        #expect(HitchRating(hitchTimeRatio: 10.01) == .critical)
    }

    @Test func lightFramesAreNotHitches() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        var count = 0
        let link = LoopDisplayLink(display: .sixtyHertz, on: loop.assumeIsolated()) { link, _ in
            count += 1
            clock.advance(by: .milliseconds(5))
            if count == 30 { link.invalidate() }
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let report = monitor.report
        #expect(report.frames == 30)
        #expect(report.hitches == 0)
        #expect(report.skippedFrames == 0)
        #expect(report.hitchTimeRatio == 0)
        #expect(report.rating == .good)
        #expect(report.longestBusyPass == .milliseconds(5))
    }

    @Test func aBusyPassOverTheThresholdIsReportedAsAHang() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))
        let hangs = Recorder<HangEvent>()
        monitor.onHang { hangs.append($0) }
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            clock.advance(by: .milliseconds(300))
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(500)) { _ in
            clock.advance(by: .milliseconds(100))
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(hangs.count == 1)
        #expect(hangs.elements.first?.duration == .milliseconds(300))
        #expect(hangs.elements.first?.mode == .default)
        #expect(monitor.report.hangs == 1)
        #expect(monitor.report.longestBusyPass == .milliseconds(300))
    }

    /// A run nested in a watched mode, from a callback of a mode the monitor does not watch, returns to that callback
    /// with no busy stretch open: the unwatched run's sleep after it is not counted in the next watched stretch.
    @Test func aWatchedRunNestedInAnUnwatchedModeLeavesNoStretchOpen() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))  // default and tracking
        let modal = LoopMode("modal")
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            loop.run(mode: .default, before: loop.now + .milliseconds(1))
        }, forMode: modal)
        loop.add(LoopTimer(interval: .seconds(2)) { _ in }, forMode: modal)  // the modal run then sleeps ~2 s
        #expect(loop.run(mode: modal, before: .distantFuture) == .finished)
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(50)) == .timedOut)
        #expect(monitor.report.hangs == 0)
        #expect(monitor.report.longestBusyPass < .milliseconds(250))
    }

    /// A run of an unwatched mode nested in a watched run's callback sleeps without the monitor's observers: its
    /// sleep ends the busy stretch (no hang), and the work after it, back in the callback, is a stretch of its own.
    @Test func aSleepOfAnUnwatchedRunNestedInAWatchedCallbackIsNotBusyAndTheWorkAfterItIs() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))  // default and tracking
        let modal = LoopMode("modal")
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: modal)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            clock.advance(by: .milliseconds(5))
            #expect(loop.run(mode: modal, before: loop.now + .seconds(2)) == .timedOut)  // asleep for 2 s
            clock.advance(by: .milliseconds(300))  // then a hang, in the default callback
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(monitor.report.hangs == 1)
        #expect(monitor.report.longestBusyPass == .milliseconds(300))
    }

    /// Two links on one display, both late for the same target in one stretch: one hitch, and its time once.
    @Test func twoLinksLateForOneTargetAreOneHitchCountedOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        var count = 0
        var slow: DisplayFrame?
        let first = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, frame in
            count += 1
            if count == 10 {
                clock.advance(by: .milliseconds(20))  // a heavy frame: 20 ms of work at 120 Hz
                slow = frame
            } else {
                clock.advance(by: .milliseconds(1))
            }
            if count == 30 { link.invalidate() }
        }
        let second = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, _ in
            if count >= 30 { link.invalidate() }
        }
        for link in [second, first] {  // `second` fires first in each pass, for the target `first` then misses
            monitor.attach(to: link)
            loop.add(link, forMode: .common)
        }
        loop.run(mode: .default, before: .distantFuture)
        let heavy = try #require(slow)
        #expect(monitor.report.hitches == 1)
        #expect(monitor.report.totalHitchTime == (heavy.timestamp + .milliseconds(20)) - heavy.targetTimestamp)
    }

    /// A stretch that never sleeps (a source that signals itself to work in slices) holds every frame of it until
    /// its end: each is a hitch, but the hitch time is the time frames were late, never more than the time passed.
    @Test func framesQueuedBehindALongStretchAreNotLateTwiceOver() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .seconds(10))
        var slices = 0
        let worker = LoopSource(on: loop.assumeIsolated()) { source in
            slices += 1
            clock.advance(by: .milliseconds(1))
            if slices < 50 { source.signal() }  // 50 ms of work, one slice per pass
        }
        var frames = 0
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, _ in
            frames += 1
            if frames == 1 { worker.signal() }
            if frames == 12 {  // the work ended long before: the mode empties, and the run returns
                worker.invalidate()
                link.invalidate()
            }
        }
        monitor.attach(to: link)
        loop.add(worker, forMode: .default)
        loop.add(link, forMode: .common)
        loop.run(mode: .default, before: .distantFuture)
        #expect(slices == 50)
        let report = monitor.report
        #expect(report.hitches >= 4, "the frames that came during the 50 ms waited for its end")
        #expect(report.totalHitchTime <= .milliseconds(50), "late at most as long as the stretch")
        #expect(report.totalHitchTime >= .milliseconds(35))
    }

    /// Frames of a run nested in a hang handler count in nothing: not as hitches after the sleep that follows (the
    /// monitor's observer is not re-entered, so no busy stretch of that run ends for them), nor in the frames.
    @Test func framesOfARunNestedInAHangHandlerAreNotChargedAsHitches() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))
        var count = 0
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, _ in
            count += 1
            clock.advance(by: count == 5 ? .milliseconds(300) : .milliseconds(1))  // frame 5: a hang, one hitch
            if count == 40 { link.invalidate() }
        }
        let nestedTicks = Recorder<Int>()
        let nestedFrames = Recorder<Int>()
        let ticks = AtomicCounter()
        loop.add(LoopObserver(activities: .beforeTimers) { _, _ in ticks.increment() }, forMode: .default)
        monitor.onHang { [weak monitor] _ in
            let before = (ticks: ticks.current, frames: monitor?.report.frames ?? 0)
            loop.run(mode: .default, before: loop.now + .milliseconds(100))  // an alert, say; the link ticks in it
            nestedTicks.append(ticks.current - before.ticks)
            nestedFrames.append((monitor?.report.frames ?? 0) - before.frames)
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .common)
        loop.run(mode: .default, before: .distantFuture)
        #expect(monitor.report.hangs == 1)
        #expect(try #require(nestedTicks.elements.first) > 5)
        #expect(nestedFrames.elements == [0])
        #expect(monitor.report.hitches == 1)
    }

    /// The hitch ratio is taken over the time the link ticked: time paused does not dilute it.
    @Test func timePausedIsNotCountedInTheFrameSpan() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        var count = 0
        var frameDuration = Duration.zero
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, frame in
            count += 1
            frameDuration = frame.duration
            clock.advance(by: .milliseconds(1))
            if count == 10 { link.isPaused = true }
            if count == 20 { link.invalidate() }
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(9)) { _ in link.isPaused = false }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let report = monitor.report
        #expect(report.frames == 20)
        #expect(report.skippedFrames == 0)
        // 20 frames of 8.333 ms (each frame a grid point to the next, whole nanoseconds, so give or take a few).
        #expect(report.frameSpan >= frameDuration * 20 - .nanoseconds(20))
        #expect(report.frameSpan <= frameDuration * 20 + .nanoseconds(20))
    }

    /// `reset()` forgets the busy stretch under way up to the reset: what follows it is measured on its own.
    @Test func resetInsideABusyStretchMeasuresItFromTheReset() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            clock.advance(by: .milliseconds(300))
            monitor.reset()
            clock.advance(by: .milliseconds(10))
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(monitor.report.hangs == 0)
        #expect(monitor.report.busyPasses == 1)
        #expect(monitor.report.longestBusyPass == .milliseconds(10))
    }
}

@Suite("Display links on the real clock", .serialized, .timeLimit(.minutes(1)))
struct DisplayLinkRealClockTests {
    @Test func a120HzLinkTicksOnIncreasingGridPointsAndNeverEarly() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let seen = Recorder<(DisplayFrame, LoopInstant)>()
        loop.add(LoopDisplayLink(display: display) { link, frame in
            seen.append((frame, loop.now))
            if seen.count == 30 { link.invalidate() }
        }, forMode: .default)
        let start = loop.now
        while seen.count < 30, loop.now < start + .seconds(30) {
            loop.run(mode: .default, before: start + .seconds(30))
        }
        let frames = seen.elements
        #expect(frames.count == 30)
        for (index, (frame, firedAt)) in frames.enumerated() {
            #expect(firedAt >= frame.timestamp)
            #expect(frame.timestamp == display.instant(ofFrame: frame.index, refreshesPerFrame: 1))
            if index > 0 {
                #expect(frame.index > frames[index - 1].0.index)
            }
        }
    }

    @Test func aSlowFrameOnTheRealClockIsSkippedFramesAndAHitchAndTheNextCallbackIsOnTheGrid() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let display = LoopDisplay.default
        let monitor = HitchMonitor(loop: loop)
        let seen = Recorder<(DisplayFrame, LoopInstant)>()
        let link = LoopDisplayLink(display: display) { link, frame in
            seen.append((frame, loop.now))
            if seen.count == 5 {
                // 20 ms of work at 120 Hz, measured from the frame's timestamp so a late wake-up does not shorten it.
                while loop.now < frame.timestamp + .milliseconds(20) {}
            }
            if seen.count == 8 { link.invalidate() }
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .default)
        let start = loop.now
        while seen.count < 8, loop.now < start + .seconds(30) {
            loop.run(mode: .default, before: start + .seconds(30))
        }
        let frames = seen.elements.map(\.0)
        #expect(frames.count == 8)
        let slow = frames[4]
        let next = frames[5]
        // 20 ms is 2.4 frames: at least the two frames inside it are skipped, never replayed.
        #expect(next.skippedFrames >= 2)
        #expect(next.index - slow.index == Int64(next.skippedFrames) + 1)
        #expect(next.timestamp == display.instant(ofFrame: next.index, refreshesPerFrame: 1))
        #expect(seen.elements[5].1 >= next.timestamp)
        let report = monitor.report
        #expect(report.hitches >= 1)
        // The hitch is at least how far 20 ms of work overran the frame's 8.33 ms budget.
        #expect(report.totalHitchTime >= (slow.timestamp + .milliseconds(20)) - slow.targetTimestamp)
        #expect(report.skippedFrames >= 2)
    }

    /// After `invalidate()` a monitor counts nothing more, and the link lets go of it.
    /// A link in a mode is held by its loop, and a monitor holds its loop: the link must not hold the monitor, or an
    /// invalidated monitor (and a loop of the user's own) would live on while the link never ticks again.
    @Test func anInvalidatedMonitorOfAPausedLinkIsFreedWithItsHandlersAndItsLoop() throws {
        weak var weakLoop: Loop?
        weak var weakMonitor: HitchMonitor?
        final class Captured: Sendable {}
        weak var weakCaptured: Captured?
        do {
            let loop = try Loop(clock: ManualLoopClock())
            weakLoop = loop
            let link = LoopDisplayLink { _, _ in }
            loop.add(link, forMode: .default)
            link.isPaused = true
            let monitor = HitchMonitor(loop: loop)
            weakMonitor = monitor
            monitor.attach(to: link)
            let captured = Captured()
            weakCaptured = captured
            monitor.onHang { _ in _ = captured }
            monitor.invalidate()
        }
        #expect(weakCaptured == nil)
        #expect(weakMonitor == nil)
        #expect(weakLoop == nil)
    }

    @Test func anInvalidatedMonitorCountsNothingAndItsLinkLetsGoOfIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        weak var weakMonitor: HitchMonitor?
        var count = 0
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, _ in
            count += 1
            clock.advance(by: .milliseconds(1))
            if count == 30 { link.invalidate() }
        }
        do {
            let monitor = HitchMonitor(loop: loop)
            weakMonitor = monitor
            monitor.attach(to: link)
            monitor.invalidate()
        }
        loop.add(link, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(count == 30)
        #expect(weakMonitor == nil)
    }

    /// `onHang` after `invalidate()` keeps nothing: the handler could never run, so its captures go at once.
    @Test func aHangHandlerAddedAfterInvalidateIsLetGoOfAtOnce() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop)
        monitor.invalidate()
        final class Captured: Sendable {}
        weak var weakCaptured: Captured?
        do {
            let captured = Captured()
            weakCaptured = captured
            monitor.onHang { _ in _ = captured }
        }
        #expect(weakCaptured == nil)
    }

    /// A hang handler that runs the loop nested (to show an alert, say) does not make the sleep after it count as
    /// busy: the stretch after the next wake-up starts at the wake-up.
    @Test func aHangHandlerThatRunsTheLoopNestedDoesNotMakeTheNextSleepAHang() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))
        let hangs = Recorder<HangEvent>()
        monitor.onHang { hang in
            hangs.append(hang)
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .tracking)
            loop.run(mode: .tracking, before: loop.now + .milliseconds(5))
        }
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            clock.advance(by: .milliseconds(300))  // the one hang
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(2)) { _ in }, forMode: .default)  // after a long sleep
        loop.run(mode: .default, before: .distantFuture)
        #expect(hangs.count == 1)
        #expect(monitor.report.hangs == 1)
        #expect(monitor.report.longestBusyPass == .milliseconds(300))
    }

    /// A monitor created inside a callback starts in the middle of a run: leaving a run nested in a later callback
    /// returns to that callback, still busy, and the busy stretch that follows counts (here, as a hang).
    @Test func aMonitorMadeInsideARunCountsTheBusyTimeAfterANestedRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let box = LoopBoundBox<HitchMonitor?>(nil, loop: loop)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            box.value = HitchMonitor(loop: loop, hangThreshold: .milliseconds(250))
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .tracking)
            loop.run(mode: .tracking, before: loop.now + .milliseconds(5))
            clock.advance(by: .milliseconds(300))  // work after the nested run returns
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(box.value?.report.hangs == 1)
    }

    /// Frames of a link in `.common` while the loop runs a mode the monitor does not watch count in nothing: not as
    /// hitches when the loop is next busy in a watched mode, nor in the frames and the span (the ratio's time).
    @Test func framesInAnUnwatchedModeAreNotChargedLaterAsHitches() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let monitor = HitchMonitor(loop: loop, modes: [.default])
        var count = 0
        let link = LoopDisplayLink(display: .default, on: loop.assumeIsolated()) { link, _ in
            count += 1
            clock.advance(by: .milliseconds(1))
            if count == 20 { link.invalidate() }
        }
        monitor.attach(to: link)
        loop.add(link, forMode: .common)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            loop.run(mode: .tracking, before: loop.now + .milliseconds(200))  // a drag: the link ticks in it
            clock.advance(by: .milliseconds(50))  // then a long pass in `default`
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(count == 20)
        #expect(monitor.report.frames == 0, "the drag's frames are not the monitor's")
        #expect(monitor.report.frameSpan == .zero)
        #expect(monitor.report.hitches == 0, "the drag's frames were not checked in default's busy stretch")
    }
}
