import CoreFoundation
import Foundation
import Testing
@testable import LoopKit

/// LoopKit against the real CFRunLoop, live: each scenario runs once on swift-corelibs-foundation's CFRunLoop and once
/// on a `Loop`, each on a fresh thread with that thread's fresh loop (`runOnBothLoops`), and the two traces (observer
/// activities by name, callbacks, run results) must be equal line by line.
///
/// Where LoopKit departs from CF on purpose (DifferencesFromCFRunLoop.md, DESIGN §6), the test is named after the
/// difference and asserts both behaviours, CF's and LoopKit's. Timers use the real clock on both sides, so scenarios
/// use timers that are already due or an hour away: the number of passes then does not depend on the machine's load.
/// Runs that must sleep until their deadline use 200 ms, long enough that a busy machine does not reach the deadline
/// before the sleep; nothing bounds elapsed time from above.
@Suite("LoopKit against the real CFRunLoop", .serialized, .timeLimit(.minutes(1)))
struct CFDifferentialTests {
    // MARK: 1. Empty modes

    @Test func anEmptyModeFinishesAtOnceWithoutCallingObservers() {
        let traces = runOnBothLoops { loop in
            for mode: LoopMode in [.default, .tracking, "modal"] {
                loop.observe("\(mode)", .allActivities, in: mode)
            }
            loop.run(.default, for: 10)
            loop.run(.tracking, for: 10)
            loop.run("modal", for: 10)
            loop.run("never-used", for: 10)
        }
        expectSame(traces, [
            "default → finished", "tracking → finished", "modal → finished", "never-used → finished",
        ])
    }

    // MARK: 2. Timers and modes

    @Test func aRunInTrackingFiresOnlyTheCommonTimerAndDefaultFiresItsOwnLater() {
        let traces = runOnBothLoops { loop in
            loop.observe("obs", .allActivities, in: .common)
            loop.addTimer("default timer", in: .default)
            loop.addTimer("common timer", in: .common)
            loop.run(.tracking, for: 10)  // the one-shot common timer leaves tracking empty: finished
            loop.run(.default, for: 10)   // it left default too when it fired
        }
        expectSame(traces, [
            "obs entry", "obs beforeTimers", "obs beforeSources", "obs beforeWaiting", "obs afterWaiting",
            "common timer", "obs exit", "tracking → finished",
            "obs entry", "obs beforeTimers", "obs beforeSources", "obs beforeWaiting", "obs afterWaiting",
            "default timer", "obs exit", "default → finished",
        ])
    }

    @Test func aModeAddedToTheCommonSetLaterReceivesTheCommonTimersAndBlocks() {
        let traces = runOnBothLoops { loop in
            loop.addTimer("common timer", in: .common)
            loop.perform("common block", in: .common)
            loop.run("modal", for: 10)  // not common yet: empty
            loop.addCommonMode("modal")
            loop.run("modal", for: 10)
        }
        expectSame(traces, ["modal → finished", "common block", "common timer", "modal → finished"])
    }

    @Test func timersOfOneModeFireInFireDateOrderNotInTheOrderAdded() {
        // Real delays: only the order of the callbacks and the result are compared, not how many passes it took.
        let traces = runOnBothLoops { loop in
            // One reading of the clock for the three dates, so that a preemption while adding cannot reorder them.
            loop.addTimers([("third", .milliseconds(30)), ("first", .milliseconds(10)), ("second", .milliseconds(20))],
                           mode: .default, action: nil)
            loop.run(.default, for: 10)
        }
        expectSame(traces, ["first", "second", "third", "default → finished"])
    }

    /// DifferencesFromCFRunLoop.md, "`tracking` is a common mode from the start": CF's
    /// common modes hold only the default mode until someone adds one, as AppKit adds its event-tracking mode.
    @Test func trackingIsInLoopKitsCommonSetFromTheStartButCFsHoldsOnlyDefault() {
        let traces = runOnBothLoops(cfTrackingIsCommon: false) { loop in
            loop.addTimer("common timer", in: .common)
            loop.run(.tracking, for: 10)
        }
        #expect(traces.coreFoundation == ["tracking → finished"])
        #expect(traces.loopKit == ["common timer", "tracking → finished"])
    }

    // MARK: 3. Nested runs

    @Test func aRunNestedInAnotherModeHasItsOwnEntryAndExit() {
        let traces = runOnBothLoops { loop in
            loop.observe("D", .allActivities, in: .default)
            loop.observe("T", .allActivities, in: .tracking)
            loop.addTimer("tracking timer", in: .tracking)
            loop.addSource("drag start", in: [.default]) {
                loop.run(.tracking, for: 10)
            }.signal()
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
        }
        expectSame(traces, [
            "D entry", "D beforeTimers", "D beforeSources", "drag start",
            "T entry", "T beforeTimers", "T beforeSources", "T beforeWaiting", "T afterWaiting", "tracking timer",
            "T exit", "tracking → finished",
            "D exit", "default → handledSource",
        ])
    }

    @Test func aRunNestedInTheSameModeCallsItsObserversAgain() {
        let traces = runOnBothLoops { loop in
            loop.observe("D", .allActivities, in: .default)
            let inner = loop.addSource("inner", in: [.default])
            loop.addSource("outer", in: [.default]) {
                inner.signal()
                loop.run(.default, for: 10, returnAfterSourceHandled: true)
            }.signal()
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
        }
        expectSame(traces, [
            "D entry", "D beforeTimers", "D beforeSources", "outer",
            "D entry", "D beforeTimers", "D beforeSources", "inner", "D exit", "default → handledSource",
            "D exit", "default → handledSource",
        ])
    }

    @Test func anObserverIsNotReenteredByARunNestedInItsCallback() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            let nested = Recorder<Bool>()
            loop.observe("nester", .allActivities, in: .default, order: 0) { activity in
                guard activity == .entry, nested.count == 0 else { return }
                nested.append(true)
                loop.run(.default, for: 0)
            }
            loop.observe("other", .allActivities, in: .default, order: 1)
            loop.run(.default, for: 0)
        }
        expectSame(traces, [
            "nester entry",
            "other entry", "other beforeTimers", "other beforeSources", "other exit", "default → timedOut",
            "other entry", "nester beforeTimers", "other beforeTimers", "nester beforeSources", "other beforeSources",
            "nester exit", "other exit", "default → timedOut",
        ])
    }

    // MARK: 4. Stop and nesting

    @Test func aStopInsideANestedRunEndsOnlyThatRunAndTheOuterRunContinues() {
        let traces = runOnBothLoops { loop in
            loop.observe("D", .allActivities, in: .default)
            loop.observe("T", .allActivities, in: .tracking)
            loop.addSource("drag end", in: [.tracking]) { loop.stop() }.signal()
            let afterDrag = loop.addSource("after drag", in: [.default]) { loop.stop() }
            loop.addSource("drag start", in: [.default]) {
                loop.run(.tracking, for: 10)
                afterDrag.signal()
            }.signal()
            loop.run(.default, for: 10)
        }
        expectSame(traces, [
            "D entry", "D beforeTimers", "D beforeSources", "drag start",
            "T entry", "T beforeTimers", "T beforeSources", "drag end", "T exit", "tracking → stopped",
            "D beforeTimers", "D beforeSources", "after drag", "D exit", "default → stopped",
        ])
    }

    /// DifferencesFromCFRunLoop.md, "A stop that loses is not dropped": CF keeps the stop in the nested run's own
    /// state, which goes away with it; LoopKit hands the stop to the outer run.
    @Test func aStopThatLosesToHandledSourceInANestedRunIsDroppedByCFButEndsTheOuterRunInLoopKit() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("D", [.beforeWaiting, .afterWaiting], in: .default)
            loop.addSource("stopper", in: [.tracking]) { loop.stop() }.signal()
            loop.addSource("drag start", in: [.default]) {
                loop.run(.tracking, for: 10, returnAfterSourceHandled: true)
            }.signal()
            loop.run(.default, for: 0.2)
        }
        #expect(traces.coreFoundation == [
            "drag start", "stopper", "tracking → handledSource",
            "D beforeWaiting", "D afterWaiting", "default → timedOut",  // the stop is gone: it sleeps to its deadline
        ])
        #expect(traces.loopKit == ["drag start", "stopper", "tracking → handledSource", "default → stopped"])
    }

    /// A stop made by a callback before it runs the loop nested ends the run that was innermost when it was made, the
    /// outer one, as in CF: the nested run, begun after the stop, does not take it.
    @Test func aStopMadeBeforeANestedRunEndsTheOuterRunNotTheNestedOne() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("T", [.entry, .exit], in: .tracking)
            loop.addTimer("tracking timer", in: .tracking)
            loop.addSource("stop, then nest", in: [.default]) {
                loop.stop()
                loop.run(.tracking, for: 10)
            }.signal()
            loop.run(.default, for: 0.2)
        }
        expectSame(traces, [
            "stop, then nest", "T entry", "tracking timer", "T exit", "tracking → finished", "default → stopped",
        ])
    }

    // MARK: 5. Observers: order and one-shot

    @Test func observersRunLowerOrderFirstThenInTheOrderAdded() {
        let traces = runOnBothLoops { loop in
            loop.observe("o2", [.entry, .exit], in: .default, order: 2)
            loop.observe("o0", [.entry, .exit], in: .default, order: 0)
            loop.observe("o1 added first", [.entry, .exit], in: .default, order: 1)
            loop.observe("o1 added second", [.entry, .exit], in: .default, order: 1)
            loop.addSource("source").signal()
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
        }
        expectSame(traces, [
            "o0 entry", "o1 added first entry", "o1 added second entry", "o2 entry", "source",
            "o0 exit", "o1 added first exit", "o1 added second exit", "o2 exit", "default → handledSource",
        ])
    }

    @Test func aOneShotObserverIsCalledOnceThenInvalidated() {
        let traces = runOnBothLoops { loop in
            loop.observe("once", .allActivities, in: .default, repeats: false)
            loop.observe("once at exit", .exit, in: .default, repeats: false)
            loop.observe("every", [.entry, .exit], in: .default)
            let source = loop.addSource("source")
            source.signal()
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
            source.signal()
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
        }
        expectSame(traces, [
            "once entry", "every entry", "source", "once at exit exit", "every exit", "default → handledSource",
            "every entry", "source", "every exit", "default → handledSource",
        ])
    }

    /// DifferencesFromCFRunLoop.md, "Observers of equal order run in the order they joined the loop": between observers
    /// of equal order, CF goes by when each joined the mode's list, so one back-filled by `CFRunLoopAddCommonMode`
    /// comes after those already there; LoopKit goes by when each was first added to the loop.
    @Test func equalOrderObserversBackFilledIntoAModeFollowTheLoopsOrderInLoopKitButTheModesInCF() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .common)
            loop.observe("added to common first", .entry, in: .common)
            loop.observe("added to modal second", .entry, in: "modal")
            loop.addCommonMode("modal")  // back-fills the first observer into modal
            loop.run("modal", for: 0)
        }
        #expect(traces.coreFoundation == [
            "added to modal second entry", "added to common first entry", "modal → timedOut",
        ])
        #expect(traces.loopKit == [
            "added to common first entry", "added to modal second entry", "modal → timedOut",
        ])
    }

    // MARK: 6. Signalled sources

    @Test func signalledSourcesRunLowerOrderFirstThenFirstSignalledFirst() {
        let traces = runOnBothLoops { loop in
            let ordered = [("s2", 2), ("s0", 0), ("s1", 1)].map { loop.addSource($0.0, order: $0.1) }
            let tied = ["a", "b", "c"].map { loop.addSource($0, order: 5) }
            ordered.forEach { $0.signal() }
            for index in [2, 0, 1] {
                tied[index].signal()
            }
            loop.run(.default, for: 0)
        }
        expectSame(traces, ["s0", "s1", "s2", "c", "a", "b", "default → timedOut"])
    }

    @Test func returnAfterSourceHandledReturnsAfterTheFirstSourceAndTheOthersStaySignalled() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .tracking)
            loop.observe("D", .allActivities, in: .default)
            let sources = [("s2", 2), ("s0", 0), ("s1", 1)].map { loop.addSource($0.0, order: $0.1) }
            sources.forEach { $0.signal() }
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
            loop.run(.tracking, for: 0)  // another mode: the signals wait
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
            loop.run(.default, for: 0, returnAfterSourceHandled: true)  // none left
        }
        expectSame(traces, [
            "D entry", "D beforeTimers", "D beforeSources", "s0", "D exit", "default → handledSource",
            "tracking → timedOut",
            "D entry", "D beforeTimers", "D beforeSources", "s1", "D exit", "default → handledSource",
            "D entry", "D beforeTimers", "D beforeSources", "s2", "D exit", "default → handledSource",
            "D entry", "D beforeTimers", "D beforeSources", "D exit", "default → timedOut",
        ])
    }

    // MARK: 7. Blocks and modes

    @Test func aBlockForAModeThatIsNotRunningWaitsForItWithoutHoldingBackTheOthers() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.addKeepAlive(in: .tracking)
            loop.observe("D", .beforeSources, in: .default)
            loop.observe("T", .beforeSources, in: .tracking)
            loop.perform("tracking block", in: .tracking)
            loop.perform("default block", in: .default)
            loop.perform("common block", in: .common)
            loop.run(.default, for: 0)
            loop.run(.tracking, for: 0)
        }
        expectSame(traces, [
            "D beforeSources", "default block", "common block", "default → timedOut",
            "T beforeSources", "tracking block", "tracking → timedOut",
        ])
    }

    @Test func aPendingBlockKeepsItsModeAliveUntilItRuns() {
        let traces = runOnBothLoops { loop in
            loop.perform("tracking block", in: .tracking)
            loop.run(.default, for: 10)                 // nothing for default: finished at once
            loop.addSource("source", in: [.tracking]).signal()
            loop.run(.tracking, for: 10, returnAfterSourceHandled: true)
        }
        expectSame(traces, ["default → finished", "tracking block", "source", "tracking → handledSource"])
    }

    /// DifferencesFromCFRunLoop.md, "A mode emptied by its last block finishes at once": when the last block of a mode
    /// runs, CF goes to sleep anyway, as it checks for an empty mode only at the end of a pass, and so returns
    /// `timedOut` at its deadline; LoopKit does not sleep on an empty mode and returns `finished` at once.
    @Test func aModeEmptiedByItsLastBlockFinishesAtOnceInLoopKitButCFSleepsToItsDeadline() {
        let traces = runOnBothLoops { loop in
            loop.observe("T", .allActivities, in: .tracking)
            loop.perform("block", in: .tracking)
            loop.run(.tracking, for: 0.2)
        }
        #expect(traces.coreFoundation == [
            "T entry", "T beforeTimers", "T beforeSources", "block", "T beforeWaiting", "T afterWaiting", "T exit",
            "tracking → timedOut",
        ])
        #expect(traces.loopKit == [
            "T entry", "T beforeTimers", "T beforeSources", "block", "T exit", "tracking → finished",
        ])
    }

    /// DifferencesFromCFRunLoop.md, "Blocks are drained after the signalled sources even when none ran".
    @Test func aBlockQueuedByABlockRunsInTheSamePassInLoopKitButAfterTheSleepInCF() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("D", .allActivities, in: .default)
            loop.perform("first", in: .default) {
                loop.perform("queued by first", in: .default)
            }
            loop.run(.default, for: 0.2)
        }
        #expect(traces.coreFoundation == [
            "D entry", "D beforeTimers", "D beforeSources", "first", "D beforeWaiting", "D afterWaiting",
            "queued by first", "D exit", "default → timedOut",
        ])
        #expect(traces.loopKit == [
            "D entry", "D beforeTimers", "D beforeSources", "first", "queued by first", "D beforeWaiting",
            "D afterWaiting", "D exit", "default → timedOut",
        ])
    }

    /// DifferencesFromCFRunLoop.md, "First queued, first run, across nested runs": CF's drain holds the blocks it took,
    /// so a run nested in one of them runs the blocks queued since, before the older ones.
    @Test func aBlockQueuedBeforeANestedRunRunsFirstInLoopKitButAfterTheNewerOneInCF() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.perform("A", in: .default) {
                loop.perform("C, queued by A", in: .default)
                loop.run(.default, for: 0)
            }
            loop.perform("B", in: .default)
            loop.run(.default, for: 0)
        }
        #expect(traces.coreFoundation == ["A", "C, queued by A", "default → timedOut", "B", "default → timedOut"])
        #expect(traces.loopKit == ["A", "B", "C, queued by A", "default → timedOut", "default → timedOut"])
    }

    // MARK: Waking a sleeping loop

    /// DifferencesFromCFRunLoop.md, "Queued work wakes a sleeping loop": `CFRunLoopPerformBlock` only queues.
    @Test func performDoesNotWakeASleepingCFRunLoopButWakesALoop() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            let helper = startThread {
                guard waitUntil({ loop.isWaiting }) else { return }
                loop.log("helper performs")
                loop.perform("block", in: .default) { loop.stop() }
                loop.expectStillAsleepOnCoreFoundation()
            }
            loop.run(.default, for: 30)  // a hang guard
            helper.join()
        }
        #expect(traces.coreFoundation == [
            "helper performs", "still asleep after 50 ms", "helper wakes it", "block", "default → stopped",
        ])
        #expect(traces.loopKit == ["helper performs", "block", "default → stopped"])
    }

    /// DifferencesFromCFRunLoop.md, "No wake-up without a cause": CF's idiom for queued work is perform (or signal)
    /// plus `CFRunLoopWakeUp`; sent while the loop is awake, the wake-up stays in its port and ends the next sleep at
    /// once, after the block already ran: an empty pass. LoopKit's `perform` writes no wake-up to an awake loop.
    @Test func workQueuedWhileAwakeCostsCFAnEmptyPassButNotLoopKit() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("D", .allActivities, in: .default)
            loop.observe("queue", .beforeSources, in: .default, order: 1, repeats: false) { _ in
                loop.perform("block", in: .default)
                if loop.isCoreFoundation {
                    loop.wakeUp()
                }
            }
            loop.run(.default, for: 0.2)
        }
        #expect(traces.coreFoundation == [
            "D entry", "D beforeTimers", "D beforeSources", "queue beforeSources", "block",
            "D beforeWaiting", "D afterWaiting",                                         // woken for the block it ran
            "D beforeTimers", "D beforeSources", "D beforeWaiting", "D afterWaiting",  // the deadline
            "D exit", "default → timedOut",
        ])
        #expect(traces.loopKit == [
            "D entry", "D beforeTimers", "D beforeSources", "queue beforeSources", "block",
            "D beforeWaiting", "D afterWaiting", "D exit", "default → timedOut",
        ])
    }

    @Test func anExplicitWakeUpWhileAwakeEndsTheNextSleepAtOnce() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("D", .allActivities, in: .default)
            loop.observe("waker", .beforeSources, in: .default, order: 1, repeats: false) { _ in loop.wakeUp() }
            loop.run(.default, for: 0.2)
        }
        expectSame(traces, [
            "D entry", "D beforeTimers", "D beforeSources", "waker beforeSources", "D beforeWaiting", "D afterWaiting",
            "D beforeTimers", "D beforeSources", "D beforeWaiting", "D afterWaiting", "D exit", "default → timedOut",
        ])
    }

    @Test func aWakeUpWhileNoRunIsActiveIsIgnored() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("D", [.beforeWaiting, .afterWaiting], in: .default)
            loop.wakeUp()
            loop.run(.default, for: 0.2)
        }
        expectSame(traces, ["D beforeWaiting", "D afterWaiting", "default → timedOut"])
    }

    /// DifferencesFromCFRunLoop.md, "Queued work wakes a sleeping loop": `CFRunLoopSourceSignal` only marks the source.
    @Test func signallingDoesNotWakeASleepingCFRunLoopButWakesALoop() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            let source = loop.addSource("source") { loop.stop() }
            let helper = startThread {
                guard waitUntil({ loop.isWaiting }) else { return }
                loop.log("helper signals")
                source.signal()
                loop.expectStillAsleepOnCoreFoundation()
            }
            loop.run(.default, for: 30)  // a hang guard
            helper.join()
        }
        #expect(traces.coreFoundation == [
            "helper signals", "still asleep after 50 ms", "helper wakes it", "source", "default → stopped",
        ])
        #expect(traces.loopKit == ["helper signals", "source", "default → stopped"])
    }

    // MARK: 8. Run results and their precedence

    @Test func aRunThatReachesItsDeadlineTimesOutAndADeadlineAlreadyReachedMakesOnePassWithoutWaiting() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.observe("D", .allActivities, in: .default)
            loop.run(.default, for: 0.2)
            loop.run(.default, for: 0)
        }
        expectSame(traces, [
            "D entry", "D beforeTimers", "D beforeSources", "D beforeWaiting", "D afterWaiting", "D exit",
            "default → timedOut",
            "D entry", "D beforeTimers", "D beforeSources", "D exit", "default → timedOut",
        ])
    }

    @Test func handledSourceWinsOverStoppedAndTheLosingStopOfTheOutermostRunIsSpent() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.addSource("source") { loop.stop() }.signal()
            loop.run(.default, for: 10, returnAfterSourceHandled: true)
            loop.run(.default, for: 0)  // not stopped by the stop that lost
        }
        expectSame(traces, ["source", "default → handledSource", "default → timedOut"])
    }

    @Test func timedOutWinsOverStopped() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.addTimer("due timer", in: .default) { loop.stop() }
            loop.run(.default, for: 0)
        }
        expectSame(traces, ["due timer", "default → timedOut"])
    }

    @Test func stoppedWinsOverFinished() {
        let traces = runOnBothLoops { loop in
            loop.addTimer("last timer", in: .default) { loop.stop() }  // leaves the mode empty, and stops
            loop.run(.default, for: 10)
        }
        expectSame(traces, ["last timer", "default → stopped"])
    }

    @Test func aModeEmptiedByItsLastTimerFinishes() {
        let traces = runOnBothLoops { loop in
            loop.observe("D", [.entry, .exit], in: .default)
            loop.addTimer("last timer", in: .default)
            loop.run(.default, for: 10)
        }
        expectSame(traces, ["D entry", "last timer", "D exit", "default → finished"])
    }

    @Test func aStopWhileNoRunIsActiveDoesNothing() {
        let traces = runOnBothLoops { loop in
            loop.addKeepAlive(in: .default)
            loop.stop()
            loop.run(.default, for: 0)
        }
        expectSame(traces, ["default → timedOut"])
    }

    // MARK: Timers: re-arming and Foundation's convenience

    /// DifferencesFromCFRunLoop.md, "A one-shot timer re-armed from its own callback fires again": CF invalidates a
    /// one-shot timer after its callback whatever the callback did, so a new fire date set there is lost; a one-shot
    /// `LoopTimer` fires again at it.
    @Test func aOneShotTimerReArmedFromItsOwnCallbackFiresAgainInLoopKitButCFInvalidatesIt() {
        let coreFoundation = traceOnFreshThread { trace in
            let timer = CFRunLoopTimerCreateWithHandler(
                kCFAllocatorSystemDefault, CFAbsoluteTimeGetCurrent(), 0, 0, 0) { timer in
                trace.append("one-shot timer")
                if trace.count == 1 {
                    CFRunLoopTimerSetNextFireDate(timer, CFAbsoluteTimeGetCurrent())
                }
            }
            CFRunLoopAddTimer(CFRunLoopGetCurrent(), timer, kCFRunLoopDefaultMode)
            let result = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 10, false)  // 10 s: a hang guard
            trace.append("default → \(result == .finished ? "finished" : "not finished")")
        }
        #expect(coreFoundation == ["one-shot timer", "default → finished"])

        let loopKit = traceOnFreshThread { trace in
            let loop = Loop.current
            loop.add(LoopTimer(fireAt: loop.now) { timer in
                trace.append("one-shot timer")
                if trace.count == 1 {
                    timer.setNextFireDate(loop.now)
                }
            }, forMode: .default)
            trace.append("default → \(loop.run(mode: .default, before: loop.now + .seconds(10)))")
        }
        #expect(loopKit == ["one-shot timer", "one-shot timer", "default → finished"])
    }



    /// DifferencesFromCFRunLoop.md, "The first fire is `now + interval`": Foundation's `Timer(timeInterval:repeats:
    /// block:)` on Linux is dated now, so it fires as soon as its run loop runs; CF's own timers fire at the date they
    /// are given, and a `LoopTimer(timeInterval:)` first fires one interval after it is added.
    @Test func foundationsIntervalTimerFiresAtOnceButALoopTimerWaitsItsInterval() {
        let coreFoundation = traceOnFreshThread { trace in
            let foundationTimer = Timer(timeInterval: 3600, repeats: false) { _ in
                trace.append("Foundation timer, 1 h")
                CFRunLoopStop(CFRunLoopGetCurrent())
            }
            RunLoop.current.add(foundationTimer, forMode: .default)
            let cfTimer = CFRunLoopTimerCreateWithHandler(
                kCFAllocatorSystemDefault, CFAbsoluteTimeGetCurrent() + 3600, 0, 0, 0) { _ in
                trace.append("CF timer, 1 h")  // dated by its caller: it does not fire
            }
            CFRunLoopAddTimer(CFRunLoopGetCurrent(), cfTimer, kCFRunLoopDefaultMode)
            let result = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 10, false)  // 10 s: a hang guard
            trace.append("default → \(result == .stopped ? "stopped" : "not stopped")")
        }
        #expect(coreFoundation == ["Foundation timer, 1 h", "default → stopped"])

        let loopKit = traceOnFreshThread { trace in
            let loop = Loop.current
            let timer = LoopTimer(timeInterval: 3600) { _ in trace.append("LoopTimer, 1 h") }
            let added = loop.now
            loop.add(timer, forMode: .default)
            trace.append("default → \(loop.run(mode: .default, before: loop.now + .milliseconds(50)))")
            trace.append("first fire ≥ 1 h after adding: \(timer.fireDate! - added >= .seconds(3600))")
        }
        #expect(loopKit == ["default → timedOut", "first fire ≥ 1 h after adding: true"])
    }
}

/// Asserts that both sides wrote `expected`, so that a mismatch shows which side departed from it.
private func expectSame(_ traces: DifferentialTraces, _ expected: [String],
                        sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(traces.coreFoundation == traces.loopKit, "CF and LoopKit differ", sourceLocation: sourceLocation)
    #expect(traces.loopKit == expected, "LoopKit", sourceLocation: sourceLocation)
    #expect(traces.coreFoundation == expected, "CF", sourceLocation: sourceLocation)
}

extension DifferentialLoop {
    /// On CF, from a helper thread after queueing work for the sleeping loop: checks that the work did not wake it,
    /// then wakes it as a CF caller must. A busy machine can only make the loop look more asleep, so the check cannot
    /// fail for want of time; on LoopKit it does nothing, the work having woken the loop itself.
    func expectStillAsleepOnCoreFoundation() {
        guard self.isCoreFoundation else { return }
        usleep(50_000)
        if self.isWaiting {
            self.log("still asleep after 50 ms")
        }
        self.log("helper wakes it")
        self.wakeUp()
    }
}
