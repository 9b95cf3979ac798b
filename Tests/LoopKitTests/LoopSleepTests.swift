import Testing
@testable import LoopKit

/// How the loop sleeps, seen through an injected poller: exact nanosecond timeouts, and interrupted waits.
@Suite("Sleeping")
struct LoopSleepTests {
    @Test func theSleepLastsExactlyTheNanosecondsToTheNextTimerNotWholeMilliseconds() throws {
        let clock = SteppingClock()
        let poller = FakePoller(clock: clock)
        let loop = Loop(clock: clock, waiter: try PollWaiter(backend: .linux, clock: clock, poller: poller))
        let start = clock.now
        var firedAt: LoopInstant?
        loop.add(LoopTimer(fireAt: start + .nanoseconds(8_333_333)) { _ in firedAt = clock.now }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(poller.timeouts == [8_333_333])
        #expect(firedAt == start + .nanoseconds(8_333_333))
    }

    @Test func theSleepEndsAtTheRunDeadlineWhenItComesFirst() throws {
        let clock = SteppingClock()
        let poller = FakePoller(clock: clock)
        let loop = Loop(clock: clock, waiter: try PollWaiter(backend: .linux, clock: clock, poller: poller))
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .microseconds(250)) == .timedOut)
        #expect(poller.timeouts == [250_000])
    }

    @Test func anInterruptedWaitWaitsAgainForWhatIsLeftWithoutWakingTheLoop() throws {
        let clock = SteppingClock()
        let poller = FakePoller(clock: clock)
        let loop = Loop(clock: clock, waiter: try PollWaiter(backend: .linux, clock: clock, poller: poller))
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in trace.append("\(activity)") },
                 forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in trace.append("timer") }, forMode: .default)
        poller.script = [FakePoller.Step(elapsed: 4_000_000, result: -1)]  // a signal after 4 ms: EINTR
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(poller.timeouts == [10_000_000, 6_000_000])
        #expect(trace.elements == ["beforeWaiting", "afterWaiting", "timer"])
    }

    @Test func tolerantTimersShareOneSleep() throws {
        let clock = SteppingClock()
        let poller = FakePoller(clock: clock)
        let loop = Loop(clock: clock, waiter: try PollWaiter(backend: .linux, clock: clock, poller: poller))
        let start = clock.now
        let fired = Recorder<LoopInstant>()
        loop.add(LoopTimer(fireAt: start + .milliseconds(10), tolerance: .milliseconds(5)) { _ in fired.append(clock.now) },
                 forMode: .default)
        loop.add(LoopTimer(fireAt: start + .milliseconds(13)) { _ in fired.append(clock.now) }, forMode: .default)
        loop.run(mode: .default, before: start + .seconds(1))
        #expect(poller.timeouts == [13_000_000])
        #expect(fired.elements == [start + .milliseconds(13), start + .milliseconds(13)])
    }
}
