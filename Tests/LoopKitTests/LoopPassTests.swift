import Testing
@testable import LoopKit

@Suite("One run: results, precedence and the order of a pass")
struct LoopPassTests {
    @Test func anEmptyModeFinishesAtOnceWithoutCallingObservers() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let seen = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: .allActivities) { _, activity in seen.append(activity) }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(seen.elements.isEmpty)
    }

    @Test func aCustomModeWithNothingInItFinishesAtOnce() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        #expect(loop.run(mode: "never-used", before: .distantFuture) == .finished)
    }

    @Test func aManualClockAdvancedToTheDistantFutureHasReachedEveryDeadline() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<String>()
        let timer = LoopTimer(interval: .seconds(1), repeats: true) { _ in fired.append("timer") }
        loop.add(timer, forMode: .default)
        clock.advance(to: .distantFuture)
        // One non-blocking pass, as for any deadline already reached: the due timer fires, nothing sleeps.
        #expect(loop.run(mode: .default, before: .distantFuture) == .timedOut)
        #expect(fired.elements == ["timer"])
        timer.invalidate()
    }

    @Test func onePassWithADueTimerCallsObserversInCFOrder() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: .allActivities) { _, activity in trace.append("\(activity)") }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in trace.append("timer") }, forMode: .default)
        let result = loop.run(mode: .default, before: clock.now + .milliseconds(10))
        #expect(result == .timedOut)
        #expect(trace.elements == [
            "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "timer", "exit",
        ])
    }

    @Test func aPassRunsBlocksThenSignalledSourcesThenBlocksAgainBeforeWaiting() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: .allActivities) { _, activity in trace.append("\(activity)") }, forMode: .default)
        let source = LoopSource { _ in
            trace.append("source")
            loop.perform { trace.append("block queued by source") }
        }
        loop.add(source, forMode: .default)
        // Due in this pass: the timers' phase (step 5) comes after the second drain (step 3), which is where the block
        // the source queued runs, not at the pass's last drain (step 6).
        loop.add(LoopTimer(interval: .zero) { _ in trace.append("timer") }, forMode: .default)
        loop.perform { trace.append("block") }
        source.signal()
        loop.run(mode: .default, before: clock.now)
        #expect(trace.elements == [
            "entry", "beforeTimers", "beforeSources", "block", "source", "block queued by source", "timer", "exit",
        ])
    }

    @Test func aPassThatHandledASourceDoesNotSleep() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in trace.append("\(activity)") },
                 forMode: .default)
        let source = LoopSource { _ in trace.append("source") }
        loop.add(source, forMode: .default)
        source.signal()
        #expect(loop.run(mode: .default, before: .distantFuture, returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.elements == ["source"])
    }

    @Test func theActivityBitsMatchCoreFoundation() {
        #expect(LoopActivity.entry.rawValue == 1)
        #expect(LoopActivity.beforeTimers.rawValue == 2)
        #expect(LoopActivity.beforeSources.rawValue == 4)
        #expect(LoopActivity.beforeWaiting.rawValue == 32)
        #expect(LoopActivity.afterWaiting.rawValue == 64)
        #expect(LoopActivity.exit.rawValue == 128)
    }

    @Test func aDeadlineAlreadyReachedMakesOneNonBlockingPassAndTimesOut() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let passes = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: [.beforeTimers, .beforeWaiting]) { _, activity in passes.append(activity) },
                 forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        let start = clock.now
        #expect(loop.run(mode: .default, before: clock.now) == .timedOut)
        #expect(passes.elements == [.beforeTimers])
        #expect(clock.now == start)
    }

    @Test func runTimesOutAtItsDeadlineWhenNothingHappens() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        let deadline = clock.now + .milliseconds(250)
        #expect(loop.run(mode: .default, before: deadline) == .timedOut)
        #expect(clock.now == deadline)
    }

    @Test func theModeBecomingEmptyEndsTheRunWithFinishedAfterExit() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.entry, .exit]) { _, activity in trace.append("\(activity)") }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in trace.append("one-shot") }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(trace.elements == ["entry", "one-shot", "exit"])
    }

    @Test func observersDoNotKeepAModeAliveButPendingBlocksDo() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        loop.add(LoopObserver(activities: .allActivities) { _, _ in }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        let ran = Recorder<Int>()
        loop.perform { ran.append(1) }
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(ran.elements == [1])
    }

    @Test func handledSourceWinsOverTimedOutAndStopped() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let source = LoopSource { _ in loop.stop() }
        loop.add(source, forMode: .default)
        source.signal()
        #expect(loop.run(mode: .default, before: clock.now, returnAfterSourceHandled: true) == .handledSource)
        // The stop that lost is spent with that run: a later run is not stopped by it.
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in }, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(10)) == .timedOut)
    }

    @Test func timedOutWinsOverStopped() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .zero) { _ in loop.stop() }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now) == .timedOut)
    }

    @Test func stoppedWinsOverFinished() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in loop.stop() }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
    }

    @Test func timersAndBlocksAreNotSourcesForReturnAfterSourceHandled() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in fired.append("timer") }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        loop.perform { fired.append("block") }
        let result = loop.run(mode: .default, before: clock.now + .milliseconds(5), returnAfterSourceHandled: true)
        #expect(result == .timedOut)
        #expect(fired.elements == ["block", "timer"])
    }

    @Test func runForeverReturnsFinishedAtOnceOnAnEmptyDefaultMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        #expect(loop.run() == .finished)
    }

    @Test func runForeverReturnsStoppedWhenStopped() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .milliseconds(3)) { _ in loop.stop() }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        #expect(loop.run() == .stopped)
    }

    @Test func runningTheCommonPseudoModeIsAPreconditionFailure() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            func runCommon() throws {
                let loop = try Loop()
                defer { loop.invalidate() }
                loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .common)
                loop.run(mode: .common, before: .distantFuture)
            }
            try runCommon()
        }
        #expect(result?.standardErrorText.contains("`common` is a pseudo-mode and cannot be run") == true)
    }
}
