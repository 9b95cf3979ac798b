import Dispatch
import Synchronization
import Testing
@testable import LoopKit

/// `Loop.submit`: a closure run on the loop's thread whose result the calling task awaits. Whatever happens, the task
/// is resumed once: with the result or error, with `CancellationError` if cancelled before the closure began, with
/// `LoopEndedError` if the loop let go of the closure unrun; and the closure is let go of.
///
/// The awaiting tests never block a thread of the concurrency pool: a loop on a manual clock runs on a thread of its
/// own (`ManualLoopOnItsThread`), which waits for the submitted work to be in place before it runs the loop.
@Suite("Awaited calls into a loop", .timeLimit(.minutes(1)))
struct SubmitTests {
    struct Refusal: Error {}

    /// What a task that awaited a submit came back with.
    enum Outcome: Sendable, Equatable {
        case value(Int)
        case cancelled
        case loopEnded(String)
        case other(String)
    }

    static func outcome(_ body: @Sendable () async throws -> Int) async -> Outcome {
        do {
            return .value(try await body())
        } catch is CancellationError {
            return .cancelled
        } catch let error as LoopEndedError {
            return .loopEnded(error.call)
        } catch {
            return .other("\(error)")
        }
    }

    /// What `task` came back with, or `.other` if it has not within 20 s: a task that is never resumed (the bug these
    /// tests look for) fails its test rather than hang the suite.
    static func settle(_ task: Task<Outcome, Never>) async -> Outcome {
        await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let pending = Mutex<CheckedContinuation<Outcome, Never>?>(continuation)
            let resume = { @Sendable (outcome: Outcome) in
                pending.withLock { stored in
                    defer { stored = nil }
                    return stored
                }?.resume(returning: outcome)
            }
            Task { resume(await task.value) }
            Task {
                try? await Task.sleep(for: .seconds(20))
                resume(.other("no outcome within 20 s"))
            }
        }
    }

    /// Returns once `loop` (run by its `LoopThread`) has a timer in its default mode, asking from the loop's thread.
    static func waitForATimer(on loop: Loop) async throws {
        for _ in 0..<10_000 {
            if try await loop.submit({ loop.nextTimerDate(forMode: .default) != nil }) { return }
            try await Task.sleep(for: .milliseconds(1))
        }
        Issue.record("no timer was scheduled on the loop")
    }

    @Test func aSubmittedClosureRunsOnTheLoopsThreadAndItsResultComesBack() async throws {
        let thread = try LoopThread(name: "submit")
        defer { thread.shutdownAndJoin() }
        let (onLoopThread, value) = try await thread.loop.submit { (thread.loop.isCurrent, 42) }
        #expect(onLoopThread)
        #expect(value == 42)
        await #expect(throws: Refusal.self) {
            try await thread.loop.submit { () throws -> Int in throw Refusal() }
        }
    }

    /// On the loop's clock: a submit after 30 ms runs when the loop's clock reads 30 ms later, not before.
    @Test func aDelayedSubmitRunsAtItsTimeOnTheLoopsClock() async throws {
        let clock = ManualLoopClock()
        let start = clock.now
        let owner = try ManualLoopOnItsThread(clock: clock) { loop in
            #expect(waitUntil { loop.nextTimerDate(forMode: .default) != nil })
            #expect(loop.nextTimerDate(forMode: .default) == start + .milliseconds(30))
            #expect(loop.run(mode: .default, before: start + .seconds(1)) == .finished)
        }
        let outcome = await Self.settle(Task {
            await Self.outcome {
                try await owner.loop.submit(after: .milliseconds(30)) { elapsedMilliseconds(clock.now, since: start) }
            }
        })
        owner.finish()
        #expect(outcome == .value(30))
    }

    /// A submit in `tracking` alone waits while the loop runs `default`, and runs in `tracking`.
    @Test func aSubmitRunsOnlyInItsModes() async throws {
        let clock = ManualLoopClock()
        let ranInDefault = Recorder<Bool>()
        let owner = try ManualLoopOnItsThread(clock: clock) { loop in
            #expect(waitUntil { loop.hasBlocks(for: .tracking) })
            loop.run(mode: .default, before: clock.now + .milliseconds(10))
            ranInDefault.append(!loop.hasBlocks(for: .tracking))
            loop.run(mode: .tracking, before: clock.now + .milliseconds(10))
        }
        let outcome = await Self.settle(Task {
            await Self.outcome { try await owner.loop.submit(inModes: [.tracking]) { 7 } }
        })
        owner.finish()
        #expect(outcome == .value(7))
        #expect(ranInDefault.elements == [false])
    }

    @Test func aSubmitToAnEndedLoopThrowsAndLetsGoOfTheClosure() async throws {
        let thread = try LoopThread(name: "submit-ended")
        thread.shutdownAndJoin()
        let freed = AtomicCounter()
        let ran = Recorder<String>()
        let immediate: Outcome
        let delayed: Outcome
        let atAnInstant: Outcome
        do {
            let capture = DeinitCounter(freed)
            immediate = await Self.settle(Task {
                await Self.outcome { try await thread.loop.submit { _ = capture; ran.append("now"); return 1 } }
            })
            delayed = await Self.settle(Task {
                await Self.outcome {
                    try await thread.loop.submit(after: .zero) { _ = capture; ran.append("later"); return 2 }
                }
            })
            atAnInstant = await Self.settle(Task {
                await Self.outcome {
                    try await thread.loop.submit(at: thread.loop.now) { _ = capture; ran.append("at"); return 3 }
                }
            })
        }
        #expect(immediate == .loopEnded("Loop.submit(inModes:_:)"))
        #expect(delayed == .loopEnded("Loop.submit(after:inModes:_:)"))
        #expect(atAnInstant == .loopEnded("Loop.submit(at:inModes:_:)"))
        #expect(ran.elements.isEmpty)
        #expect(freed.current == 1)
    }

    /// A submit for an hour from now, when the loop's thread is shut down before then: the task hears of it, rather
    /// than wait for ever on a closure the end let go of (SwiftNIO fails such a task's future with `.shutdown`).
    @Test func aLoopThatEndsBeforeADelayedSubmitRunsResumesTheTaskWithLoopEnded() async throws {
        let thread = try LoopThread(name: "submit-shutdown")
        let ran = Recorder<String>()
        let waiting = Task {
            await Self.outcome { try await thread.loop.submit(after: .seconds(3600)) { ran.append("ran"); return 1 } }
        }
        try await Self.waitForATimer(on: thread.loop)
        thread.shutdownAndJoin()
        #expect(await Self.settle(waiting) == .loopEnded("Loop.submit(after:inModes:_:)"))
        #expect(ran.elements.isEmpty)
    }

    /// `invalidate()` drops the blocks queued to a loop (as CF drops an ended loop's): a submit among them resumes its
    /// task with `LoopEndedError`.
    @Test func aSubmitDroppedByInvalidateResumesTheTaskWithLoopEnded() async throws {
        let owner = try ManualLoopOnItsThread(clock: ManualLoopClock(), invalidatesWhenDone: false) { loop in
            #expect(waitUntil { loop.hasBlocks(for: .default) })
            loop.invalidate()
        }
        let outcome = await Self.settle(Task {
            await Self.outcome { try await owner.loop.submit(inModes: [.default]) { 1 } }
        })
        owner.finish()
        #expect(outcome == .loopEnded("Loop.submit(inModes:_:)"))
    }

    /// Cancelled before its closure began: the task throws `CancellationError`, the closure never runs, and it is let
    /// go of then, with the loop's timer for it, not an hour later.
    @Test func aTaskCancelledBeforeTheClosureBeganThrowsAndTheClosureIsLetGoOf() async throws {
        let thread = try LoopThread(name: "submit-cancel")
        defer { thread.shutdownAndJoin() }
        let ran = Recorder<String>()
        let waiting = Task {
            await Self.outcome { try await thread.loop.submit(after: .seconds(3600)) { ran.append("ran"); return 1 } }
        }
        try await Self.waitForATimer(on: thread.loop)
        waiting.cancel()
        #expect(await Self.settle(waiting) == .cancelled)
        #expect(!(try await thread.loop.submit { thread.loop.nextTimerDate(forMode: .default) != nil }))
        #expect(ran.elements.isEmpty)

        // A block waiting for a mode the loop does not run: cancelled, it lets go of the closure at once too.
        let freed = AtomicCounter()
        let parked = Task {
            let capture = DeinitCounter(freed)
            return await Self.outcome {
                try await thread.loop.submit(inModes: [.tracking]) { _ = capture; ran.append("parked"); return 2 }
            }
        }
        #expect(try await waitUntilAsync { try await thread.loop.submit { thread.loop.hasBlocks(for: .tracking) } })
        parked.cancel()
        #expect(await Self.settle(parked) == .cancelled)
        #expect(freed.current == 1)  // the block is still queued; the closure it held for the task is gone

        // A task cancelled before it calls submit: the closure is never handed to the loop.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await Self.outcome { try await thread.loop.submit { ran.append("early"); return 3 } }
        }
        #expect(await Self.settle(early) == .cancelled)
        _ = try await thread.loop.submit { 0 }  // a drain after it: the early closure would have run by now
        #expect(ran.elements.isEmpty)
    }

    /// A closure that has begun runs to its end, and its result is what the task gets, cancelled meanwhile or not.
    @Test func aTaskCancelledWhileTheClosureRunsGetsTheClosuresResult() async throws {
        let clock = ManualLoopClock()
        let box = TaskBox()
        let owner = try ManualLoopOnItsThread(clock: clock) { loop in
            #expect(waitUntil { box.task != nil && loop.nextTimerDate(forMode: .default) != nil })
            #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        }
        let waiting = Task {
            await Self.outcome {
                try await owner.loop.submit(after: .milliseconds(5)) {
                    box.task?.cancel()
                    return 9
                }
            }
        }
        box.task = waiting
        #expect(await Self.settle(waiting) == .value(9))
        #expect(waiting.isCancelled)
        owner.finish()
    }
}

/// Polls `condition` every millisecond, up to `attempts` times.
private func waitUntilAsync(attempts: Int = 20_000, _ condition: () async throws -> Bool) async rethrows -> Bool {
    for _ in 0..<attempts {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return false
}

/// A loop on a manual clock, owned and run by a thread of its own: it runs `drive` with the loop, then waits for
/// `finish()`, and invalidates the loop (unless `drive` did). The test's task awaits on the loop meanwhile, never
/// blocking a thread of the concurrency pool.
private final class ManualLoopOnItsThread: Sendable {
    let loop: Loop
    private let thread: PlatformThread
    private let finished = DispatchSemaphore(value: 0)

    init(clock: ManualLoopClock, invalidatesWhenDone: Bool = true,
         drive: @escaping @Sendable (Loop) -> Void) throws {
        let created = Mutex<Loop?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let finished = self.finished
        self.thread = try PlatformThread.spawn(name: "submit-test") {
            let loop = try! Loop(clock: clock)
            created.withLock { $0 = loop }
            ready.signal()
            drive(loop)
            finished.wait()
            if invalidatesWhenDone {
                loop.invalidate()
            }
        }
        ready.wait()
        self.loop = created.withLock { $0! }
    }

    /// Lets the thread invalidate the loop and end, and waits for it.
    func finish() {
        self.finished.signal()
        self.thread.join()
    }
}

/// A task's handle, for the closure it submits to reach.
private final class TaskBox: Sendable {
    private let stored = Mutex<Task<SubmitTests.Outcome, Never>?>(nil)

    var task: Task<SubmitTests.Outcome, Never>? {
        get { self.stored.withLock { $0 } }
        set { self.stored.withLock { $0 = newValue } }
    }
}
