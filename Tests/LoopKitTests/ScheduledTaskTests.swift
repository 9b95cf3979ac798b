import Testing
@testable import LoopKit

/// Scheduled tasks on a loop: delays and instants on a manual clock, cancellation that releases the closure at once
/// and reports completion, a mode's next timer date, the loop's executor.
@Suite("Scheduled tasks")
struct ScheduledTaskTests {
    final class Payload: Sendable {}

    @Test func aTaskRunsOnceAfterItsDelayEvenWhenTheHandleIsDropped() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<LoopInstant>()
        let start = clock.now
        loop.schedule(after: .milliseconds(30)) { ran.append(clock.now) }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(ran.elements == [start + .milliseconds(30)])
    }

    @Test func aTaskCancelledBeforeItRunsNeverRunsAndItsCapturesAreFreedAtOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<Int>()
        let completions = Recorder<Int>()
        weak var weakPayload: Payload?
        let task: LoopScheduledTask
        do {
            let payload = Payload()
            weakPayload = payload
            task = loop.schedule(at: clock.now + .milliseconds(10)) { _ = payload; ran.append(1) }
        }
        task.cancel { completions.append(1) }
        #expect(weakPayload == nil)
        #expect(completions.elements == [1])
        #expect(task.isCancelled)
        loop.run(mode: .default, before: clock.now + .seconds(1))
        #expect(ran.elements.isEmpty)
    }

    @Test func aRepeatingTaskCancelledFromItsOwnRunReportsCompletionAfterThatRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.scheduleRepeating(initialDelay: .milliseconds(5), every: .milliseconds(10)) { task in
            trace.append("run")
            if trace.count == 3 {
                task.cancel { trace.append("finished") }
                trace.append("cancelled")
            }
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["run", "run", "run", "cancelled", "finished"])
    }

    /// SwiftNIO's `scheduleRepeatedTask(initialDelay:delay:)`: each run starts `delay` after the previous one ended, so
    /// a run that takes 30 ms pushes the next back; at a fixed rate (`every:`) the runs stay on their 100 ms grid.
    @Test func aFixedDelayTaskStartsEachRunItsDelayAfterThePreviousRunEnded() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fixedDelay = Recorder<Int>()
        let fixedRate = Recorder<Int>()
        /// A run that records when it started, then takes 30 ms of the manual clock, and ends the task after 3 runs.
        @Sendable func slowRun(_ task: LoopScheduledTask, since start: LoopInstant, into starts: Recorder<Int>) {
            starts.append(elapsedMilliseconds(clock.now, since: start))
            clock.advance(by: .milliseconds(30))
            if starts.count == 3 {
                task.cancel()
            }
        }
        let start = clock.now
        loop.scheduleRepeating(initialDelay: .milliseconds(10), delay: .milliseconds(100)) {
            slowRun($0, since: start, into: fixedDelay)
        }
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        #expect(fixedDelay.elements == [10, 140, 270])

        let rateStart = clock.now
        loop.scheduleRepeating(initialDelay: .milliseconds(10), every: .milliseconds(100)) {
            slowRun($0, since: rateStart, into: fixedRate)
        }
        #expect(loop.run(mode: .default, before: rateStart + .seconds(1)) == .finished)
        #expect(fixedRate.elements == [10, 110, 210])
    }

    /// A fixed-delay task cancelled from its own run finishes after that run and is not re-armed; cancelled before its
    /// first run, it never runs and lets go of its captures at once.
    @Test func aFixedDelayTaskCancelledInOrBeforeARunRunsNoMoreAndLetsGoOfItsCaptures() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.scheduleRepeating(initialDelay: .zero, delay: .milliseconds(5)) { task in
            trace.append("run")
            if trace.count == 2 {
                task.cancel { trace.append("finished") }
            }
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["run", "run", "finished"])
        #expect(loop.nextTimerDate(forMode: .default) == nil)

        weak var weakPayload: Payload?
        let task: LoopScheduledTask
        do {
            let payload = Payload()
            weakPayload = payload
            task = loop.scheduleRepeating(initialDelay: .milliseconds(1), delay: .milliseconds(1)) { _ in
                _ = payload
                trace.append("late run")
            }
        }
        task.cancel()
        #expect(weakPayload == nil)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(!trace.elements.contains("late run"))
    }

    @Test func theNextTimerDateOfAModeIsItsEarliestTimer() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        #expect(loop.nextTimerDate(forMode: .default) == nil)
        loop.schedule(after: .seconds(5)) {}
        loop.add(LoopTimer(fireAt: clock.now + .seconds(2)) { _ in }, forMode: .default)
        #expect(loop.nextTimerDate(forMode: .default) == clock.now + .seconds(2))
        #expect(loop.nextTimerDate(forMode: .tracking) == clock.now + .seconds(5))
    }

    @Test func anActorOnTheLoopsExecutorRunsOnTheLoopsThread() async throws {
        let thread = try LoopThread(name: "actor-test")
        actor Counter {
            let executor: LoopExecutor
            nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
            init(executor: LoopExecutor) { self.executor = executor }
            func onLoopThread() -> Bool { self.executor.loop.isCurrent }
        }
        let counter = Counter(executor: thread.loop.executor)
        #expect(await counter.onLoopThread())
        thread.shutdownAndJoin()
    }

    /// A one-shot task cancelled from its own run has run, as a SwiftNIO `Scheduled` cancelled while it executes
    /// succeeds: it stays not cancelled, and the completion comes when the run returns.
    @Test func aOneShotTaskCancelledDuringItsOwnRunStaysNotCancelled() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let handle = TaskHandle()
        handle.task = loop.schedule(after: .milliseconds(1)) {
            handle.task?.cancel { trace.append("completion") }
            trace.append("run ends")
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(trace.elements == ["run ends", "completion"])
        #expect(handle.task?.isCancelled == false)
    }

    /// As SwiftNIO's `scheduleTask(in:)`: a delay below zero runs the task at the next pass.
    @Test func aNegativeDelayRunsTheTaskAtTheNextPass() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        loop.schedule(after: .milliseconds(-5)) { ran.append("once") }
        loop.scheduleRepeating(initialDelay: .seconds(-1), every: .seconds(1)) { task in
            ran.append("repeating")
            task.cancel()
        }
        loop.run(mode: .default, before: clock.now)  // one pass: the clock does not move
        #expect(ran.elements.sorted() == ["once", "repeating"])
    }

    /// A loop that has ended refuses the task: the handle says so, and the closure is released at once.
    @Test func aTaskScheduledOnAnEndedLoopComesBackCancelledAndReleased() throws {
        let thread = try LoopThread(name: "scheduled-after-end")
        thread.shutdownAndJoin()
        weak var weakPayload: Payload?
        let completions = Recorder<Int>()
        let once: LoopScheduledTask
        let repeating: LoopScheduledTask
        do {
            let payload = Payload()
            weakPayload = payload
            once = thread.loop.schedule(after: .zero) { _ = payload }
            repeating = thread.loop.scheduleRepeating(initialDelay: .zero, every: .seconds(1)) { _ in _ = payload }
        }
        #expect(once.isCancelled)
        #expect(repeating.isCancelled)
        #expect(weakPayload == nil)
        once.cancel { completions.append(1) }
        #expect(completions.elements == [1])
    }
}

/// A task's handle, for its own closure to reach (set before the loop runs it).
private final class TaskHandle: @unchecked Sendable {  // @unchecked: set once before the loop runs, then only read
    var task: LoopScheduledTask?
}
