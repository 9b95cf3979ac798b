#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Testing
@testable import LoopKit

// Round 3 of the cases ported, in spirit, from peer suites: swift-corelibs-foundation's TestRunLoop and TestTimer,
// libuv's test-timer.c, test-timer-again.c, test-loop-stop.c, test-callback-order.c, test-close-order.c,
// test-run-once.c, test-run-nowait.c, test-active.c and test-loop-close.c, and SwiftNIO's EventLoopTest and
// NIOLoopBoundTests. Facts carried over, not code; each case is adapted to LoopKit's documented semantics (DESIGN.md,
// README.md, the DocC articles and the doc comments), and says where LoopKit differs from the peer on purpose.

/// A flag closures can share.
private final class Round3Flag: Sendable {
    private let flag = LoopLock(false)

    func set() {
        self.flag.withLock { $0 = true }
    }

    var value: Bool {
        self.flag.withLock { $0 }
    }
}

/// Counts the passes of `loop` in `mode` (one `beforeTimers` per pass).
private func round3PassCounter(on loop: Loop, mode: LoopMode = .default) -> SharedCounter {
    let passes = SharedCounter()
    loop.add(LoopObserver(activities: .beforeTimers) { _, _ in passes.increment() }, forMode: mode)
    return passes
}

// MARK: - swift-corelibs-foundation: TestRunLoop, TestTimer

@Suite("Ported from peers, round 3: Foundation RunLoop and Timer")
struct PortedPeerRound3FoundationTests {
    /// TestRunLoop `test_addingRemovingPorts`: a port (here a signalled source) is scheduled once per mode however
    /// often it is added there, unscheduled from a mode it is removed from, scheduled again when re-added, and
    /// unscheduled from every mode by `invalidate()`, which lets go of what its callbacks captured.
    @Test func aSourceIsScheduledOncePerModeAndInvalidationUnschedulesAndFreesIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let custom: LoopMode = "r3-port-custom"
        let events = Recorder<String>()
        let freed = Round3Flag()
        do {
            let source: LoopSource = {
                let payload = DeinitProbe { freed.set() }  // captured by the schedule callback alone
                return LoopSource(
                    onSchedule: { _, mode in withExtendedLifetime(payload) { events.append("+\(mode.name)") } },
                    onUnschedule: { _, mode in events.append("-\(mode.name)") }
                ) { _ in }
            }()
            loop.add(source, forMode: .default)
            #expect(events.elements == ["+default"])
            loop.add(source, forMode: .default)  // a second add to the same mode does nothing
            #expect(events.elements == ["+default"])
            loop.add(source, forMode: custom)
            #expect(events.elements == ["+default", "+r3-port-custom"])
            loop.remove(source, forMode: custom)
            #expect(events.elements == ["+default", "+r3-port-custom", "-r3-port-custom"])
            #expect(loop.contains(source, inMode: .default))
            #expect(!loop.contains(source, inMode: custom))
            loop.add(source, forMode: custom)
            #expect(events.elements.last == "+r3-port-custom")
            events.removeAll()
            source.invalidate()
            #expect(events.elements.sorted() == ["-default", "-r3-port-custom"])
            #expect(!loop.contains(source, inMode: .default))
            #expect(!loop.contains(source, inMode: custom))
            #expect(freed.value)  // released on invalidation, while the handle itself is still held
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
    }

    /// TestTimer `test_timerInvalidate`: a repeating timer is valid in its own callback, invalid right after it
    /// invalidates itself there, fires once, and the run then finishes.
    @Test func aRepeatingTimerInvalidatingItselfInItsCallbackIsInvalidAtOnceAndFiresOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let trace = Recorder<String>()
        let timer = LoopTimer(interval: .milliseconds(10), repeats: true) { timer in
            trace.append("valid \(timer.isValid)")
            timer.invalidate()
            trace.append("valid \(timer.isValid)")
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(trace.elements == ["valid true", "valid false"])
        #expect(clock.now == start + .milliseconds(10))
        #expect(!timer.isValid)
    }

    /// TestTimer `test_timerInit`: a dated repeating timer has its date and interval before it joins a loop; a dated
    /// one-shot has no interval; once added, both fire from that date, the repeating one on its grid.
    @Test func aDatedTimerHasItsDateAndIntervalBeforeItIsAddedAndFiresFromThatDate() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let date = start + .milliseconds(5)
        let fires = Recorder<String>()
        let repeating = LoopTimer(fireAt: date, interval: .milliseconds(300), repeats: true) { _ in
            fires.append("repeating@\(elapsedMilliseconds(clock.now, since: start))")
        }
        let once = LoopTimer(fireAt: date, interval: .milliseconds(300)) { _ in
            fires.append("once@\(elapsedMilliseconds(clock.now, since: start))")
        }
        defer { repeating.invalidate() }
        #expect(repeating.fireDate == date)
        #expect(repeating.interval == .milliseconds(300))
        #expect(repeating.repeats)
        #expect(repeating.isValid)
        #expect(once.fireDate == date)
        #expect(once.interval == .zero)
        #expect(!once.repeats)
        #expect(once.isValid)
        loop.add(repeating, forMode: .default)
        loop.add(once, forMode: .default)
        #expect(repeating.fireDate == date)  // adding does not move a given date
        #expect(loop.run(mode: .default, before: start + .milliseconds(700)) == .timedOut)
        #expect(fires.elements == ["repeating@5", "once@5", "repeating@305", "repeating@605"])
    }

    /// TestTimer `test_timerRepeats`: a repeating timer sees its interval in its callback and fires exactly one
    /// interval apart; invalidated on its third fire, it ends the run there, before the run's deadline.
    @Test func aRepeatingTimerFiresOneIntervalApartUntilItInvalidatesItself() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fires = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(100), repeats: true) { timer in
            fires.append("\(elapsedMilliseconds(clock.now, since: start)) \(timer.interval == .milliseconds(100))")
            if fires.count == 3 { timer.invalidate() }
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .milliseconds(400)) == .finished)
        #expect(fires.elements == ["100 true", "200 true", "300 true"])
        #expect(clock.now == start + .milliseconds(300))
    }

    /// TestRunLoop `test_runLoopPoll` and libuv `run_nowait`: a run whose deadline is now (or past) makes one pass
    /// that never sleeps: no `beforeWaiting`/`afterWaiting`, no time passes, a future timer does not fire and stays
    /// scheduled at its date.
    @Test func aRunUntilNowIsOnePassThatNeitherSleepsNorFiresAFutureTimer() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: .allActivities) { _, activity in trace.append("\(activity)") },
                 forMode: .default)
        let fired = SharedCounter()
        let timer = LoopTimer(interval: .milliseconds(100)) { _ in fired.increment() }
        defer { timer.invalidate() }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now) == .timedOut)
        #expect(trace.elements == ["entry", "beforeTimers", "beforeSources", "exit"])
        #expect(clock.now == start)
        #expect(fired.value == 0)
        trace.removeAll()
        #expect(loop.run(mode: .default, before: start - .milliseconds(1)) == .timedOut)  // a past deadline: the same
        #expect(trace.elements == ["entry", "beforeTimers", "beforeSources", "exit"])
        #expect(clock.now == start)
        #expect(timer.isValid)
        #expect(loop.nextTimerDate(forMode: .default) == start + .milliseconds(100))
    }

    /// TestRunLoop `test_runLoopRunMode`: `currentMode` is the running mode inside a callback, the nested mode
    /// inside a nested run, the outer mode again once the nested run returns, and `nil` outside every run.
    @Test func theCurrentModeFollowsTheRunsAndIsNilOutsideThem() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let keepAlive = keepAliveTimer()
        defer { keepAlive.invalidate() }
        loop.add(keepAlive, forMode: .tracking)
        let seen = Recorder<String>()
        #expect(loop.currentMode == nil)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            seen.append("timer \(loop.currentMode?.name ?? "-")")
            loop.add(LoopTimer(interval: .milliseconds(2)) { _ in
                seen.append("nested \(loop.currentMode?.name ?? "-")")
            }, forMode: .tracking)
            let nested = loop.run(mode: .tracking, before: clock.now + .milliseconds(5))
            seen.append("after \(nested) \(loop.currentMode?.name ?? "-")")
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(seen.elements == ["timer default", "nested tracking", "after timedOut default"])
        #expect(loop.currentMode == nil)
    }

    /// TestRunLoop `test_commonModes`, in Foundation's spelling: a one-shot `LoopTimer(timeInterval: 1)` added to the
    /// common modes fires one second after it was added (not at once, as Foundation's block timer on Linux does),
    /// whichever common mode the loop runs then.
    @Test func aTimeIntervalTimerInTheCommonModesFiresASecondAfterItWasAddedInAnyCommonMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<String>()
        loop.add(LoopTimer(timeInterval: 1) { _ in
            fired.append("a \(loop.currentMode?.name ?? "-")@\(elapsedMilliseconds(clock.now, since: start))")
        }, forMode: .common)
        clock.advance(by: .milliseconds(500))
        loop.add(LoopTimer(timeInterval: 1) { _ in
            fired.append("b \(loop.currentMode?.name ?? "-")@\(elapsedMilliseconds(clock.now, since: start))")
        }, forMode: .common)
        #expect(loop.run(mode: .tracking, before: start + .milliseconds(1200)) == .timedOut)
        #expect(loop.run(mode: .default, before: start + .seconds(2)) == .finished)
        #expect(fired.elements == ["a tracking@1000", "b default@1500"])
        #expect(clock.now == start + .milliseconds(1500))
    }
}

// MARK: - libuv: timers, stop, callback and close order, run once, active handles, loop close

@Suite("Ported from peers, round 3: libuv")
struct PortedPeerRound3LibuvTests {
    /// libuv `timer`: ten one-shot timers 50 ms apart from 0 ms, a repeating 100 ms timer closed on its fifth fire,
    /// and one stopped before the run, which never fires. The run ends when the last timer is done, at 500 ms; timers
    /// due together fire in the order they were added.
    @Test func oneShotsARepeatingTimerAndAStoppedOneEndTheRunAtTheLastFire() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fires = Recorder<String>()
        for index in 0..<10 {
            loop.add(LoopTimer(interval: .milliseconds(index * 50)) { _ in
                fires.append("once@\(elapsedMilliseconds(clock.now, since: start))")
            }, forMode: .default)
        }
        let repeats = SharedCounter()
        loop.add(LoopTimer(interval: .milliseconds(100), repeats: true) { timer in
            fires.append("repeat@\(elapsedMilliseconds(clock.now, since: start))")
            if repeats.increment() == 5 { timer.invalidate() }
        }, forMode: .default)
        let never = LoopTimer(interval: .milliseconds(100), repeats: true) { _ in fires.append("never") }
        loop.add(never, forMode: .default)
        never.invalidate()  // uv_timer_stop before the run
        #expect(loop.run(mode: .default, before: start + .seconds(10)) == .finished)
        var expected: [String] = []
        for ms in stride(from: 0, through: 500, by: 50) {
            if ms < 500 { expected.append("once@\(ms)") }
            if ms > 0 && ms % 100 == 0 { expected.append("repeat@\(ms)") }
        }
        #expect(fires.elements == expected)
        #expect(clock.now == start + .milliseconds(500))
    }

    /// libuv `timer_again`, the watchdog idiom: a 50 ms timer re-arms a 100 ms repeating timer from now on each fire,
    /// so the latter never fires while the former runs; once the first stops (at 500 ms), the second fires on its
    /// grid from its last re-arm: at 600 and 700 ms.
    @Test func aTimerReArmedByAnotherBeforeItIsDueFiresOnlyOnceTheReArmingStops() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let trace = Recorder<String>()
        let watchdogFires = SharedCounter()
        let watchdog = LoopTimer(interval: .milliseconds(100), repeats: true) { timer in
            trace.append("watchdog@\(elapsedMilliseconds(clock.now, since: start))")
            if watchdogFires.increment() == 2 { timer.invalidate() }
        }
        let feeder = LoopTimer(interval: .milliseconds(50), repeats: true) { timer in
            trace.append("feed@\(elapsedMilliseconds(clock.now, since: start))")
            watchdog.setNextFireDate(clock.now + watchdog.interval)  // uv_timer_again
            if clock.now >= start + .milliseconds(500) { timer.invalidate() }
        }
        loop.add(feeder, forMode: .default)
        loop.add(watchdog, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(10)) == .finished)
        #expect(trace.elements == (1...10).map { "feed@\($0 * 50)" } + ["watchdog@600", "watchdog@700"])
        #expect(clock.now == start + .milliseconds(700))
    }

    /// libuv `loop_stop_before_run`: in libuv a stop made before `uv_run` makes it return at once. LoopKit follows CF
    /// here on purpose (DifferencesFromCFRunLoop, "Kept from CF"): `stop()` while no run is active does nothing, from
    /// any thread, so the next run goes on and fires its timer.
    @Test func aStopBeforeTheRunIsANoOpAsInCF() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = SharedCounter()
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in fired.increment() }, forMode: .default)
        loop.stop()
        onAnotherThread { loop.stop() }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(fired.value == 1)
        #expect(clock.now == start + .milliseconds(10))
    }

    /// libuv `callback_order`: work started by a callback runs in the loop's phase order. A block that signals a
    /// source and adds a zero-delay timer: the source runs in the same pass, before the timer (signalled sources come
    /// before timers in a pass), and nothing sleeps.
    @Test func aSourceSignalledAndATimerStartedByOneBlockRunSourceFirstInTheSamePass() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let passes = round3PassCounter(on: loop)
        let trace = Recorder<String>()
        let source = LoopSource { _ in trace.append("source \(passes.value)") }
        defer { source.invalidate() }
        loop.add(source, forMode: .default)
        loop.perform {
            trace.append("block \(passes.value)")
            loop.add(LoopTimer(interval: .zero) { _ in
                trace.append("timer \(passes.value)")
                source.invalidate()
            }, forMode: .default)
            source.signal()
        }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(trace.elements == ["block 1", "source 1", "timer 1"])
        #expect(clock.now == start)
    }

    /// libuv `close_order`: a zero-delay timer fires; a check that runs after it (a block it queued, run at the pass's
    /// last drain) closes the last handles, among them a timer 100 s away; their close callbacks (a source's
    /// `onUnschedule`) run, and the run ends at once as finished, without waiting for the far timer.
    @Test func closingTheLastItemsFromACallbackEndsTheRunAtOnceWithoutWaitingForAFarTimer() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let trace = Recorder<String>()
        let check = LoopSource(onUnschedule: { _, mode in trace.append("close check \(mode.name)") }) { _ in
            trace.append("check performed")
        }
        loop.add(check, forMode: .default)
        let far = LoopTimer(interval: .seconds(100)) { _ in trace.append("far timer") }
        loop.add(LoopTimer(interval: .zero) { _ in
            trace.append("timer")
            loop.perform {
                trace.append("check")
                check.invalidate()
                far.invalidate()
            }
        }, forMode: .default)
        loop.add(far, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1000)) == .finished)
        #expect(trace.elements == ["timer", "check", "close check default"])
        #expect(clock.now == start)
        #expect(!far.isValid)
    }

    /// libuv `run_once`: one `UV_RUN_ONCE` per tick. A source that signals itself: each run asked to return after a
    /// source calls it exactly once and returns `handledSource`; once it invalidates itself (on its tenth call), the
    /// next run finishes at once. No time passes.
    @Test func eachRunReturningAfterASourceCallsASelfSignallingSourceOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let calls = SharedCounter()
        let source = LoopSource { source in
            if calls.increment() < 10 {
                source.signal()
            } else {
                source.invalidate()
            }
        }
        loop.add(source, forMode: .default)
        source.signal()
        for round in 1...10 {
            let result = loop.run(mode: .default, before: start + .seconds(1), returnAfterSourceHandled: true)
            #expect(result == .handledSource)
            #expect(calls.value == round)
        }
        #expect(!source.isValid)
        #expect(loop.run(mode: .default, before: start + .seconds(1), returnAfterSourceHandled: true) == .finished)
        #expect(calls.value == 10)
        #expect(clock.now == start)
    }

    /// libuv `active` (uv_is_active): a one-shot timer is valid and scheduled until it fires, then neither; a
    /// repeating one stays valid and moves to its next slot; removed from its only mode ("stopped") it stays valid but
    /// keeps nothing alive; invalidated, it is refused by `add`.
    @Test func aTimersValidityAndMembershipFollowItsFiresRemovalAndInvalidation() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let once = LoopTimer(interval: .milliseconds(10)) { _ in }
        #expect(once.isValid)
        #expect(once.fireDate == nil)
        loop.add(once, forMode: .default)
        #expect(once.fireDate == start + .milliseconds(10))
        #expect(loop.contains(once, inMode: .default))
        let repeating = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in }
        loop.add(repeating, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .milliseconds(25)) == .timedOut)
        #expect(!once.isValid)
        #expect(!loop.contains(once, inMode: .default))
        #expect(repeating.isValid)
        #expect(repeating.fireDate == start + .milliseconds(30))
        loop.remove(repeating, forMode: .default)
        #expect(repeating.isValid)
        #expect(!loop.contains(repeating, inMode: .default))
        #expect(loop.run(mode: .default, before: start + .milliseconds(100)) == .finished)
        #expect(clock.now == start + .milliseconds(25))
        repeating.invalidate()
        #expect(!repeating.isValid)
        #expect(!loop.add(repeating, forMode: .default))
        #expect(!loop.contains(repeating, inMode: .default))
    }

    /// libuv `loop_close` (uv_loop_close after closing the handles): ending a loop of one's own removes its items from
    /// every mode, calling a source's cancel callback once per mode; the ended loop refuses new items and is freed;
    /// its items stay valid and may join another loop, where they run (the timer at the date it was first given).
    @Test func anEndedLoopUnschedulesItsItemsWhichMayJoinAnotherLoop() throws {
        let clock = ManualLoopClock()
        let start = clock.now
        let custom: LoopMode = "r3-close-custom"
        let trace = Recorder<String>()
        let source = LoopSource(
            onSchedule: { _, mode in trace.append("schedule \(mode.name)") },
            onUnschedule: { _, mode in trace.append("unschedule \(mode.name)") }
        ) { _ in trace.append("perform") }
        defer { source.invalidate() }
        let timer = LoopTimer(interval: .milliseconds(10)) { _ in
            trace.append("timer@\(elapsedMilliseconds(clock.now, since: start))")
        }
        weak var weakFirst: Loop?
        do {
            let first = try Loop(clock: clock)
            weakFirst = first
            first.add(source, forMode: .default)
            first.add(source, forMode: custom)
            first.add(timer, forMode: .default)
            trace.removeAll()
            first.invalidate()
            #expect(trace.elements.sorted() == ["unschedule default", "unschedule r3-close-custom"])
            #expect(!first.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default))
        }
        #expect(weakFirst == nil)
        #expect(source.isValid)
        #expect(timer.isValid)
        let second = try Loop(clock: clock)
        defer { second.invalidate() }
        trace.removeAll()
        #expect(second.add(source, forMode: .default))
        #expect(second.add(timer, forMode: .default))
        #expect(timer.fireDate == start + .milliseconds(10))
        source.signal()
        #expect(second.run(mode: .default, before: start + .milliseconds(20)) == .timedOut)
        #expect(trace.elements == ["schedule default", "perform", "timer@10"])
    }
}

// MARK: - SwiftNIO: EventLoopTest

@Suite("Ported from peers, round 3: SwiftNIO event loops", .timeLimit(.minutes(1)))
struct PortedPeerRound3NIOTests {
    /// NIO `testScheduleCancelled`: a task cancelled halfway to its deadline never runs; the completion is called at
    /// once (the task is not running), and with nothing else scheduled the next run finishes without waiting.
    @Test func aTaskCancelledHalfwayNeverRunsAndTheRunFinishesAtOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let ran = SharedCounter()
        let completions = SharedCounter()
        let task = loop.schedule(after: .seconds(1)) { ran.increment() }
        #expect(loop.run(mode: .default, before: start + .milliseconds(500)) == .timedOut)
        #expect(ran.value == 0)
        task.cancel { completions.increment() }
        #expect(completions.value == 1)
        #expect(task.isCancelled)
        #expect(loop.run(mode: .default, before: start + .seconds(2)) == .finished)
        #expect(clock.now == start + .milliseconds(500))
        #expect(ran.value == 0)
    }

    /// NIO `testScheduledRepeatedAsyncTask`: with a fixed delay between runs, a run that takes 10 ms pushes the next
    /// one back: runs at 10, 30, 50, 70 and 90 ms; a run with no time passing does nothing; after the cancel, ten
    /// hours pass without another run.
    @Test func aFixedDelayTaskWhoseRunsTakeTimeStartsEachRunADelayAfterTheLastEnded() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let runs = Recorder<Int>()
        let task = loop.scheduleRepeating(initialDelay: .milliseconds(10), delay: .milliseconds(10)) { _ in
            runs.append(elapsedMilliseconds(clock.now, since: start))
            clock.advance(by: .milliseconds(10))  // the run takes 10 ms
        }
        for _ in 0..<10 {
            #expect(loop.run(mode: .default, before: clock.now) == .timedOut)
        }
        #expect(runs.elements.isEmpty)
        #expect(loop.run(mode: .default, before: start + .milliseconds(89)) == .timedOut)
        #expect(runs.elements == [10, 30, 50, 70])
        #expect(loop.run(mode: .default, before: start + .milliseconds(90)) == .timedOut)
        #expect(runs.elements == [10, 30, 50, 70, 90])
        task.cancel()
        #expect(loop.run(mode: .default, before: clock.now + .seconds(36_000)) == .finished)
        #expect(runs.count == 5)
    }

    /// NIO `testRepeatedTaskThatCancelsItselfNotifiesOnlyWhenFinished`, with a fixed delay: a repeating task that
    /// cancels itself gets its completion only once its run has returned, and runs no more.
    @Test func aFixedDelayTaskCancellingItselfIsNotifiedAfterItsRunAndRunsNoMore() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let task = loop.scheduleRepeating(initialDelay: .zero, delay: .milliseconds(1)) { task in
            trace.append("run")
            task.cancel { trace.append("completion") }
            trace.append("cancel returned")
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["run", "cancel returned", "completion"])
        #expect(task.isCancelled)
    }

    /// NIO `testSchedulingTaskOnTheEventLoopWithinTheEventLoopsOnlyTask`: a block queued by the loop's only block
    /// runs without any other wake-up: on a manual clock in the same pass, at the drain after the signalled sources
    /// (DESIGN §1: a block queued during a drain waits for the next drain point); on a loop thread, it runs.
    @Test func aBlockQueuedByTheOnlyBlockRunsInTheSamePass() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let passes = round3PassCounter(on: loop)
        let trace = Recorder<String>()
        loop.perform {
            trace.append("outer \(passes.value)")
            loop.perform { trace.append("inner \(passes.value)") }
        }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(trace.elements == ["outer 1", "inner 1"])
        #expect(clock.now == start)

        let thread = try LoopThread(name: "r3-only-block")
        defer { thread.shutdownAndJoin() }
        let threadLoop = thread.loop
        let done = DispatchSemaphore(value: 0)
        threadLoop.perform { threadLoop.perform { done.signal() } }
        #expect(done.wait(timeout: .now() + 20) == .success)
    }

    /// NIO `testSchedulingTaskOnTheEventLoopWithinTheEventLoopsOnlyScheduledTask`: a block queued by the only
    /// scheduled task (due in 10 ns) runs in the pass that ran the task, at its last drain; on a loop thread, it runs.
    @Test func aBlockQueuedByTheOnlyScheduledTaskRunsInThatPass() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let passes = round3PassCounter(on: loop)
        let trace = Recorder<String>()
        loop.schedule(after: .nanoseconds(10)) {
            trace.append("task \(passes.value)")
            loop.perform { trace.append("block \(passes.value)") }
        }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(trace.elements == ["task 1", "block 1"])
        #expect(clock.now == start + .nanoseconds(10))

        let thread = try LoopThread(name: "r3-only-task")
        defer { thread.shutdownAndJoin() }
        let threadLoop = thread.loop
        let done = DispatchSemaphore(value: 0)
        threadLoop.schedule(after: .nanoseconds(10)) { threadLoop.perform { done.signal() } }
        #expect(done.wait(timeout: .now() + 20) == .success)
    }

    /// NIO `testScheduleMaximum` and the `NIODeadline` edge cases: a task at the largest delay neither fires nor
    /// overflows (a delay beyond the time line saturates at `.distantFuture`), cancelling it is fine, and instant
    /// arithmetic saturates at both ends.
    @Test func tasksAtTheLargestDelaysNeitherFireNorOverflowAndInstantArithmeticSaturates() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let ran = Recorder<String>()
        let far = loop.schedule(after: .nanoseconds(Int64.max)) { ran.append("far") }
        let farthest = loop.schedule(after: .seconds(Int64.max)) { ran.append("farthest") }
        #expect(loop.nextTimerDate(forMode: .default) == start + .nanoseconds(Int64.max))
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .timedOut)
        #expect(ran.elements.isEmpty)
        far.cancel()
        #expect(loop.nextTimerDate(forMode: .default) == .distantFuture)
        farthest.cancel()
        #expect(far.isCancelled && farthest.isCancelled)
        #expect(loop.nextTimerDate(forMode: .default) == nil)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)

        let origin = LoopInstant(nanoseconds: 0)
        #expect(origin - .seconds(1) == origin)
        #expect(origin + .nanoseconds(Int64.min) == origin)
        #expect(LoopInstant.distantFuture + .seconds(1) == .distantFuture)
        #expect(LoopInstant.distantFuture - .nanoseconds(Int64.min) == .distantFuture)
        #expect(LoopInstant.distantFuture - origin == .nanoseconds(Int64.max))
        #expect(origin - LoopInstant.distantFuture < .zero)
        #expect(start - start == .zero)
        #expect(start.plus(ms: 1) - start == .milliseconds(1))
        #expect(start - start.plus(ms: 1) == .milliseconds(-1))
    }

    /// NIO `testScheduleRepeatedTask`, on the real clock: a fixed-delay task on a loop thread runs there, not before
    /// its initial delay, and each run starts at least the delay after the previous one ended; cancelled from its
    /// sixth run, it reports completion after that run and runs no more.
    @Test func aFixedDelayTaskOnALoopThreadRunsNotEarlyAndADelayAfterEachRun() throws {
        let thread = try LoopThread(name: "r3-delay")
        defer { thread.shutdownAndJoin() }
        let loop = thread.loop
        let runs = Recorder<(began: LoopInstant, ended: LoopInstant, onLoop: Bool)>()
        let done = DispatchSemaphore(value: 0)
        let start = loop.now
        loop.scheduleRepeating(initialDelay: .milliseconds(5), delay: .milliseconds(10)) { task in
            let began = loop.now
            if runs.count == 5 {
                task.cancel { done.signal() }
            }
            runs.append((began, loop.now, loop.isCurrent))
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        let recorded = runs.elements
        #expect(recorded.count == 6)
        #expect(recorded.allSatisfy { $0.onLoop })
        if let first = recorded.first {
            #expect(first.began - start >= .milliseconds(5))
        }
        for (previous, next) in zip(recorded, recorded.dropFirst()) {
            #expect(next.began - previous.ended >= .milliseconds(10))
        }
    }

    /// NIO `testCancellingTheLastOutstandingTask` / `...EvenIfTheyWereTheNextTaskToExecute`: a task cancelled after
    /// the loop has queued it as its next wake-up leaves no wake-up behind: the loop sleeps straight to the run's
    /// deadline (every `afterWaiting` has a cause, DESIGN §3); without a keep-alive, the run finishes at once.
    @Test func aCancelledNextTaskLeavesNoWakeUpBehind() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let wakes = Recorder<Int>()
        loop.add(LoopObserver(activities: .afterWaiting) { _, _ in
            wakes.append(elapsedMilliseconds(clock.now, since: start))
        }, forMode: .default)
        let ran = SharedCounter()
        let keepAlive = keepAliveTimer()
        loop.add(keepAlive, forMode: .default)
        let task = loop.schedule(after: .milliseconds(10)) { ran.increment() }
        #expect(loop.run(mode: .default, before: start + .milliseconds(5)) == .timedOut)
        task.cancel()
        #expect(loop.run(mode: .default, before: start + .milliseconds(50)) == .timedOut)
        #expect(wakes.elements == [5, 50])
        #expect(ran.value == 0)
        let last = loop.schedule(after: .milliseconds(10)) { ran.increment() }
        keepAlive.invalidate()
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(5)) == .timedOut)
        last.cancel()
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(clock.now == start + .milliseconds(55))
        #expect(ran.value == 0)
    }

    /// NIO `testShuttingDownFailsRegistration` / `testSafeToExecuteFalse`: a loop whose thread has ended takes no more
    /// items (`add` says so and keeps nothing: a refused timer gets no date), and a task scheduled on it comes back
    /// cancelled; the refused items may join another loop and run there.
    @Test func anEndedLoopThreadRefusesItemsWhichMayThenJoinAnotherLoop() throws {
        let thread = try LoopThread(name: "r3-ended")
        let ended = thread.loop
        thread.shutdownAndJoin()
        let fired = Recorder<String>()
        let timer = LoopTimer(interval: .milliseconds(10)) { _ in fired.append("timer") }
        let source = LoopSource { _ in fired.append("source") }
        defer { source.invalidate() }
        #expect(!ended.add(timer, forMode: .default))
        #expect(timer.fireDate == nil)
        #expect(!ended.add(source, forMode: .default))
        let task = ended.schedule(after: .zero) { fired.append("task") }
        #expect(task.isCancelled)

        let clock = ManualLoopClock()
        let other = try Loop(clock: clock)
        defer { other.invalidate() }
        let start = clock.now
        #expect(other.add(timer, forMode: .default))
        #expect(timer.fireDate == start + .milliseconds(10))
        #expect(other.add(source, forMode: .default))
        source.signal()
        #expect(other.run(mode: .default, before: start + .milliseconds(20)) == .timedOut)
        #expect(fired.elements == ["source", "timer"])
    }
}

// MARK: - SwiftNIO: MultiThreadedEventLoopGroup

@Suite("Ported from peers, round 3: SwiftNIO event loop groups", .serialized, .timeLimit(.minutes(1)))
struct PortedPeerRound3GroupTests {
    /// NIO `testCallingShutdownGracefullyMultipleTimesShouldExecuteAllCallbacks`: every shutdown's completion is
    /// called, once, in the order the calls were made; one made after the group has ended is called at once, on the
    /// calling thread.
    @Test func everyShutdownCompletionIsCalledOnceInCallOrder() throws {
        let group = try LoopGroup(name: "r3-shutdowns", threadCount: 4)
        let order = Recorder<Int>()
        for index in 1...3 {
            group.shutdownGracefully { order.append(index) }
        }
        #expect(group.isShuttingDown)
        #expect(waitUntil { order.count == 3 })
        #expect(order.elements == [1, 2, 3])
        #expect(waitUntil { group.hasShutDown })  // every completion has returned: the next one runs at once
        group.shutdownGracefully { order.append(4) }
        #expect(order.elements == [1, 2, 3, 4])
    }

    /// NIO `testCurrentEventLoop`: code on each of a group's loops finds that loop as its thread's current loop (and
    /// only that one of the group current); outside, none is; after the shutdown, once the group is let go of, its
    /// loops are freed.
    @Test func eachGroupLoopIsItsThreadsCurrentLoopAndIsFreedAfterTheShutdown() throws {
        weak var weakFirst: Loop?
        weak var weakSecond: Loop?
        do {
            let group = try LoopGroup(name: "r3-current", threadCount: 2)
            let seen = Recorder<String>()
            for (index, loop) in group.loops.enumerated() {
                loop.perform {
                    let current = Loop.current
                    seen.append("\(index) \(current === loop) \(group.loops.filter { $0.isCurrent }.count)")
                }
            }
            #expect(waitUntil { seen.count == 2 })
            #expect(Set(seen.elements) == ["0 true 1", "1 true 1"])
            #expect(group.loops[0] !== group.loops[1])
            #expect(!group.loops.contains { $0.isCurrent })
            weakFirst = group.loops[0]
            weakSecond = group.loops[1]
            group.syncShutdownGracefully()
        }
        #expect(waitUntil { weakFirst == nil && weakSecond == nil })
    }

    /// NIO `testEventLoopGroupMakeIterator` and the group's description: a group has one loop per processor by
    /// default, on threads named after it with their index (`name-0`, ...); a long name is cut short, never the index,
    /// to the 15 bytes Linux keeps.
    @Test func aGroupHasALoopPerProcessorOnThreadsNamedAfterItWithTheirIndex() throws {
        let group = try LoopGroup(name: "r3-names")
        defer { group.syncShutdownGracefully() }
        let long = try LoopGroup(name: "r3-a-rather-long-group-name", threadCount: 2)
        defer { long.syncShutdownGracefully() }
        #expect(group.loops.count == Int(sysconf(CInt(_SC_NPROCESSORS_ONLN))))
        let names = Recorder<String>()
        for loop in group.loops + long.loops {
            loop.perform { names.append(PlatformThread.currentName ?? "?") }
        }
        #expect(waitUntil { names.count == group.loops.count + 2 })
        let expected = group.loops.indices.map { "r3-names-\($0)" } + ["r3-a-rather-l-0", "r3-a-rather-l-1"]
        #expect(names.elements.sorted() == expected.sorted())
    }
}

// MARK: - SwiftNIO: NIOLoopBoundTests

/// A class that is not `Sendable`.
private final class Round3NotSendable {}

@available(*, unavailable)
extension Round3NotSendable: Sendable {}

/// Compiles only for a `Sendable` value.
private func round3RequireSendable<Value: Sendable>(_ value: Value) {}

/// A copy-on-write value that tells whether a mutation found its storage unique (done in place, no copy).
private struct Round3CoWValue {
    private final class Storage {}

    private var storage = Storage()

    /// Whether the storage was uniquely referenced when mutated: a mutation in place.
    mutating func mutateInPlace() -> Bool {
        isKnownUniquelyReferenced(&self.storage)
    }
}

@Suite("Ported from peers, round 3: NIOLoopBound")
struct PortedPeerRound3LoopBoundTests {
    /// NIO `testLoopBoundIsSendableWithNonSendableValue`: a bound value and a bound box of a non-Sendable object are
    /// Sendable and give back that very object, also to a block sent from another thread.
    @Test func boundWrappersOfANonSendableObjectAreSendableAndKeepItsIdentity() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let thing = Round3NotSendable()
        let bound = LoopBound(thing, loop: loop)
        let box = LoopBoundBox(thing, loop: loop)
        #expect(bound.value === thing)
        #expect(box.value === thing)
        round3RequireSendable(bound)
        round3RequireSendable(box)
        let seen = Recorder<Bool>()
        onAnotherThread {
            loop.perform { seen.append(box.value === bound.value) }
        }
        loop.run(mode: .default, before: clock.now)
        #expect(seen.elements == [true])
    }

    /// NIO `testInPlaceMutation`: mutating the bound value through `value` happens in place, without copying a
    /// copy-on-write value (both `value`s have a `_modify` accessor, as NIOLoopBound's; with get and set alone,
    /// `box.value.append(x)` on a bound array copied the whole array each time, until this test).
    @Test func mutatingThroughValueHappensInPlace() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        var plain = Round3CoWValue()
        let plainInPlace = plain.mutateInPlace()
        #expect(plainInPlace)  // the probe itself: a plain variable mutates in place
        var bound = LoopBound(Round3CoWValue(), loop: loop)
        let boundInPlace = bound.value.mutateInPlace()
        #expect(boundInPlace)
        let box = LoopBoundBox(Round3CoWValue(), loop: loop)
        let boxInPlace = box.value.mutateInPlace()
        #expect(boxInPlace)
    }
}
