#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Testing
@testable import LoopKit

// Cases ported, in spirit, from peer suites: SwiftNIO's EventLoopTest and MultiThreadedEventLoopGroup tests, libuv's
// test-timer*.c, test-idle.c, test-loop-stop.c, test-loop-alive.c and test-embed.c, and swift-corelibs-foundation's
// TestRunLoop and TestTimer. Each is adapted to LoopKit's documented semantics (DESIGN.md and the doc comments).

/// A handle that a task's own closure can reach (set after `schedule` returns).
private final class PortedHandle: Sendable {
    private let task = LoopLock<LoopScheduledTask?>(nil)

    func set(_ task: LoopScheduledTask) {
        self.task.withLock { $0 = task }
    }

    var value: LoopScheduledTask? {
        self.task.withLock { $0 }
    }
}

// MARK: - SwiftNIO: scheduled tasks

@Suite("Ported from peers: SwiftNIO scheduled tasks")
struct PortedPeerScheduledTaskTests {
    /// NIO `testScheduledTasksAreOrdered`: tasks run in deadline order; equal deadlines in the order scheduled; a
    /// delay below zero counts as zero; an instant in the past comes before now.
    @Test func scheduledTasksRunInDeadlineOrderThenInScheduleOrder() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        let start = clock.now
        let plan: [(String, Int)] = [("a", 30), ("b", 10), ("c", 20), ("d", 10), ("e", 0), ("f", 30), ("g", -5)]
        for (name, ms) in plan {
            loop.schedule(after: .milliseconds(ms)) { ran.append(name) }
        }
        loop.schedule(at: start - .milliseconds(1)) { ran.append("past") }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(ran.elements == ["past", "e", "g", "b", "d", "c", "a", "f"])
    }

    /// NIO: a one-shot task that cancels itself while it runs; the completion comes after its run.
    @Test func aOneShotTaskCancellingItselfReportsCompletionAfterItsRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let handle = PortedHandle()
        handle.set(loop.schedule(after: .milliseconds(10)) {
            trace.append("run")
            handle.value?.cancel { trace.append("completion") }
            trace.append("cancel returned")
        })
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["run", "cancel returned", "completion"])
    }

    /// NIO `testCancelledScheduledTasksDoNotHoldOnToRunClosureEvenIfTheyWereTheNextTaskToExecute`: a task cancelled by
    /// an earlier task of the same instant never runs, and its closure is freed by the cancel.
    @Test func aTaskCancelledByAnEarlierTaskOfTheSameInstantNeverRunsAndIsFreedAtOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let handle = PortedHandle()
        let at = clock.now + .milliseconds(10)
        loop.schedule(at: at) {
            trace.append("first cancels")
            handle.value?.cancel()
            trace.append("first done")
        }
        do {
            let payload = DeinitProbe { trace.append("payload freed") }
            handle.set(loop.schedule(at: at) {
                _ = payload
                trace.append("second")
            })
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["first cancels", "payload freed", "first done"])
        #expect(handle.value?.isCancelled == true)
    }

    /// NIO `testRepeatedTaskThatIsImmediatelyCancelledNotifies`.
    @Test func aRepeatingTaskCancelledAtOnceNotifiesAtOnceAndNeverRuns() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = SharedCounter()
        let completions = SharedCounter()
        let task = loop.scheduleRepeating(initialDelay: .zero, every: .milliseconds(10)) { _ in ran.increment() }
        task.cancel { completions.increment() }
        #expect(completions.value == 1)
        #expect(task.isCancelled)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(ran.value == 0)
        #expect(completions.value == 1)
    }

    /// NIO `testRepeatedTaskThatIsCancelledAfterRunningAtLeastTwiceNotifies`.
    @Test func aRepeatingTaskCancelledBetweenRunsNotifiesOnceAndRunsNoMore() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let runs = Recorder<Int>()
        let completions = SharedCounter()
        let task = loop.scheduleRepeating(initialDelay: .milliseconds(5), every: .milliseconds(10)) { _ in
            runs.append(elapsedMilliseconds(clock.now, since: start))
        }
        #expect(loop.run(mode: .default, before: start + .milliseconds(16)) == .timedOut)
        #expect(runs.elements == [5, 15])
        task.cancel { completions.increment() }
        #expect(completions.value == 1)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(runs.elements == [5, 15])
        task.cancel { completions.increment() }  // twice is fine: each completion once
        #expect(completions.value == 2)
    }

    /// NIO `testScheduleRepeatedTaskCancelFromDifferentThread`: cancelled from another thread while it runs, the task
    /// finishes its run, reports completion after it, and runs no more.
    @Test func aRepeatingTaskCancelledFromAnotherThreadWhileRunningNotifiesAfterThatRun() throws {
        let thread = try LoopThread(name: "ported-cancel")
        defer { thread.shutdownAndJoin() }
        let trace = Recorder<String>()
        let inBody = DispatchSemaphore(value: 0)
        let cancelled = DispatchSemaphore(value: 0)
        let runs = SharedCounter()
        let task = thread.loop.scheduleRepeating(initialDelay: .milliseconds(1), every: .milliseconds(1)) { _ in
            trace.append("run")
            if runs.increment() == 1 {
                inBody.signal()
                cancelled.wait()
                trace.append("body ends")
            }
        }
        inBody.wait()
        task.cancel { trace.append("completion") }
        trace.append("cancel returned")
        cancelled.signal()
        #expect(waitUntil { trace.elements.contains("completion") })
        // A few more passes of the loop (and several of the task's intervals): no run after the completion.
        for _ in 0..<5 {
            let done = DispatchSemaphore(value: 0)
            thread.loop.schedule(after: .milliseconds(2)) { done.signal() }
            done.wait()
        }
        #expect(trace.elements == ["run", "cancel returned", "body ends", "completion"])
        #expect(task.isCancelled)
    }

    /// NIO `testScheduleRepeatedTaskToNotRetainRepeatedTask`: the loop keeps a repeating task alive while it is
    /// scheduled (dropping the handle does not cancel it), and lets go of it once cancelled.
    @Test func aRepeatingTaskIsKeptWhileScheduledAndFreedOnceCancelled() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let runs = SharedCounter()
        weak var weakTask: LoopScheduledTask?
        do {
            weakTask = loop.scheduleRepeating(initialDelay: .milliseconds(1), every: .milliseconds(1)) { _ in
                runs.increment()
            }
        }
        #expect(weakTask != nil)
        loop.run(mode: .default, before: clock.now + .milliseconds(3))
        #expect(runs.value == 3)
        weakTask?.cancel()
        #expect(weakTask == nil)
    }

    /// NIO `testScheduleRepeatedTaskToNotRetainEventLoop`: a repeating task does not keep its loop alive, and the loop's
    /// end cancels it.
    @Test func aRepeatingTaskDoesNotKeepItsLoopAliveAndIsCancelledWhenTheLoopGoes() throws {
        weak var weakLoop: Loop?
        let task: LoopScheduledTask
        let freed = Recorder<String>()
        do {
            let loop = try Loop(clock: ManualLoopClock())
            weakLoop = loop
            let payload = DeinitProbe { freed.append("payload") }
            task = loop.scheduleRepeating(initialDelay: .seconds(1), every: .seconds(1)) { _ in _ = payload }
            loop.run(mode: .default, before: loop.now)
        }
        #expect(weakLoop == nil)
        #expect(task.isCancelled)
        #expect(freed.elements == ["payload"])
    }

    /// NIO: tasks scheduled from other threads run in the order each thread scheduled them.
    @Test func tasksScheduledFromOtherThreadsRunInEachThreadsOrder() throws {
        let thread = try LoopThread(name: "ported-order")
        defer { thread.shutdownAndJoin() }
        let ran = Recorder<(Int, Int)>()
        let producers = (0..<2).map { producer in
            startThread {
                for index in 0..<200 {
                    thread.loop.schedule(after: .zero) { ran.append((producer, index)) }
                }
            }
        }
        for producer in producers { producer.join() }
        #expect(waitUntil { ran.count == 400 })
        for producer in 0..<2 {
            #expect(ran.elements.filter { $0.0 == producer }.map(\.1) == Array(0..<200))
        }
    }

    /// NIO `testScheduledTaskWakesEventLoopFromIdle`, on the real clock: not early, measured from the call.
    @Test func aTaskScheduledFromAnotherThreadOnAnIdleLoopRunsAndNotEarly() throws {
        let thread = try LoopThread(name: "ported-idle")
        defer { thread.shutdownAndJoin() }
        _ = waitUntil { thread.loop.isWaiting }
        let ran = Recorder<LoopInstant>()
        let start = thread.loop.now
        thread.loop.schedule(after: .milliseconds(15)) { ran.append(thread.loop.now) }
        #expect(waitUntil { ran.count == 1 })
        #expect(ran.elements[0] - start >= .milliseconds(15))
    }

    /// Foundation's common modes: a task (scheduled in `.common` by default) runs while the loop tracks.
    @Test func aTaskScheduledInTheCommonModesRunsWhileTheLoopTracks() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<LoopMode?>()
        loop.schedule(after: .milliseconds(10)) { ran.append(loop.currentMode) }
        loop.schedule(after: .milliseconds(10), inModes: [.default]) { ran.append(loop.currentMode) }
        #expect(loop.run(mode: .tracking, before: clock.now + .seconds(1)) == .finished)
        #expect(ran.elements == [.tracking])
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(ran.elements == [.tracking, .default])
    }

    /// NIO: a task never re-enters itself. A repeating task whose run nests the loop past its next slots does not run
    /// inside itself; cancelled from that nested run, it reports completion only after the outer run returns.
    @Test func aRepeatingTaskNestingTheLoopIsNotReenteredAndCancelledInsideCompletesAfterItsRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let trace = Recorder<String>()
        let depth = SharedCounter()
        let handle = PortedHandle()
        handle.set(loop.scheduleRepeating(initialDelay: .milliseconds(10), every: .milliseconds(10)) { _ in
            trace.append("run \(elapsedMilliseconds(clock.now, since: start)) depth \(depth.increment())")
            loop.add(LoopTimer(interval: .milliseconds(25)) { _ in
                trace.append("cancel")
                handle.value?.cancel { trace.append("completion") }
            }, forMode: .tracking)
            let result = loop.run(mode: .tracking, before: start + .milliseconds(50))
            trace.append("nested \(result)")
            depth.decrement()
        })
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(trace.elements == ["run 10 depth 1", "cancel", "nested finished", "completion"])
    }

    /// A thread that used its `Loop.current` for a task and exited without running it: the task is cancelled with the
    /// loop, its closure freed.
    @Test func aTaskOnAThreadThatExitsWithoutRunningItsLoopIsCancelled() throws {
        let handle = PortedHandle()
        let freed = Recorder<String>()
        onAnotherThread {
            let payload = DeinitProbe { freed.append("freed") }
            handle.set(Loop.current.schedule(after: .seconds(1)) { _ = payload })
        }
        #expect(handle.value?.isCancelled == true)
        #expect(freed.elements == ["freed"])
    }

    /// A one-shot task that ran is not cancelled by its loop's later end.
    @Test func aOneShotTaskThatRanIsNotCancelledByItsLoopsEnd() throws {
        let thread = try LoopThread(name: "ported-ran")
        let ran = DispatchSemaphore(value: 0)
        let task = thread.loop.schedule(after: .milliseconds(1)) { ran.signal() }
        ran.wait()
        thread.shutdownAndJoin()
        #expect(!task.isCancelled)
    }

    /// NIO `testScheduledTasksAreOrdered` at scale (enough for the timer queue's burst path): thousands of tasks at
    /// random deadlines, some cancelled before the run and some by earlier tasks, run in (deadline, schedule) order
    /// and the cancelled ones never.
    @Test func thousandsOfTasksWithCancellationsRunInDeadlineThenScheduleOrder() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        var random = SplitMix64(seed: 0x5EED)
        let count = 6_000
        let deadlines = (0..<count).map { _ in Int(random.next() % 200) }
        let precedes = { (a: Int, b: Int) in (deadlines[a], a) < (deadlines[b], b) }
        var victimOf: [Int: Int] = [:]
        var isVictim = Set<Int>()
        for index in stride(from: 0, to: count, by: 7) where !isVictim.contains(index) {
            let candidate = Int(random.next() % UInt64(count))
            if precedes(index, candidate) && victimOf[candidate] == nil && !isVictim.contains(candidate) {
                victimOf[index] = candidate
                isVictim.insert(candidate)
            }
        }
        let ran = Recorder<Int>()
        let handles = (0..<count).map { _ in PortedHandle() }
        for index in 0..<count {
            let victim = victimOf[index]
            handles[index].set(loop.schedule(after: .milliseconds(deadlines[index])) {
                ran.append(index)
                if let victim { handles[victim].value?.cancel() }
            })
        }
        var cancelledBefore = Set<Int>()
        for index in stride(from: 3, to: count, by: 11) {
            handles[index].value?.cancel()
            cancelledBefore.insert(index)
        }
        clock.advance(by: .milliseconds(100))  // half of them due at once: one burst
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        let order = ran.elements
        #expect(order == order.sorted(by: precedes))
        let ranSet = Set(order)
        #expect(ranSet.count == order.count)
        var expected = Set(0..<count).subtracting(cancelledBefore)
        for (canceller, victim) in victimOf where ranSet.contains(canceller) {
            expected.remove(victim)
        }
        #expect(ranSet == expected)
    }

    /// LoopKit's repeating tasks keep a fixed grid (SwiftNIO's wait a fixed delay after each run: a documented
    /// difference); an overrunning run skips the missed slots instead of replaying them.
    @Test func aRepeatingTaskThatOverrunsSkipsMissedSlotsOnItsGrid() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let runs = Recorder<Int>()
        loop.scheduleRepeating(initialDelay: .milliseconds(10), every: .milliseconds(10)) { _ in
            runs.append(elapsedMilliseconds(clock.now, since: start))
            if runs.count == 2 {
                clock.advance(by: .milliseconds(25))  // "works" 25 ms: the slots at 30 and 40 are missed
            }
        }
        loop.run(mode: .default, before: start + .milliseconds(70))
        #expect(runs.elements == [10, 20, 50, 60, 70])
    }
}

// MARK: - SwiftNIO: MultiThreadedEventLoopGroup

@Suite("Ported from peers: SwiftNIO event loop groups", .serialized, .timeLimit(.minutes(1)))
struct PortedPeerGroupTests {
    /// NIO `testShutdownWhileScheduledTasksNotReady`: tasks pending at the shutdown are cancelled with the loop, their
    /// closures freed; a later schedule comes back cancelled.
    @Test func tasksPendingWhenTheGroupShutsDownAreCancelledAndReleased() throws {
        let group = try LoopGroup(name: "ported-shut", threadCount: 2)
        let freed = Recorder<String>()
        let ran = Recorder<String>()
        let once: LoopScheduledTask
        let repeating: LoopScheduledTask
        do {
            let payload = DeinitProbe { freed.append("once") }
            once = group.next().schedule(after: .seconds(3600)) { _ = payload; ran.append("once") }
            let other = DeinitProbe { freed.append("repeating") }
            repeating = group.next().scheduleRepeating(initialDelay: .seconds(3600), every: .seconds(1)) { _ in
                _ = other
                ran.append("repeating")
            }
        }
        group.syncShutdownGracefully()
        #expect(once.isCancelled)
        #expect(repeating.isCancelled)
        #expect(Set(freed.elements) == ["once", "repeating"])
        #expect(ran.elements.isEmpty)
        let completions = SharedCounter()
        repeating.cancel { completions.increment() }
        #expect(completions.value == 1)
        let late = group.next().schedule(after: .zero) { ran.append("late") }
        #expect(late.isCancelled)
    }

    /// NIO `testCallingSyncShutdownGracefullyMultipleTimesShouldNotHang` and the async variant called concurrently.
    @Test func shuttingDownTwiceAndAfterTheShutdownNeverHangs() async throws {
        let group = try LoopGroup(name: "ported-twice", threadCount: 2)
        onAnotherThread {
            group.syncShutdownGracefully()
            group.syncShutdownGracefully()
        }
        await group.shutdownGracefully()
        let other = try LoopGroup(name: "ported-conc", threadCount: 3)
        async let first: Void = other.shutdownGracefully()
        async let second: Void = other.shutdownGracefully()
        _ = await (first, second)
        #expect(other.isShuttingDown)
    }

    /// NIO: a shutdown started from one of the group's own loops ends every thread and reports completion.
    @Test func aShutdownStartedOnOneOfTheGroupsLoopsCompletes() throws {
        let group = try LoopGroup(name: "ported-self", threadCount: 2)
        let done = Recorder<Bool>()
        group.loops[0].perform {
            group.shutdownGracefully { done.append(group.loops.allSatisfy { !$0.isCurrent }) }
        }
        #expect(waitUntil { done.count == 1 })
        #expect(done.elements == [true])
    }

    /// NIO `testEventLoopGroupAny...`: `any()` inside a task on a group's loop is that loop.
    @Test func anyInsideAScheduledTaskIsTheTasksLoop() throws {
        let group = try LoopGroup(name: "ported-any", threadCount: 3)
        defer { group.syncShutdownGracefully() }
        let seen = Recorder<Bool>()
        for loop in group.loops {
            loop.schedule(after: .milliseconds(1)) { seen.append(group.any() === loop && loop.isCurrent) }
        }
        #expect(waitUntil { seen.count == 3 })
        #expect(seen.elements == [true, true, true])
    }

    /// NIO: a loop thread does not hold on to itself. The last reference to a `LoopThread`, let go of by a block on its
    /// own thread, ends the thread, and its loop is freed.
    @Test func aLoopThreadReleasedOnItsOwnThreadEndsAndFreesItsLoop() throws {
        weak var weakLoop: Loop?
        do {
            let thread = try LoopThread(name: "ported-self")
            weakLoop = thread.loop
            thread.perform { _ = thread }
        }
        #expect(waitUntil { weakLoop == nil })
    }

    /// NIO `shutdownGracefully` while a loop is busy in a nested run (a drag): the nested run returns `.stopped`, the
    /// code that loops on it ends, and the thread ends.
    @Test func aShutdownEndsANestedRunLoopingUntilStopped() throws {
        let thread = try LoopThread(name: "ported-nested")
        let trace = Recorder<String>()
        let tracking = DispatchSemaphore(value: 0)
        thread.loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
        thread.perform {
            tracking.signal()
            var results: [RunResult] = []
            while true {
                let result = thread.loop.run(mode: .tracking, before: thread.loop.now + .milliseconds(20))
                results.append(result)
                if result == .stopped { break }
            }
            trace.append("drag ended: \(results.last!)")
        }
        tracking.wait()
        thread.shutdownAndJoin()
        #expect(trace.elements == ["drag ended: stopped"])
    }

    /// libuv `poll` with two ready handles where the first closes the second: a descriptor source invalidated by an
    /// earlier one of the same pass is not called.
    @Test func aDescriptorSourceInvalidatedByAnEarlierOneOfThePassIsNotCalled() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let first = try TestPipe()
        let second = try TestPipe()
        first.write()
        second.write()
        let trace = Recorder<String>()
        let victim = LoopDescriptorSource(descriptor: second.readEnd, events: .readable, order: 1) { _, _ in
            trace.append("second")
        }
        let killer = LoopDescriptorSource(descriptor: first.readEnd, events: .readable, order: 0) { source, _ in
            trace.append("first")
            first.readAll()
            victim.invalidate()
            source.invalidate()
        }
        loop.add(killer, forMode: .default)
        loop.add(victim, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .finished)
        #expect(trace.elements == ["first"])
    }

    /// A task scheduled by a block of the thread's final drain (after its shutdown) never runs: it is cancelled when
    /// the thread ends, and its closure is freed.
    @Test func aTaskScheduledDuringTheFinalDrainIsCancelledWhenTheThreadEnds() throws {
        let thread = try LoopThread(name: "ported-drain")
        let handle = PortedHandle()
        let trace = Recorder<String>()
        let gate = DispatchSemaphore(value: 0)
        thread.loop.perform(inModes: ["ported-elsewhere"]) {  // a mode the thread never runs: only the drain runs it
            let payload = DeinitProbe { trace.append("freed") }
            handle.set(thread.loop.schedule(after: .zero) { _ = payload; trace.append("ran") })
            gate.signal()
        }
        thread.shutdownAndJoin()
        #expect(gate.wait(timeout: .now()) == .success)
        #expect(handle.value?.isCancelled == true)
        #expect(trace.elements == ["freed"])
    }
}

// MARK: - libuv: timers, idle, stop, alive, embed

@Suite("Ported from peers: libuv loop semantics")
struct PortedPeerLibuvTests {
    /// libuv `timer_order`: timers with the same timeout fire in start order; restarted, in the restart order.
    @Test func timersWithTheSameTimeoutFireInStartOrderAndRestartingReordersThem() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let order = Recorder<String>()
        let a = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in order.append("a") }
        let b = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in order.append("b") }
        loop.add(a, forMode: .default)
        loop.add(b, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(10))
        #expect(order.elements == ["a", "b"])
        order.removeAll()
        b.setNextFireDate(clock.now + .milliseconds(5))  // "uv_timer_start" again, b first
        a.setNextFireDate(clock.now + .milliseconds(5))
        loop.run(mode: .default, before: start + .milliseconds(15))
        #expect(order.elements == ["b", "a"])
        a.invalidate()
        b.invalidate()
    }

    /// libuv `timer_start_twice`: starting a timer twice replaces the first start; it fires once, at the second date.
    @Test func startingATimerTwiceFiresItOnceAtTheSecondDate() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .milliseconds(10)) { _ in fired.append(elapsedMilliseconds(clock.now, since: start)) }
        loop.add(timer, forMode: .default)
        timer.setNextFireDate(start + .milliseconds(20))
        timer.setNextFireDate(start + .milliseconds(30))
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(fired.elements == [30])
    }

    /// libuv `timer_again`: restarting a repeating timer from now puts it on a grid from now.
    @Test func restartingARepeatingTimerMovesItsGridToTheRestart() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .milliseconds(50), repeats: true) { _ in
            fired.append(elapsedMilliseconds(clock.now, since: start))
        }
        loop.add(timer, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(20))
        timer.setNextFireDate(clock.now + timer.interval)  // uv_timer_again at 20 ms
        loop.run(mode: .default, before: start + .milliseconds(175))
        #expect(fired.elements == [70, 120, 170])
        timer.invalidate()
    }

    /// libuv `timer_no_double_call`: a timer restarted by another timer's callback in the pass where both are due
    /// fires once per slot, not twice.
    @Test func aDueTimerRestartedByAnotherTimersCallbackFiresOncePerSlot() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fires = Recorder<String>()
        let b = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in
            fires.append("b@\(elapsedMilliseconds(clock.now, since: start))")
        }
        let a = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in
            fires.append("a@\(elapsedMilliseconds(clock.now, since: start))")
            b.setNextFireDate(clock.now)
        }
        loop.add(a, forMode: .default)
        loop.add(b, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(35))
        #expect(fires.elements == ["a@10", "b@10", "a@20", "b@20", "a@30", "b@30"])
        a.invalidate()
        b.invalidate()
    }

    /// libuv `timer_huge_timeout` and `timer_huge_repeat`: huge timeouts and repeats neither fire nor overflow.
    @Test func hugeTimeoutsAndRepeatsNeitherFireNorOverflow() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<String>()
        let huge = Duration.seconds(Int64.max)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in fired.append("tiny") }, forMode: .default)
        loop.add(LoopTimer(interval: huge) { _ in fired.append("huge") }, forMode: .default)
        loop.add(LoopTimer(interval: huge, repeats: true) { _ in fired.append("hugeRepeating") }, forMode: .default)
        let hugeRepeat = LoopTimer(fireAt: start + .milliseconds(10), interval: huge, repeats: true) { _ in
            fired.append("hugeRepeat")
        }
        loop.add(hugeRepeat, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(3600)) == .timedOut)
        #expect(fired.elements == ["tiny", "hugeRepeat"])
        #expect(hugeRepeat.isValid)
        #expect(hugeRepeat.fireDate! > start + .seconds(3600))
    }

    /// libuv `timer_run_once`: one non-blocking pass fires a timer due now.
    @Test func oneNonBlockingPassFiresATimerDueNow() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = SharedCounter()
        loop.add(LoopTimer(interval: .zero) { _ in fired.increment() }, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now) == .timedOut)  // timedOut wins over finished
        #expect(fired.value == 1)
        #expect(loop.run(mode: .default, before: clock.now) == .finished)
    }

    /// libuv `timer_from_check`: a timer re-armed for "now" by its own callback fires again on the next pass, once
    /// per pass, never in a tight loop inside one pass.
    @Test func aTimerReArmedForNowByItsCallbackFiresOncePerPass() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let passes = SharedCounter()
        let firesPerPass = Recorder<Int>()
        loop.add(LoopObserver(activities: .beforeTimers) { _, _ in passes.increment() }, forMode: .default)
        let fires = SharedCounter()
        loop.add(LoopTimer(interval: .milliseconds(1)) { timer in
            firesPerPass.append(passes.value)
            if fires.increment() < 5 {
                timer.setNextFireDate(clock.now)
            }
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(fires.value == 5)
        #expect(Set(firesPerPass.elements).count == 5)
    }

    /// libuv `timer_early_check`: a timer started by a callback that ran long is due an interval after the start,
    /// not after the pass began (libuv's cached loop time made such timers early).
    @Test func aTimerStartedLateInAPassIsDueAnIntervalAfterItsStart() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<Int>()
        loop.perform {
            clock.advance(by: .milliseconds(50))  // a long callback
            loop.add(LoopTimer(interval: .milliseconds(10)) { _ in fired.append(elapsedMilliseconds(clock.now, since: start)) },
                     forMode: .default)
        }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(fired.elements == [60])
    }

    /// libuv `timer_start` after `timer_stop`: a timer removed from its mode, given a new date, and added again fires
    /// at the new date only.
    @Test func aTimerRemovedGivenANewDateAndAddedAgainFiresAtTheNewDate() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .milliseconds(10)) { _ in fired.append(elapsedMilliseconds(clock.now, since: start)) }
        loop.add(timer, forMode: .default)
        loop.remove(timer, forMode: .default)
        timer.setNextFireDate(start + .milliseconds(30))
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(fired.elements == [30])
    }

    /// libuv `idle_starvation` with blocks: a block that re-queues itself on every drain keeps the loop busy, yet a
    /// timer fires (real clock: order and "not early" only).
    @Test func aSelfRequeuingBlockDoesNotStarveATimer() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let spins = SharedCounter()
        let running = LoopLock(true)
        @Sendable func spin() {
            spins.increment()
            if running.withLock({ $0 }) { loop.perform(spin) }
        }
        loop.perform(spin)
        let start = loop.now
        let fired = Recorder<LoopInstant>()
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in
            fired.append(loop.now)
            running.withLock { $0 = false }
            loop.stop()
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(30)) == .stopped)
        #expect(fired.count == 1)
        #expect(fired.elements.first.map { $0 - start >= .milliseconds(20) } == true)
        #expect(spins.value > 1)
        loop.run(mode: .default, before: loop.now)  // the last re-queued block
    }

    /// libuv `idle_starvation`: a source that signals itself on every call keeps the loop busy, yet a timer fires.
    @Test func aSelfSignallingSourceDoesNotStarveATimer() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let spins = SharedCounter()
        let source = LoopSource { source in
            spins.increment()
            source.signal()
        }
        loop.add(source, forMode: .default)
        source.signal()
        let start = loop.now
        let fired = Recorder<LoopInstant>()
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in
            fired.append(loop.now)
            loop.stop()
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(30)) == .stopped)
        #expect(fired.count == 1)
        #expect(fired.elements[0] - start >= .milliseconds(20))
        #expect(spins.value >= 1)  // once, if a stall on a loaded machine made the timer due by the first pass
        source.invalidate()
    }

    /// libuv `loop_stop`: a stop from a timer's callback ends the run after that pass; the next run continues on the
    /// timer's grid.
    @Test func aStopFromATimerEndsTheRunAndTheNextRunContinues() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in
            fired.append(elapsedMilliseconds(clock.now, since: start))
            if fired.count == 3 { loop.stop() }
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .stopped)
        #expect(fired.elements == [10, 20, 30])
        #expect(clock.now == start + .milliseconds(30))
        #expect(loop.run(mode: .default, before: start + .milliseconds(55)) == .timedOut)
        #expect(fired.elements == [10, 20, 30, 40, 50])
        timer.invalidate()
    }

    /// libuv `loop_stop` (a stop from the prepare callback): a stop made at `beforeWaiting` is seen before the sleep;
    /// on a manual clock, no time passes.
    @Test func aStopFromABeforeWaitingObserverEndsTheRunWithoutSleeping() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = SharedCounter()
        let timer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in fired.increment() }
        loop.add(timer, forMode: .default)
        let waits = SharedCounter()
        loop.add(LoopObserver(activities: .beforeWaiting) { _, _ in
            if waits.increment() == 3 { loop.stop() }
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .stopped)
        #expect(fired.value == 2)
        #expect(clock.now == start + .milliseconds(2))
        #expect(loop.run(mode: .default, before: start + .milliseconds(5)) == .timedOut)
        #expect(fired.value == 5)
        timer.invalidate()
    }

    /// CF's precedence (DESIGN §2): a stop that loses to the deadline at the outermost run is spent with it; the next
    /// run is not stopped by it.
    @Test func aStopThatLosesToTheDeadlineIsSpentWithTheRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let keepAlive = LoopTimer(interval: .seconds(3600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in loop.stop() }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .milliseconds(10)) == .timedOut)
        #expect(loop.run(mode: .default, before: start + .milliseconds(20)) == .timedOut)
        #expect(clock.now == start + .milliseconds(20))
        keepAlive.invalidate()
    }

    /// DESIGN §3 / RunResult: a stop that loses to a nested run's deadline ends the outer run once the nested one
    /// returns.
    @Test func aStopThatLosesToANestedRunsDeadlineEndsTheOuterRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let keepAlive = LoopTimer(interval: .seconds(3600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        let trace = Recorder<String>()
        loop.add(LoopTimer(fireAt: start + .milliseconds(15)) { _ in
            trace.append("stop")
            loop.stop()
        }, forMode: .tracking)
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in
            trace.append("nested \(loop.run(mode: .tracking, before: start + .milliseconds(15)))")
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .stopped)
        #expect(trace.elements == ["stop", "nested timedOut"])
        #expect(clock.now == start + .milliseconds(15))
        keepAlive.invalidate()
    }

    /// libuv `loop_alive`: pending blocks keep their own mode alive, not another; a mode is finished once they ran.
    @Test func pendingBlocksKeepOnlyTheirOwnModeAlive() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        loop.perform(inModes: [.tracking]) { ran.append("tracking") }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(ran.elements.isEmpty)
        loop.perform { ran.append("default") }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(ran.elements == ["default"])
        #expect(loop.run(mode: .tracking, before: clock.now + .seconds(1)) == .finished)
        #expect(ran.elements == ["default", "tracking"])
    }

    /// libuv `loop_alive` with a handle closed from elsewhere: a sleeping run whose only task is cancelled from another
    /// thread wakes and finishes.
    @Test func aRunWhoseOnlyTaskIsCancelledFromAnotherThreadFinishes() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let task = loop.schedule(after: .seconds(3600)) {}
        let canceller = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            task.cancel()
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .finished)
        canceller.join()
    }

    /// libuv `embed` / `uv_backend_timeout`: no timeout without timers, the time to the next timer otherwise, zero with
    /// work queued; the descriptor becomes readable when the timer is due (never early), and dispatch fires it.
    @Test func theHostDriverTimeoutAndDescriptorFollowTheNextTimer() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        #expect(driver.prepare() == nil)
        #expect(driver.dispatch() == .finished)
        let fired = Recorder<LoopInstant>()
        let start = loop.now
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in fired.append(loop.now) }, forMode: .default)
        let timeout = try #require(driver.prepare())
        #expect(timeout <= .milliseconds(20))  // `.zero` once the timer is due: a stall here on a loaded machine
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 30_000) == 1)
        #expect(loop.now - start >= .milliseconds(20))
        driver.dispatch()
        #expect(fired.count == 1)
        #expect(driver.prepare() == nil)
    }

    /// GLib's cycle, where the host may call prepare again without a dispatch (its poll found other descriptors
    /// ready): work queued from another thread in between makes the next prepare ask for no sleep.
    @Test func aSecondPrepareWithoutDispatchSeesWorkQueuedInBetween() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        #expect(driver.prepare() != .zero)
        let ran = Recorder<String>()
        onAnotherThread { loop.perform { ran.append("block") } }
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 30_000) == 1)  // the descriptor says so (a host watching it wakes)...
        #expect(driver.prepare() == .zero)  // ...and so does the timeout: "`.zero` when work is waiting now"
        driver.dispatch()
        #expect(ran.elements == ["block"])
    }
}

// MARK: - swift-corelibs-foundation: TestRunLoop, TestTimer

@Suite("Ported from peers: Foundation run loop and timers")
struct PortedPeerFoundationTests {
    /// TestRunLoop `test_runLoopRunModeWithDate` and friends: the four results of a run.
    @Test func theResultsOfARun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(clock.now == start)
        let keepAlive = LoopTimer(interval: .seconds(3600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .milliseconds(100)) == .timedOut)
        #expect(clock.now == start + .milliseconds(100))
        // A timer is not a source: a run that returns after a source keeps going past the timer's fire.
        let fired = SharedCounter()
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in fired.increment() }, forMode: .default)
        let source = LoopSource { _ in }
        loop.add(source, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(50), returnAfterSourceHandled: true)
            == .timedOut)
        #expect(fired.value == 1)
        source.signal()
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1), returnAfterSourceHandled: true)
            == .handledSource)
        keepAlive.invalidate()
        source.invalidate()
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
    }

    /// TestRunLoop common modes and nested runs: a timer in `.common` fires in a mode added to the common set later,
    /// in a run nested in a default-mode timer's callback, and the outer run continues in its own mode afterwards;
    /// a block queued for `.common` runs in that mode too.
    @Test func aCommonTimerFiresInALaterCommonModeNestedAndThenInTheOuterMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let custom: LoopMode = "ported-custom"
        let fires = Recorder<String>()
        let tick = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in
            fires.append("\(elapsedMilliseconds(clock.now, since: start)) \(loop.currentMode?.name ?? "-")")
        }
        loop.add(tick, forMode: .common)
        loop.addCommonMode(custom)
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in
            loop.perform(inModes: [.common]) { fires.append("block \(loop.currentMode?.name ?? "-")") }
            let result = loop.run(mode: custom, before: start + .milliseconds(35))
            fires.append("nested \(result)")
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .milliseconds(50)) == .timedOut)
        #expect(fires.elements == ["block ported-custom", "10 ported-custom", "20 ported-custom", "30 ported-custom",
                                   "nested timedOut", "40 default", "50 default"])
        tick.invalidate()
    }

    /// TestTimer: a repeating timer invalidated (by another timer of a nested run) while its own callback runs does
    /// not fire again, and the run then finishes.
    @Test func aTimerInvalidatedWhileItsCallbackRunsNeverFiresAgain() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fires = Recorder<String>()
        let box = LoopLock<LoopTimer?>(nil)
        let outer = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in
            fires.append("outer \(elapsedMilliseconds(clock.now, since: start))")
            let result = loop.run(mode: .tracking, before: start + .milliseconds(45))
            fires.append("nested \(result)")
        }
        box.withLock { $0 = outer }
        loop.add(outer, forMode: .common)
        loop.add(LoopTimer(interval: .milliseconds(15)) { _ in
            fires.append("killer")
            box.withLock { $0 }?.invalidate()
        }, forMode: .tracking)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(fires.elements == ["outer 10", "killer", "nested finished"])
        #expect(!outer.isValid)
    }

    /// TestRunLoop `test_runLoopLimitDate`: `limitDate(forMode:)` is the date of the earliest timer.
    @Test func theNextTimerDateIsTheEarliestTimersFireDate() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let a = LoopTimer(fireAt: start + .milliseconds(10), tolerance: .milliseconds(5)) { _ in }
        let b = LoopTimer(fireAt: start + .milliseconds(13)) { _ in }
        loop.add(a, forMode: .default)
        loop.add(b, forMode: .default)
        #expect(loop.nextTimerDate(forMode: .default) == start + .milliseconds(10))
        a.invalidate()
        b.invalidate()
    }

    /// TestRunLoop: the limit date follows invalidations, removals, cancelled tasks and a repeating timer's fires.
    @Test func theNextTimerDateFollowsInvalidationsRemovalsAndFires() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let one = LoopTimer(interval: .milliseconds(10)) { _ in }
        loop.add(one, forMode: .default)
        #expect(loop.nextTimerDate(forMode: .default) == start + .milliseconds(10))
        one.invalidate()
        #expect(loop.nextTimerDate(forMode: .default) == nil)
        let removed = LoopTimer(interval: .milliseconds(20)) { _ in }
        loop.add(removed, forMode: .default)
        loop.remove(removed, forMode: .default)
        #expect(loop.nextTimerDate(forMode: .default) == nil)
        let task = loop.schedule(after: .milliseconds(30)) {}
        #expect(loop.nextTimerDate(forMode: .default) == start + .milliseconds(30))
        task.cancel()
        #expect(loop.nextTimerDate(forMode: .default) == nil)
        let repeating = LoopTimer(interval: .milliseconds(7), repeats: true) { _ in }
        loop.add(repeating, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(15))
        #expect(loop.nextTimerDate(forMode: .default) == start + .milliseconds(21))
        repeating.invalidate()
    }

    /// TestTimer: a repeating timer whose fire date has passed fires at once, then on the first slot of its grid
    /// after now.
    @Test func aRepeatingTimerWithAPastFireDateFiresOnceThenKeepsItsGrid() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<Int>()
        let timer = LoopTimer(fireAt: start - .milliseconds(25), interval: .milliseconds(10), repeats: true) { _ in
            fired.append(elapsedMilliseconds(clock.now, since: start))
        }
        loop.add(timer, forMode: .default)
        loop.run(mode: .default, before: start + .milliseconds(16))
        #expect(fired.elements == [0, 5, 15])
        timer.invalidate()
    }

    /// TestTimer `test_timerFireDate` style: an interval timer has no date until added, then now + interval; a
    /// one-shot with a date has no interval.
    @Test func aTimersFireDateAndInterval() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let timer = LoopTimer(interval: .milliseconds(25)) { _ in }
        #expect(timer.fireDate == nil)
        clock.advance(by: .milliseconds(3))
        loop.add(timer, forMode: .default)
        #expect(timer.fireDate == clock.now + .milliseconds(25))
        let dated = LoopTimer(fireAt: clock.now, interval: .seconds(5)) { _ in }
        #expect(dated.interval == .zero)
        timer.invalidate()
    }
}

// MARK: - LoopBound (NIOLoopBound)

@Suite("Ported from peers: NIOLoopBound")
struct PortedPeerLoopBoundTests {
    /// NIO `NIOLoopBoundBox` tests: a box made on the loop is shared by blocks sent from other threads.
    @Test func aBoundBoxIsSharedByBlocksSentFromOtherThreads() throws {
        let thread = try LoopThread(name: "ported-bound")
        defer { thread.shutdownAndJoin() }
        let made = DispatchSemaphore(value: 0)
        let boxHolder = LoopLock<LoopBoundBox<[Int]>?>(nil)
        thread.perform {
            boxHolder.withLock { $0 = LoopBoundBox([], loop: thread.loop) }
            made.signal()
        }
        made.wait()
        let box = try #require(boxHolder.withLock { $0 })
        onAnotherThread {
            for index in 0..<100 {
                thread.perform { box.value.append(index) }
            }
        }
        let result = LoopLock<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        thread.perform {
            result.withLock { $0 = box.value }
            done.signal()
        }
        done.wait()
        #expect(result.withLock { $0 } == Array(0..<100))
    }
}
