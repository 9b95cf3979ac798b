import CLoopKitSystem
import Dispatch
import Testing
@testable import LoopKit

@Suite("Stop and nested runs")
struct LoopStopAndNestingTests {
    @Test func stopWhileTheLoopIsNotRunningIsANoOp() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        loop.stop()
        loop.stop()
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(5)) == .timedOut)
    }

    @Test func stopFromACallbackEndsTheRunWithStoppedAfterThePass() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: .exit) { _, _ in trace.append("exit") }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in
            loop.stop()
            trace.append("timer")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        #expect(trace.elements == ["timer", "exit"])
    }

    @Test func stopEndsOnlyTheInnermostRunAndTheOuterRunContinuesInItsMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.entry, .exit]) { _, activity in trace.append("default \(activity)") },
                 forMode: .default)
        loop.add(LoopObserver(activities: [.entry, .exit]) { _, activity in trace.append("tracking \(activity)") },
                 forMode: .tracking)
        // A drag: the default-mode handler runs the loop in tracking until a tracking timer stops it.
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            trace.append("drag start")
            let result = loop.run(mode: .tracking, before: .distantFuture)
            trace.append("drag end: \(result)")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(30)) { _ in loop.stop() }, forMode: .tracking)
        loop.add(LoopTimer(interval: .milliseconds(50)) { _ in trace.append("default timer") }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        let result = loop.run(mode: .default, before: clock.now + .milliseconds(100))
        #expect(result == .timedOut)
        #expect(trace.elements == [
            "default entry", "drag start", "tracking entry", "tracking exit", "drag end: stopped",
            "default timer", "default exit",
        ])
    }

    @Test func aStopMadeBeforeACallbackNestsEndsTheOuterRunOnceTheNestedOneReturns() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .tracking)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            loop.stop()  // the default run's stop: the tracking run begun below must not take it
            let result = loop.run(mode: .tracking, before: clock.now + .milliseconds(5))
            trace.append("tracking: \(result)")
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        #expect(trace.elements == ["tracking: timedOut"])
    }

    @Test func stopsForTwoNestedRunsEachEndTheirOwnRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in loop.stop() }, forMode: .tracking)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            loop.stop()  // for the default run, pending while the tracking run below gets its own
            let result = loop.run(mode: .tracking, before: .distantFuture)
            trace.append("tracking: \(result)")
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        #expect(trace.elements == ["tracking: stopped"])
    }

    @Test func aCallbackMayRunTheLoopNestedInTheSameMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            trace.append("outer timer")
            loop.run(mode: .default, before: clock.now + .milliseconds(10))
            trace.append("nested run returned")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(15)) { _ in trace.append("inner timer") }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(30))
        #expect(trace.elements == ["outer timer", "inner timer", "nested run returned"])
    }

    @Test func callbacksMayAddRemoveAndInvalidateAnyItemIncludingThemselves() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let victim = LoopTimer(interval: .milliseconds(20)) { _ in trace.append("victim") }
        let source = LoopSource { source in
            trace.append("source")
            source.invalidate()
        }
        loop.add(victim, forMode: .default)
        loop.add(source, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { timer in
            trace.append("killer")
            victim.invalidate()
            loop.remove(timer, forMode: .default)
            loop.add(LoopTimer(interval: .milliseconds(5)) { _ in trace.append("newcomer") }, forMode: .default)
            source.signal()
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(trace.elements == ["killer", "source", "newcomer"])
        #expect(!victim.isValid)
        #expect(!source.isValid)
    }
}

@Suite("Threads, wake-ups and the thread helper", .serialized, .timeLimit(.minutes(1)))
struct LoopThreadingTests {
    @Test func currentIsOneLoopPerThreadAndDiffersBetweenThreads() {
        let here = Loop.current
        #expect(Loop.current === here)
        #expect(here.isCurrent)
        let other = Recorder<ObjectIdentifier>()
        onAnotherThread {
            let loop = Loop.current
            other.append(ObjectIdentifier(loop))
            other.append(ObjectIdentifier(Loop.current))
            precondition(!here.isCurrent)
        }
        #expect(other.elements.count == 2)
        #expect(other.elements[0] == other.elements[1])
        #expect(other.elements[0] != ObjectIdentifier(here))
    }

    @Test func aLoopThreadHasOneMicrosecondOfTimerSlackAndAShortSchedulerSlice() throws {
        let thread = try LoopThread(name: "test-tuned")
        defer { thread.shutdownAndJoin() }
        let settings = Recorder<Int64>()
        let done = DispatchSemaphore(value: 0)
        thread.loop.perform {
            settings.append(Int64(cloopkit_timer_slack()))
            settings.append(cloopkit_scheduler_slice())
            done.signal()
        }
        done.wait()
        #expect(settings.elements.first == 1_000)
        // Kernels before 6.12 have no custom slice and report 0 for an ordinary thread.
        #expect(settings.elements.last == 500_000 || settings.elements.last == 0)
    }

    @Test func theMainLoopIsReachableFromAnyThreadButIsNotTheirs() {
        let seen = Recorder<Bool>()
        onAnotherThread {
            let main = Loop.main
            seen.append(main === Loop.main)
            seen.append(main.isCurrent)
            seen.append(Loop.current === main)
        }
        #expect(seen.elements == [true, false, false])
    }

    @Test func aThreadsLoopGoesAwayWhenTheThreadExits() {
        final class WeakBox: @unchecked Sendable { weak var loop: Loop? }
        let box = WeakBox()
        onAnotherThread {
            box.loop = Loop.current
            precondition(box.loop != nil)
        }
        #expect(box.loop == nil)
    }

    @Test func performFromAnotherThreadWakesASleepingLoop() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let ran = Recorder<String>()
        let producer = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.perform {
                ran.append("block")
                loop.stop()
            }
        }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        producer.join()
        #expect(result == .stopped)
        #expect(ran.elements == ["block"])
    }

    @Test func stopFromAnotherThreadEndsASleepingRun() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let stopper = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.stop()
        }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        stopper.join()
        #expect(result == .stopped)
    }

    @Test func wakeUpFromAnotherThreadMakesTheLoopPassAgain() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let woke = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: .afterWaiting) { _, activity in
            woke.append(activity)
            loop.stop()
        }, forMode: .default)
        let waker = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.wakeUp()
        }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        waker.join()
        #expect(result == .stopped)
        #expect(woke.elements == [.afterWaiting])
    }

    @Test func aTimerAddedFromAnotherThreadToASleepingLoopFires() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let fired = Recorder<LoopInstant>()
        let start = loop.now
        let adder = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.add(LoopTimer(interval: .milliseconds(5)) { _ in
                fired.append(loop.now)
                loop.stop()
            }, forMode: .default)
        }
        let result = loop.run(mode: .default, before: start + .seconds(30))
        adder.join()
        #expect(result == .stopped)
        #expect(fired.count == 1)
    }

    @Test func workQueuedWhileTheLoopIsNotAsleepWritesNoWakeUp() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        for _ in 0..<1000 {
            loop.wakeUp()
            loop.perform {}
        }
        #expect(loop.counters.wakeUpWrites == 0)
        let ran = Recorder<Int>()
        loop.perform { ran.append(1) }
        loop.run(mode: .default, before: loop.now)
        #expect(ran.elements == [1])
        #expect(loop.counters.wakeUpWrites == 0)
    }

    /// Wake-ups made while the loop is awake cost nothing: its pass takes the work without a write or a read.
    @Test func manyWakeUpsToALoopThatIsAwakeCostNoWriteAndNoRead() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let before = loop.counters
        onAnotherThread {
            for _ in 0..<10_000 {
                loop.perform {}
                loop.wakeUp()
            }
        }
        loop.run(mode: .default, before: loop.now)
        let spent = loop.counters.since(before)
        #expect(spent.wakeUpWrites == 0)  // the loop was never asleep: its pass took the work without a wake-up
        #expect(spent.wakeUpDrains == 0)
    }

    /// Many wake-ups made while the loop sleeps cost one write per sleep they end and one read per write, not one
    /// per call.
    @Test func manyWakeUpsToASleepingLoopCostOneWriteAndOneReadPerSleep() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let before = loop.counters
        let producer = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            for _ in 0..<10_000 {
                loop.perform {}
                loop.wakeUp()
            }
            loop.perform { loop.stop() }
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .stopped)
        producer.join()
        let spent = loop.counters.since(before)
        #expect(spent.wakeUpWrites >= 1)
        #expect(spent.wakeUpWrites <= spent.blockingWaits, "at most one write per sleep")
        #expect(spent.wakeUpDrains <= spent.wakeUpWrites, "at most one read per write")
    }

    @Test func anIdleLoopSleepsUntilItsDeadlineWithoutWakingInBetween() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let wakes = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: .afterWaiting) { _, activity in wakes.append(activity) }, forMode: .default)
        let start = loop.now
        #expect(loop.run(mode: .default, before: start + .milliseconds(200)) == .timedOut)
        #expect(wakes.count == 1)
        #expect(loop.counters.blockingWaits == 1)
        #expect(loop.now - start >= .milliseconds(200))
    }

    @Test func aLoopStopsWhileNestedOnTheRealClock() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .common)
        let trace = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            trace.append("nested start")
            let stopper = startThread {
                guard waitUntil({ loop.isWaiting }) else { return }
                loop.stop()
            }
            trace.append("nested: \(loop.run(mode: .tracking, before: loop.now + .seconds(30)))")
            stopper.join()
            loop.stop()
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .stopped)
        #expect(trace.elements == ["nested start", "nested: stopped"])
    }

    @Test func runningALoopOnAnotherThreadIsAPreconditionFailure() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let loop = try Loop()
            loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .default)
            onAnotherThread {
                runNoAsync(loop)
            }
        }
        #expect(result?.standardErrorText.contains("must be called on the loop's own thread") == true)
    }

    @Test func theThreadHelperRunsBlocksAndShutsDown() throws {
        let thread = try LoopThread(name: "helper-test")
        let ran = Recorder<Int>()
        for index in 0..<100 {
            thread.perform { ran.append(index) }
        }
        thread.shutdownAndJoin()
        #expect(ran.elements == Array(0..<100))
    }

    @Test func theThreadHelperKeepsItsLoopAliveAndAsleepWithNothingInIt() throws {
        let thread = try LoopThread()
        #expect(waitUntil { thread.loop.isWaiting })
        thread.shutdownAndJoin()
    }

    @Test func aShutdownBeforeTheLoopRunsIsNotLost() throws {
        for _ in 0..<20 {
            let thread = try LoopThread()
            thread.shutdown()
            thread.join()
        }
    }

    @Test func aPlainStopDoesNotEndTheThreadHelper() throws {
        let thread = try LoopThread()
        #expect(waitUntil { thread.loop.isWaiting })
        thread.loop.stop()
        let ran = Recorder<Int>()
        thread.perform { ran.append(1) }
        #expect(waitUntil { ran.count == 1 })
        thread.shutdownAndJoin()
    }

    @Test func performOnAnEndedThreadHelperIsAPreconditionFailure() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread()
            thread.shutdownAndJoin()
            thread.perform {}
        }
        #expect(result?.standardErrorText.contains("the loop has ended") == true)
    }
}

@available(*, noasync)
func runNoAsync(_ loop: Loop) {
    loop.run(mode: .default, before: .distantFuture)
}
