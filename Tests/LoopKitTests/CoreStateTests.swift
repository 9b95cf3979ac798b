#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

/// The cross-thread state machine seen from the user's side: no hang after a nested run, no stale wake-ups, blocks in
/// FIFO order across nesting, CF's `returnAfterSourceHandled`. Real threads assert order and conditions only.
@Suite("Core state: wake-ups, nesting and order", .serialized, .timeLimit(.minutes(1)))
struct CoreStateTests {
    // MARK: Shutdown after a nested run

    @Test func aShutdownWhileTheLoopRunsNestedInABlockEndsTheThread() throws {
        let thread = try LoopThread()
        let loop = thread.loop
        let nested = Recorder<RunResult>()
        loop.perform {
            loop.perform {
                nested.append(loop.run(mode: .default, before: loop.now + .seconds(30)))
            }
        }
        #expect(waitUntil { loop.isWaiting })
        thread.shutdownAndJoin()  // before the fix: the outer pass slept on a drained pipe, for ever
        #expect(nested.elements == [.stopped])
    }

    @Test func aShutdownIsSeenByEveryNestingLevelBeforeItSleeps() throws {
        let thread = try LoopThread()
        let loop = thread.loop
        let results = Recorder<String>()
        loop.perform {
            let inner = loop.run(mode: .tracking, before: .distantFuture)  // tracking is empty: finished at once
            results.append("tracking \(inner)")
            loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
            results.append("nested \(loop.run(mode: .tracking, before: .distantFuture))")
        }
        #expect(waitUntil { results.count == 1 && loop.isWaiting })
        thread.shutdownAndJoin()
        #expect(results.elements == ["tracking finished", "nested stopped"])
    }

    @Test func blocksAndSignalsQueuedDuringANestedRunAreNeverLeftAsleep() throws {
        for _ in 0..<50 {
            let thread = try LoopThread()
            let loop = thread.loop
            let ran = Recorder<String>()
            let source = LoopSource { _ in ran.append("signal") }
            loop.add(source, forMode: .common)
            loop.perform {
                // The nested run drains the wake-up channel; what arrives meanwhile must still be served.
                loop.run(mode: .tracking, before: loop.now + .milliseconds(2))
            }
            onAnotherThread {
                loop.perform { ran.append("block") }
                source.signal()
            }
            #expect(waitUntil { ran.count == 2 })
            thread.shutdownAndJoin()
        }
    }

    // MARK: Stale wake-ups

    @Test func workQueuedBeforeRunIsHandledInTheFirstPassAndDoesNotEndTheFirstSleep() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
        let source = LoopSource { _ in trace.append("source") }
        loop.add(source, forMode: .default)
        loop.perform { trace.append("block") }
        source.signal()
        let start = loop.now
        #expect(loop.run(mode: .default, before: start + .milliseconds(300)) == .timedOut)
        #expect(trace.elements == ["block", "source", "beforeWaiting", "afterWaiting"])
        #expect(loop.now - start >= .milliseconds(300))
        #expect(loop.counters.wakeUpWrites == 0)
        #expect(loop.counters.emptyWakeUps == 0)
    }

    @Test func aSignalToASleepingLoopRunsItsSourceInTheNextPassWithoutAnEmptyWakeUp() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
        let drainsAtCallback = Recorder<UInt64>()
        let source = LoopSource { _ in
            trace.append("source")
            drainsAtCallback.append(loop.counters.wakeUpDrains)
            loop.stop()
        }
        loop.add(source, forMode: .default)
        let before = loop.counters
        let producer = startThread {
            _ = waitUntil { loop.isWaiting }
            source.signal()
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(20)) == .stopped)
        producer.join()
        #expect(trace.elements == ["beforeWaiting", "afterWaiting", "source"])
        // The wake-up is read after the callback, not between the signal and it; and it was not an empty wake-up.
        #expect(drainsAtCallback.elements == [before.wakeUpDrains])
        #expect(loop.counters.since(before).wakeUpDrains == 1)
        #expect(loop.counters.since(before).emptyWakeUps == 0)
    }

    @Test func aStopFromACallbackLeavesNoWakeUpForTheNextRun() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.perform { loop.stop() }
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        // As in CF, the pass that ran the block reaches its wait, which the stop turns into a look.
        #expect(trace.elements == ["beforeWaiting", "afterWaiting"])
        trace.removeAll()
        let before = loop.counters
        let start = loop.now
        #expect(loop.run(mode: .default, before: start + .milliseconds(300)) == .timedOut)
        #expect(loop.counters.since(before).blockingWaits == 1)
        #expect(trace.elements == ["beforeWaiting", "afterWaiting"])  // one sleep, to the deadline
        #expect(loop.now - start >= .milliseconds(300))
    }

    @Test func aPerformToASleepingLoopWakesItOnceAndThePassRunsTheBlock() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let ran = Recorder<Int>()
        let producer = startThread {
            _ = waitUntil { loop.isWaiting }
            for index in 0..<100 {
                loop.perform { ran.append(index) }
            }
            loop.perform { loop.stop() }
        }
        let giveUp = ContinuousClock.now + .seconds(60)  // a lost block fails the test below instead of hanging it
        while ran.count < 100 && ContinuousClock.now < giveUp {
            loop.run(mode: .default, before: loop.now + .seconds(20))
        }
        producer.join()
        #expect(ran.elements == Array(0..<100))
        #expect(loop.counters.emptyWakeUps == 0)
        #expect(loop.counters.wakeUpWrites <= loop.counters.blockingWaits)
    }

    @Test func wakeUpWhileNoRunIsActiveDoesNothingAndWhileAwakeMakesTheNextWaitALook() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.wakeUp()
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let start = loop.now
        #expect(loop.run(mode: .default, before: start + .milliseconds(300)) == .timedOut)
        #expect(loop.now - start >= .milliseconds(300))  // the early wakeUp() did not end the sleep
        #expect(trace.elements == ["beforeWaiting", "afterWaiting"])
    }

    // MARK: FIFO blocks across nesting

    @Test func aBlockQueuedBeforeANestedRunRunsBeforeOneQueuedByTheBlockThatNests() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let order = Recorder<String>()
        loop.perform {
            order.append("A")
            loop.perform { order.append("C") }
            loop.run(mode: .default, before: loop.now)
        }
        loop.perform { order.append("B") }
        loop.run(mode: .default, before: loop.now)
        #expect(order.elements == ["A", "B", "C"])
    }

    @Test func aNestedRunInAnotherModeKeepsTheOrderOfCommonBlocks() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let order = Recorder<String>()
        loop.perform(inModes: [.common]) {
            order.append("A")
            loop.perform(inModes: [.common]) { order.append("C") }
            loop.run(mode: .tracking, before: loop.now)
        }
        loop.perform(inModes: [.common]) { order.append("B") }
        loop.run(mode: .default, before: loop.now)
        #expect(order.elements == ["A", "B", "C"])
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func blocksFromEachProducerRunInFIFOOrderUnderRandomNesting(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<Int>()
        let plan = PlanBox(plan: (0..<200).map { _ in (nest: generator.next() % 4 == 0,
                                                          mode: generator.next() % 2 == 0 ? LoopMode.default : .tracking,
                                                          spawn: generator.next() % 3 == 0) })
        let next = Counter()
        @Sendable func enqueue() {
            let id = next.increment()
            guard id < 200 else { return }
            loop.perform(inModes: [.common]) {
                ran.append(id)
                let step = plan.plan[id]
                if step.spawn { enqueue() }
                if step.nest { loop.run(mode: step.mode, before: loop.now) }
            }
        }
        for _ in 0..<20 { enqueue() }
        while ran.count < next.value, next.value <= 200 {
            loop.run(mode: .default, before: loop.now)
            if ran.count == next.value && next.value < 200 { enqueue() }
        }
        #expect(ran.elements == ran.elements.sorted())
        #expect(Set(ran.elements).count == ran.count)
    }

    @Test func blocksOfTwoProducersEachRunInTheirOwnOrderWhileTheLoopNests() throws {
        let thread = try LoopThread()
        let loop = thread.loop
        let ran = Recorder<(Int, Int)>()
        let total = 2_000
        let producers = (0..<2).map { producer in
            startThread {
                for index in 0..<total {
                    loop.perform(inModes: [.common]) {
                        ran.append((producer, index))
                        if index % 97 == 0 { loop.run(mode: .tracking, before: loop.now) }
                    }
                }
            }
        }
        for producer in producers { producer.join() }
        #expect(waitUntil { ran.count == 2 * total })
        thread.shutdownAndJoin()
        for producer in 0..<2 {
            let mine = ran.elements.filter { $0.0 == producer }.map(\.1)
            #expect(mine == Array(0..<total))
        }
    }

    // MARK: returnAfterSourceHandled as CF

    @Test func aRunThatReturnsAfterASourceRunsOnlyTheFirstSignalledSource() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        let first = LoopSource(order: 0) { _ in ran.append("first") }
        let second = LoopSource(order: 1) { _ in ran.append("second") }
        loop.add(first, forMode: .default)
        loop.add(second, forMode: .default)
        second.signal()
        first.signal()
        #expect(loop.run(mode: .default, before: .distantFuture, returnAfterSourceHandled: true) == .handledSource)
        #expect(ran.elements == ["first"])
        #expect(second.isSignalled)
        #expect(loop.run(mode: .default, before: .distantFuture, returnAfterSourceHandled: true) == .handledSource)
        #expect(ran.elements == ["first", "second"])
    }

    @Test func aRunNestedInASourceRunsTheOtherSignalledSourcesOfThePass() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        let second = LoopSource(order: 1) { _ in ran.append("second") }
        let first = LoopSource(order: 0) { _ in
            ran.append("first")
            loop.run(mode: .default, before: loop.now)
            ran.append("first returns")
        }
        loop.add(first, forMode: .default)
        loop.add(second, forMode: .default)
        first.signal()
        second.signal()
        loop.run(mode: .default, before: loop.now)
        #expect(ran.elements == ["first", "second", "first returns"])
    }
}

/// A counter for one thread's test closures.
final class Counter: @unchecked Sendable {
    private(set) var value = 0
    func increment() -> Int {
        defer { self.value += 1 }
        return self.value
    }
}

/// A plan that only the test's thread reads.
final class PlanBox<Plan>: @unchecked Sendable {
    let plan: Plan
    init(plan: Plan) { self.plan = plan }
}

/// Item changes from another thread and from the loop's own, in the order they were made.
@Suite("Item changes in the order they returned", .serialized, .timeLimit(.minutes(1)))
struct ItemChangeOrderTests {
    /// An add made on another thread returned before the loop's thread removes the item: the remove wins, as in CF,
    /// where an add is done when it returns. Before, the remove found nothing (the add was still queued) and the add,
    /// applied at the next pass, left the item in the mode for good.
    @Test func aRemoveOnTheLoopsThreadWinsOverAnAddThatReturnedBeforeIt() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let source = LoopSource { _ in }
        let adder = startThread { loop.add(source, forMode: .default) }
        adder.join()
        #expect(loop.contains(source, inMode: .default))  // done when it returned
        loop.remove(source, forMode: .default)
        #expect(!loop.contains(source, inMode: .default))
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(10)) == .timedOut)
        #expect(!loop.contains(source, inMode: .default))
    }

    /// The same with the query left out: the remove alone applies the add queued before it.
    @Test func aRemoveOnTheLoopsThreadAppliesAnAddQueuedBeforeIt() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let trace = Recorder<String>()
        let source = LoopSource(onSchedule: { _, _ in trace.append("joined") },
                                onUnschedule: { _, _ in trace.append("left") }) { _ in }
        let adder = startThread { loop.add(source, forMode: .default) }
        adder.join()
        loop.remove(source, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(10)) == .timedOut)
        #expect(trace.elements == ["joined", "left"])
        #expect(!loop.contains(source, inMode: .default))
    }

    /// A capture let go of on the loop's thread while it applies queued changes (an isolated view's callback,
    /// released on another thread, is handed to the loop) whose deinit changes items while another thread queues a
    /// change: neither change is lost.
    @Test func aChangeQueuedWhileAReleasedCaptureChangesItemsIsNotLost() throws {
        final class Witness {
            let onDeinit: () -> Void
            init(_ onDeinit: @escaping () -> Void) { self.onDeinit = onDeinit }
            deinit { self.onDeinit() }
        }
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let queued = LoopSource { _ in }
        let direct = LoopSource { _ in }
        var witness: Witness? = Witness {
            let other = startThread { loop.add(queued, forMode: .default) }
            other.join()
            loop.add(direct, forMode: .default)  // on the loop's thread: applies what is queued first
        }
        let timer = LoopTimer(interval: .seconds(3600), on: loop.assumeIsolated()) { [witness] _ in
            withExtendedLifetime(witness) {}
        }
        witness = nil
        loop.add(timer, forMode: .default)
        let invalidator = startThread { timer.invalidate() }  // its callback is handed to the loop to be let go of
        invalidator.join()
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(20)) == .timedOut)
        #expect(loop.contains(direct, inMode: .default))
        #expect(loop.contains(queued, inMode: .default))
    }
}

/// What a thread's final drain still runs.
@Suite("The final drain of a loop thread", .serialized, .timeLimit(.minutes(1)))
struct FinalDrainTests {
    @Test func aSourceSignalledRightBeforeTheShutdownStillRuns() throws {
        for _ in 0..<20 {
            let thread = try LoopThread()
            let ran = Recorder<String>()
            let source = LoopSource { _ in ran.append("source") }
            thread.loop.add(source, forMode: .tracking)  // a mode the thread never runs
            source.signal()
            thread.shutdownAndJoin()
            #expect(ran.elements == ["source"])
        }
    }

    /// A source run by the final drain that signals another: the other runs too, in the next round, rather than being
    /// dropped with the end.
    @Test func aSourceSignalledByASourceOfTheFinalDrainRuns() throws {
        let thread = try LoopThread()
        let ran = Recorder<String>()
        let second = LoopSource { _ in ran.append("second") }
        let first = LoopSource { _ in
            ran.append("first")
            second.signal()
        }
        thread.loop.add(first, forMode: .tracking)  // a mode the thread never runs
        thread.loop.add(second, forMode: .tracking)
        first.signal()
        thread.shutdownAndJoin()
        #expect(ran.elements == ["first", "second"])
    }

    /// An item added from another thread, and signalled, while the final drain runs: it joins its mode and runs before
    /// the end, then leaves with every item. Before, the end dropped the change posted after the round took them, and
    /// `add` had returned `true` for an item that never joined.
    @Test func anItemAddedFromAnotherThreadDuringTheFinalDrainJoinsAndRuns() throws {
        let thread = try LoopThread()
        let trace = Recorder<String>()
        let late = LoopSource(onSchedule: { _, mode in trace.append("late joined \(mode.name)") },
                              onUnschedule: { _, mode in trace.append("late left \(mode.name)") }) { _ in
            trace.append("late")
        }
        let first = LoopSource { _ in
            trace.append("first")
            let other = startThread {
                trace.append(thread.loop.add(late, forMode: .tracking) ? "added" : "refused")
                late.signal()
            }
            other.join()  // posted while this round runs, after it took the item changes
        }
        thread.loop.add(first, forMode: .tracking)
        first.signal()
        thread.shutdownAndJoin()
        #expect(trace.elements == ["first", "added", "late joined tracking", "late", "late left tracking"])
    }

    /// Another thread adds an item, then queues a block, while a round of the final drain runs: the block, taken in
    /// that round, runs after the add is applied, as in a pass.
    @Test func aBlockQueuedAfterAnItemChangeDuringTheFinalDrainRunsAfterIt() throws {
        let thread = try LoopThread()
        let trace = Recorder<String>()
        let late = LoopSource(onSchedule: { _, _ in trace.append("late joined") }) { _ in }
        let first = LoopSource { _ in
            let other = startThread {
                thread.loop.add(late, forMode: .tracking)
                thread.loop.perform { trace.append("block") }
            }
            other.join()  // both queued after this round applied the changes, before it takes the blocks
        }
        thread.loop.add(first, forMode: .tracking)
        first.signal()
        thread.shutdownAndJoin()
        #expect(trace.elements == ["late joined", "block"])
    }
}

/// The summary of queued work that a pass reads without the lock (`SharedLoopState.pending`): it must say "nothing"
/// only when there is nothing, or a pass would skip work it is owed.
@Suite("The lock-free summary of queued work")
struct PendingWorkSummaryTests {
    @Test func theSummaryNamesEveryNonEmptyListAndClearsWhenTheLoopTakesIt() {
        let state = SharedLoopState()
        #expect(state.pending.isEmpty)
        _ = state.withLock { $0.enqueue(.one(.default), {}) }
        #expect(state.pending == [.blocks])
        let source = LoopSource { _ in }
        _ = state.withLock { $0.noteSignal(source) }
        _ = state.withLock { $0.post { _ in } }
        #expect(state.pending == [.blocks, .signalledSources, .controlMessages])

        var blocks: [QueuedBlock] = []
        var sources: [LoopSource] = []
        state.withLock { $0.takeBlocks(into: &blocks) }
        state.withLock { $0.takeSignalledSources(into: &sources) }
        _ = state.withLock { $0.takeControlMessages() }
        #expect(blocks.count == 1 && sources.count == 1)
        #expect(state.pending.isEmpty)
    }

    @Test func aStopIsInTheSummaryUntilTakenAndAShutdownStays() {
        let state = SharedLoopState()
        _ = state.withLock { $0.requestStop() }  // no run: a no-op, as in CF
        #expect(state.pending.isEmpty)
        state.withLock { $0.enterRun() }
        _ = state.withLock { $0.requestStop() }
        #expect(state.pending == [.stop])
        #expect(state.withLock { $0.takeStop() })
        #expect(state.pending.isEmpty)
        _ = state.withLock { $0.shutDown() }
        #expect(state.withLock { $0.takeStop() })
        #expect(state.pending == [.stop])  // sticky: every later run returns `.stopped`
    }

    @Test func theEndHandsBackWhatItDropsToBeReleasedAfterTheLock() {
        let state = SharedLoopState()
        _ = state.withLock { $0.enqueue(.one(.default), {}) }
        _ = state.withLock { $0.noteSignal(LoopSource { _ in }) }
        _ = state.withLock { $0.post { _ in } }
        let dropped = state.withLock { $0.end() }
        #expect(dropped.blocks.count == 1 && dropped.signalledSources.count == 1 && dropped.controlMessages.count == 1)
        #expect(state.pending == [.stop])  // ended: every later run returns `.stopped`
        #expect(state.withLock { $0.enqueue(.one(.default), {}) } == .refused)
    }

    @Test func aStopForAnOuterRunStaysInTheSummaryAfterTheInnerRunEnds() {
        let state = SharedLoopState()
        state.withLock { $0.enterRun() }
        _ = state.withLock { $0.requestStop() }
        state.withLock { $0.enterRun() }  // a run nested after the stop: not its stop
        #expect(state.withLock { $0.takeStop() } == false)
        state.withLock { $0.leaveRun() }
        #expect(state.pending == [.stop])
        #expect(state.withLock { $0.takeStop() })
    }
}
