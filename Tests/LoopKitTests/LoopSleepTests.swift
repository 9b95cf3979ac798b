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
        loop.add(LoopTimer(fireAt: start + .nanoseconds(8_333_333), on: loop.assumeIsolated()) { _ in
            firedAt = clock.now
        }, forMode: .default)
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

/// The pass seen through a scripted waiter: what the loop does with what a wait reports.
@Suite("Waiting, scripted")
struct ScriptedWaitTests {
    private func makeLoop() -> (Loop, ScriptedWaiter, Recorder<String>) {
        let clock = SteppingClock()
        let waiter = ScriptedWaiter(clock: clock)
        let loop = Loop(clock: clock, waiter: waiter)
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
        return (loop, waiter, trace)
    }

    @Test func aStaleWakeUpIsAbsorbedWithoutAPassAndTheLoopWaitsAgain() {
        let (loop, waiter, trace) = self.makeLoop()
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in trace.append("timer") }, forMode: .default)
        // The first wait ends at once on a wake-up for work that is no longer there; the second reaches the timer.
        waiter.script = [ScriptedWaiter.Step(elapsed: .milliseconds(1), wokenByChannel: true)]
        #expect(loop.run(mode: .default, before: loop.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["beforeWaiting", "afterWaiting", "timer"])
        #expect(waiter.deadlines.count == 2)
        #expect(waiter.consumedWakeUps == 1)
        #expect(loop.counters.emptyWakeUps == 0)
    }

    @Test func aStopQueuedBeforeTheWaitTurnsItIntoALookAndWritesNoWakeUp() {
        let (loop, waiter, trace) = self.makeLoop()
        loop.add(LoopTimer(interval: .seconds(10)) { _ in trace.append("timer") }, forMode: .default)
        loop.perform { loop.stop() }  // runs in the first pass, before its wait: the wait is refused, only a look
        #expect(loop.run(mode: .default, before: loop.now + .seconds(1)) == .stopped)
        #expect(waiter.deadlines == [nil])
        #expect(waiter.wakeUpCount == 0)
    }
}
