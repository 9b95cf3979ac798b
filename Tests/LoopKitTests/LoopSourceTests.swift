import Synchronization
import Testing
@testable import LoopKit

/// Signalled sources (CF's version-0 sources), on a `ManualLoopClock`: `runOnePass()` is one non-blocking pass.
@Suite("Signalled sources (CF version 0)")
struct LoopSourceTests {
    // MARK: Signalling and coalescing

    @Test func aSourceThatWasNeverSignalledDoesNotRun() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        loop.add(LoopSource { _ in calls.append(1) }, forMode: .default)
        loop.runOnePass()
        loop.runOnePass()
        #expect(calls.count == 0)
    }

    @Test func aSignalledSourceRunsOnceOnTheNextPass() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        source.signal()
        #expect(source.isSignalled)
        loop.runOnePass()
        #expect(calls.count == 1)
        #expect(!source.isSignalled)
        loop.runOnePass()
        #expect(calls.count == 1)
    }

    @Test func severalSignalsBeforeTheSourceRunsCoalesceIntoOneCall() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        for _ in 0..<5 {
            source.signal()
        }
        loop.runOnePass()
        loop.runOnePass()
        #expect(calls.count == 1)
    }

    @Test func signalsFromAnotherThreadBeforeTheSourceRunsCoalesceIntoOneCall() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        onAnotherThread {
            for _ in 0..<100 {
                source.signal()
            }
        }
        loop.runOnePass()
        loop.runOnePass()
        #expect(calls.count == 1)
    }

    @Test func theSignalledFlagIsClearedBeforeTheCallbackRuns() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let flagInCallback = Recorder<Bool>()
        let source = LoopSource { source in flagInCallback.append(source.isSignalled) }
        loop.add(source, forMode: .default)
        source.signal()
        loop.runOnePass()
        #expect(flagInCallback.elements == [false])
    }

    @Test func aSourceThatSignalsItselfRunsAgainOnTheNextPassNotInTheSamePass() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { source in
            calls.append(1)
            if calls.count < 3 {
                source.signal()
            }
        }
        loop.add(source, forMode: .default)
        source.signal()
        loop.runOnePass()
        #expect(calls.count == 1)
        #expect(source.isSignalled)
        loop.runOnePass()
        #expect(calls.count == 2)
        loop.runOnePass()
        #expect(calls.count == 3)
        #expect(!source.isSignalled)
        loop.runOnePass()
        #expect(calls.count == 3)
    }

    @Test func signallingAnInvalidatedSourceDoesNothing() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        source.invalidate()
        source.signal()
        #expect(!source.isSignalled)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(calls.count == 0)
    }

    // MARK: Order

    @Test func signalledSourcesRunLowerOrderFirst() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<Int>()
        let sources = [2, 0, 1].map { order in LoopSource(order: order) { _ in trace.append(order) } }
        for source in sources {
            loop.add(source, forMode: .default)
        }
        for source in sources {  // order 2 is signalled first, yet runs last
            source.signal()
        }
        loop.runOnePass()
        #expect(trace.elements == [0, 1, 2])
    }

    @Test func signalledSourcesOfEqualOrderRunInTheOrderTheyWereSignalled() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let sources = ["a", "b", "c"].map { name in LoopSource { _ in trace.append(name) } }
        for source in sources {
            loop.add(source, forMode: .default)
        }
        sources[2].signal()
        sources[0].signal()
        sources[1].signal()
        loop.runOnePass()
        #expect(trace.elements == ["c", "a", "b"])
    }

    @Test func orderSortsFirstAndSignalOrderBreaksTies() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let late1 = LoopSource(order: 1) { _ in trace.append("late1") }
        let early1 = LoopSource(order: 1) { _ in trace.append("early1") }
        let late0 = LoopSource(order: 0) { _ in trace.append("late0") }
        let early0 = LoopSource(order: 0) { _ in trace.append("early0") }
        for source in [late1, early1, late0, early0] {
            loop.add(source, forMode: .default)
        }
        for source in [early1, early0, late1, late0] {
            source.signal()
        }
        loop.runOnePass()
        #expect(trace.elements == ["early0", "late0", "early1", "late1"])
    }

    // MARK: Schedule and cancel

    @Test func addingASourceToAModeCallsScheduleWithThatMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(
            onSchedule: { _, mode in trace.append("schedule \(mode)") },
            onUnschedule: { _, mode in trace.append("cancel \(mode)") },
            { _ in trace.append("perform") }
        )
        loop.add(source, forMode: .default)
        #expect(trace.elements == ["schedule default"])
    }

    @Test func addingASourceToAModeItIsAlreadyInDoesNotCallScheduleAgain() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(onSchedule: { _, mode in trace.append("schedule \(mode)") }, { _ in })
        loop.add(source, forMode: .default)
        loop.add(source, forMode: .default)
        #expect(trace.elements == ["schedule default"])
    }

    @Test func addingASourceToCommonCallsScheduleForEachCommonMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(onSchedule: { _, mode in trace.append("schedule \(mode)") }, { _ in })
        loop.add(source, forMode: .common)
        #expect(trace.elements.sorted() == ["schedule default", "schedule tracking"])
    }

    @Test func removingASourceFromAModeCallsCancelWithThatMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(onUnschedule: { _, mode in trace.append("cancel \(mode)") }, { _ in })
        loop.add(source, forMode: .default)
        loop.add(source, forMode: .tracking)
        loop.remove(source, forMode: .tracking)
        #expect(trace.elements == ["cancel tracking"])
        #expect(loop.contains(source, inMode: .default))
        #expect(source.isValid)
    }

    @Test func removingASourceFromAModeItIsNotInDoesNotCallCancel() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(onUnschedule: { _, mode in trace.append("cancel \(mode)") }, { _ in })
        loop.add(source, forMode: .default)
        loop.remove(source, forMode: .tracking)
        #expect(trace.elements.isEmpty)
    }

    @Test func invalidatingASourceCallsCancelForEveryModeItIsIn() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(onUnschedule: { _, mode in trace.append("cancel \(mode)") }, { _ in })
        loop.add(source, forMode: .default)
        loop.add(source, forMode: "custom")
        source.invalidate()
        source.invalidate()
        #expect(trace.elements.sorted() == ["cancel custom", "cancel default"])
        #expect(!source.isValid)
        #expect(!loop.contains(source, inMode: .default))
    }

    @Test func invalidatingASourceThatWasNeverAddedCallsNoCallback() {
        let trace = Recorder<String>()
        let source = LoopSource(
            onSchedule: { _, mode in trace.append("schedule \(mode)") },
            onUnschedule: { _, mode in trace.append("cancel \(mode)") },
            { _ in trace.append("perform") }
        )
        source.invalidate()
        #expect(!source.isValid)
        #expect(trace.elements.isEmpty)
    }

    // MARK: Modes

    @Test func aSourceKeepsItsModeAliveEvenWhenNotSignalled() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        loop.add(LoopSource { _ in }, forMode: .default)
        #expect(loop.runOnePass() == .timedOut)
    }

    @Test func removingASourceFromItsOnlyModeLeavesTheModeFinished() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let source = LoopSource { _ in }
        loop.add(source, forMode: .default)
        source.signal()
        loop.remove(source, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
    }

    @Test func aSignalWhileTheLoopRunsAnotherModeIsKeptUntilTheLoopRunsTheSourcesMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        loop.add(LoopSource { _ in }, forMode: .tracking)  // keeps tracking alive
        source.signal()
        loop.runOnePass(in: .tracking)
        loop.runOnePass(in: .tracking)
        #expect(calls.count == 0)
        #expect(source.isSignalled)
        loop.runOnePass(in: .default)
        #expect(calls.count == 1)
    }

    @Test func aSignalDuringANestedRunInAnotherModeRunsWhenTheOuterRunResumes() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource { _ in trace.append("source") }
        loop.add(source, forMode: .default)
        loop.add(LoopSource { _ in }, forMode: .tracking)  // keeps tracking alive
        let trigger = LoopSource { _ in
            trace.append("tracking begins")
            source.signal()
            loop.runOnePass(in: .tracking)
            trace.append("tracking ends")
        }
        loop.add(trigger, forMode: .default)
        trigger.signal()
        loop.run(mode: .default, before: clock.now + .seconds(1))
        #expect(trace.elements == ["tracking begins", "tracking ends", "source"])
    }

    @Test func aSourceInSeveralModesRunsInWhicheverOfThemTheLoopRunsNext() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .common)
        source.signal()
        loop.runOnePass(in: .tracking)
        #expect(calls.count == 1)
        loop.runOnePass(in: .default)
        #expect(calls.count == 1)
    }

    @Test func aSignalBeforeTheSourceIsAddedToALoopIsKept() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        source.signal()
        loop.add(source, forMode: .default)
        loop.runOnePass()
        #expect(calls.count == 1)
    }

    @Test func aSignalWhileTheSourceIsInNoModeIsKeptUntilItIsAddedAgain() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        loop.add(LoopSource { _ in }, forMode: .default)  // keeps default alive while `source` is out
        loop.remove(source, forMode: .default)
        source.signal()
        loop.runOnePass()
        #expect(calls.count == 0)
        loop.add(source, forMode: .default)
        loop.runOnePass()
        #expect(calls.count == 1)
    }

    @Test func aSourceThatAnEarlierCallbackRemovesFromTheRunningModeKeepsItsSignalForItsOtherModes() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let later = LoopSource(order: 1) { _ in trace.append("later") }
        let earlier = LoopSource(order: 0) { _ in
            trace.append("earlier")
            loop.remove(later, forMode: .default)
        }
        loop.add(earlier, forMode: .default)
        loop.add(later, forMode: .default)
        loop.add(later, forMode: .tracking)
        earlier.signal()
        later.signal()
        loop.runOnePass(in: .default)
        #expect(trace.elements == ["earlier"])
        #expect(later.isSignalled)
        loop.runOnePass(in: .tracking)
        #expect(trace.elements == ["earlier", "later"])
    }

    @Test func aSourceSignalledInTheSamePassRunsInsideANestedRunStartedByAnEarlierCallback() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let dragEnd = LoopSource(order: 1) { _ in trace.append("drag end") }
        let dragStart = LoopSource(order: 0) { _ in
            trace.append("tracking begins")
            loop.runOnePass(in: .tracking)
            trace.append("tracking ends")
        }
        loop.add(dragStart, forMode: .default)
        loop.add(dragEnd, forMode: .common)
        dragStart.signal()
        dragEnd.signal()
        loop.runOnePass()
        #expect(trace.elements == ["tracking begins", "drag end", "tracking ends"])
    }

    // MARK: returnAfterSourceHandled

    @Test func returnAfterSourceHandledReturnsHandledSourceAfterASignalledSource() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let source = LoopSource { _ in }
        loop.add(source, forMode: .default)
        source.signal()
        let result = loop.run(mode: .default, before: start + .seconds(3600), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(clock.now == start)  // it returned without "sleeping" toward the deadline
    }

    @Test func withoutReturnAfterSourceHandledTheRunGoesOnAfterASignalledSource() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        let source = LoopSource { _ in calls.append(1) }
        loop.add(source, forMode: .default)
        source.signal()
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .timedOut)
        #expect(calls.count == 1)
    }

    @Test func returnAfterSourceHandledDoesNotReturnAfterATimerAlone() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<Int>()
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in fired.append(1) }, forMode: .default)
        loop.add(LoopSource { _ in }, forMode: .default)  // keeps the mode alive after the timer
        let result = loop.run(mode: .default, before: clock.now + .milliseconds(20), returnAfterSourceHandled: true)
        #expect(result == .timedOut)
        #expect(fired.count == 1)
    }

    @Test func returnAfterSourceHandledDoesNotReturnAfterABlockAlone() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<Int>()
        loop.add(LoopSource { _ in }, forMode: .default)  // keeps the mode alive after the block
        loop.perform { ran.append(1) }
        let result = loop.run(mode: .default, before: clock.now + .milliseconds(20), returnAfterSourceHandled: true)
        #expect(result == .timedOut)
        #expect(ran.count == 1)
    }

    // MARK: Invalidation

    @Test func aSourceInvalidatedInsideItsOwnCallbackNeverRunsAgainAndLeavesItsModeFinished() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(onUnschedule: { _, mode in trace.append("cancel \(mode)") }) { source in
            trace.append("perform")
            source.invalidate()
            source.signal()
        }
        loop.add(source, forMode: .default)
        source.signal()
        loop.runOnePass()
        #expect(trace.elements == ["perform", "cancel default"])
        #expect(!source.isValid)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(trace.elements == ["perform", "cancel default"])
    }

    @Test func aSignalledSourceInvalidatedByAnEarlierCallbackDoesNotRun() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let later = LoopSource(order: 1) { _ in trace.append("later") }
        let earlier = LoopSource(order: 0) { _ in
            trace.append("earlier")
            later.invalidate()
        }
        loop.add(earlier, forMode: .default)
        loop.add(later, forMode: .default)
        later.signal()
        earlier.signal()
        loop.runOnePass()
        loop.runOnePass()
        #expect(trace.elements == ["earlier"])
    }

    @Test func aSourceInvalidatedFromAnotherThreadCallsCancelOnTheLoopThreadAndNeverRuns() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let cancelledOnLoopThread = Recorder<Bool>()
        let source = LoopSource(onUnschedule: { _, _ in cancelledOnLoopThread.append(loop.isCurrent) }) { _ in
            trace.append("perform")
        }
        loop.add(source, forMode: .default)
        source.signal()
        onAnotherThread { source.invalidate() }
        #expect(!source.isValid)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(trace.elements.isEmpty)
        #expect(cancelledOnLoopThread.elements == [true])
    }

    // MARK: Preconditions

    @Test func addingAnInvalidatedItemAddsNothingAndSaysSo() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let source = LoopSource { _ in }
        source.invalidate()
        #expect(loop.add(source, forMode: .default) == false)
        #expect(!loop.contains(source, inMode: .default))
        // A one-shot timer re-added from another thread races its own fire: the result tells, with no trap.
        let timer = LoopTimer(interval: .milliseconds(1)) { _ in }
        #expect(loop.add(timer, forMode: .default))
        loop.run(mode: .default, before: loop.now + .seconds(1))
        #expect(!timer.isValid)
        #expect(loop.add(timer, forMode: .default) == false)
        let observer = LoopObserver(activities: .entry) { _, _ in }
        observer.invalidate()
        #expect(loop.add(observer, forMode: .default) == false)
        let link = LoopDisplayLink { _, _ in }
        link.invalidate()
        #expect(loop.add(link, forMode: .default) == false)
    }

    @Test func addingASourceToASecondLoopTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let first = try Loop(clock: ManualLoopClock())
            let second = try Loop(clock: ManualLoopClock())
            let source = LoopSource { _ in }
            first.add(source, forMode: .default)
            withExtendedLifetime(first) {
                _ = second.add(source, forMode: .default)
            }
        }
        #expect(result?.standardErrorText.contains("this LoopSource already belongs to another loop") == true)
    }
}

/// Signalled sources with real threads and the real clock: order and conditions only, never elapsed-time bounds.
@Suite("Signalled sources across threads", .serialized, .timeLimit(.minutes(1)))
struct LoopSourceThreadTests {
    /// CF's `CFRunLoopSourceSignal` does not wake a sleeping loop (the caller must `CFRunLoopWakeUp`); LoopKit's does.
    @Test func signallingFromAnotherThreadWakesASleepingLoop() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let ranOnLoopThread = Recorder<Bool>()
        let source = LoopSource { _ in ranOnLoopThread.append(loop.isCurrent) }
        loop.add(source, forMode: .default)
        let signaller = startThread {
            // If the loop never sleeps, give up: the run's deadline (a hang guard) then ends the test.
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            source.signal()
        }
        defer { signaller.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(ranOnLoopThread.elements == [true])
    }

    @Test func signalsFromSeveralThreadsAtOnceAreNeverLost() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let threadCount = 4
        let signalsPerThread = 500
        let finishedThreads = Atomic<Int>(0)
        let calls = Recorder<Bool>()
        let source = LoopSource { _ in calls.append(loop.isCurrent) }
        loop.add(source, forMode: .default)
        let signallers = (0..<threadCount).map { _ in
            startThread {
                for _ in 0..<signalsPerThread {
                    source.signal()
                }
                finishedThreads.add(1, ordering: .releasing)
                source.signal()  // after the count: the last of these must make the source run once more
            }
        }
        let hangGuard = loop.now + .seconds(30)
        while finishedThreads.load(ordering: .acquiring) < threadCount || source.isSignalled, loop.now < hangGuard {
            loop.run(mode: .default, before: hangGuard, returnAfterSourceHandled: true)
        }
        // A signaller may be between its count and its last signal: once all have ended, that signal runs too.
        signallers.forEach { $0.join() }
        while source.isSignalled, loop.now < hangGuard {
            loop.run(mode: .default, before: hangGuard, returnAfterSourceHandled: true)
        }
        #expect(finishedThreads.load(ordering: .acquiring) == threadCount)
        #expect(!source.isSignalled)
        #expect(calls.count >= 1)
        #expect(calls.count <= threadCount * (signalsPerThread + 1))
        #expect(calls.elements.allSatisfy { $0 })
    }

    @Test func invalidatingFromAnotherThreadWhileTheLoopSleepsFinishesItsRun() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let source = LoopSource(
            onUnschedule: { _, mode in trace.append("cancel \(mode) on loop thread: \(loop.isCurrent)") },
            { _ in trace.append("perform") }
        )
        loop.add(source, forMode: .default)
        let invalidator = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            source.invalidate()
        }
        defer { invalidator.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        #expect(result == .finished)
        #expect(trace.elements == ["cancel default on loop thread: true"])
    }

    @Test func aSourceAddedAndSignalledFromAnotherThreadRunsOnTheSleepingLoop() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let ranOnLoopThread = Recorder<Bool>()
        loop.add(LoopSource { _ in }, forMode: .default)  // keeps the mode alive until the other thread adds
        let helper = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            let source = LoopSource { _ in ranOnLoopThread.append(loop.isCurrent) }
            loop.add(source, forMode: .default)
            source.signal()
        }
        defer { helper.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(ranOnLoopThread.elements == [true])
    }
}
