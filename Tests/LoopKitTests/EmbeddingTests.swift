#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import Testing
@testable import LoopKit

private actor LoopBoundCounter {
    let executor: LoopExecutor
    private(set) var count = 0

    init(executor: LoopExecutor) {
        self.executor = executor
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    func increment() -> Bool {
        self.count += 1
        return self.executor.loop.isCurrent
    }
}

/// Records each step of a call that goes to an actor of the same loop in other modes and back: each hop is another
/// job on the loop, queued by the job before it.
private actor ThreeHopRecorder {
    let executor: LoopExecutor
    let record: Recorder<String>
    private let neighbour: Neighbour

    /// An actor of the same loop in `tracking` only: a call to it goes through the loop (a different executor).
    actor Neighbour {
        let executor: LoopExecutor
        let record: Recorder<String>

        init(executor: LoopExecutor, record: Recorder<String>) {
            self.executor = executor
            self.record = record
        }

        nonisolated var unownedExecutor: UnownedSerialExecutor {
            self.executor.asUnownedSerialExecutor()
        }

        func step() {
            self.record.append("hop 2 on the loop's thread: \(self.executor.loop.isCurrent)")
        }
    }

    init(executor: LoopExecutor, record: Recorder<String>) {
        self.executor = executor
        self.record = record
        self.neighbour = Neighbour(executor: LoopExecutor(loop: executor.loop, modes: [.tracking]), record: record)
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    func threeHops() async {
        self.record.append("hop 1 on the loop's thread: \(self.executor.loop.isCurrent)")
        await self.neighbour.step()
        self.record.append("hop 3 on the loop's thread: \(self.executor.loop.isCurrent)")
    }
}

/// Reports the mode the loop runs while the actor's job runs, then ends that run.
private actor ModeProbe {
    let executor: LoopExecutor

    init(executor: LoopExecutor) {
        self.executor = executor
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    func modeAndStop() -> LoopMode? {
        defer { self.executor.loop.stop() }
        return self.executor.loop.currentMode
    }
}

/// Records, in one list with the loop's blocks, when it is called; calls `next` first when it has one.
private actor HopRecorder {
    let executor: LoopExecutor
    let record: Recorder<String>
    let name: String

    init(executor: LoopExecutor, record: Recorder<String>, name: String) {
        self.executor = executor
        self.record = record
        self.name = name
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    /// Queues a block on the loop, then calls `callee`: the block's line comes first only if the call went through
    /// the loop. Returns the record as it is then, still on the loop's thread (the block may run once this returns).
    func queueABlockThenCall(_ callee: HopRecorder) async -> [String] {
        let record = self.record
        self.executor.loop.perform(inModes: [.common]) { record.append("block") }
        await callee.called()
        self.record.append("\(self.name) resumed on the loop's thread: \(self.executor.loop.isCurrent)")
        return self.record.elements
    }

    func called() {
        self.record.append("\(self.name) called on the loop's thread: \(self.executor.loop.isCurrent)")
    }
}

@available(*, noasync)
private func runTrackingUntilStopped(_ loop: Loop) {
    // Again after a run that timed out: a job queued later than that (a stalled test thread) must still find it.
    while loop.run(mode: .tracking, before: loop.now + .seconds(30)) != .stopped {}
}

@Suite("Embedding: executors", .serialized, .timeLimit(.minutes(1)))
struct EmbeddingTests {
    @Test func anActorOnALoopExecutorRunsItsCodeOnTheLoopsThread() async throws {
        let thread = try LoopThread(name: "actor-loop")
        let counter = LoopBoundCounter(executor: LoopExecutor(loop: thread.loop))
        for _ in 0..<10 {
            #expect(await counter.increment())
        }
        #expect(await counter.count == 10)
        thread.shutdownAndJoin()
    }

    @Test func aTaskWithALoopExecutorPreferenceResumesOnTheLoopsThread() async throws {
        let thread = try LoopThread(name: "task-loop")
        let executor = LoopExecutor(loop: thread.loop)
        let seen = await withTaskExecutorPreference(executor) { () async -> [Bool] in
            var seen: [Bool] = [executor.loop.isCurrent]
            await Task.yield()
            seen.append(executor.loop.isCurrent)
            try? await Task.sleep(for: .milliseconds(1))
            seen.append(executor.loop.isCurrent)
            return seen
        }
        #expect(seen == [true, true, true])
        thread.shutdownAndJoin()
    }

    @Test func aCallBetweenTwoActorsOnTheSameLoopRunsAtOnceWithoutTheLoopsOtherWorkInBetween() async throws {
        let thread = try LoopThread(name: "hop-loop")
        let record = Recorder<String>()
        // Each actor asks the loop for its executor, as two independent pieces of code would.
        let caller = HopRecorder(executor: thread.loop.executor, record: record, name: "A")
        let callee = HopRecorder(executor: thread.loop.executor, record: record, name: "B")
        let seen = await caller.queueABlockThenCall(callee)
        #expect(seen == ["B called on the loop's thread: true", "A resumed on the loop's thread: true"])
        await callee.called()  // through the loop: the block queued first has run by then
        #expect(record.elements.suffix(2) == ["block", "B called on the loop's thread: true"])
        thread.shutdownAndJoin()
    }

    @Test func aCallToAnActorOfTheSameLoopInOtherModesGoesThroughTheLoop() async throws {
        let thread = try LoopThread(name: "hop-modes-loop")
        let record = Recorder<String>()
        let caller = HopRecorder(executor: thread.loop.executor, record: record, name: "A")
        let callee = HopRecorder(executor: LoopExecutor(loop: thread.loop, modes: [.default]), record: record,
                                 name: "B")
        let seen = await caller.queueABlockThenCall(callee)
        #expect(seen == ["block", "B called on the loop's thread: true", "A resumed on the loop's thread: true"])
        thread.shutdownAndJoin()
    }

    @Test func aTaskPreferringTheLoopCallsItsActorsOnTheLoopsThread() async throws {
        let thread = try LoopThread(name: "prefer-hop-loop")
        let record = Recorder<String>()
        let executor = thread.loop.executor
        let caller = HopRecorder(executor: executor, record: record, name: "A")
        let callee = HopRecorder(executor: thread.loop.executor, record: record, name: "B")
        let (seen, onLoop) = await withTaskExecutorPreference(executor) { () async -> ([String], Bool) in
            (await caller.queueABlockThenCall(callee), executor.loop.isCurrent)
        }
        #expect(onLoop)
        #expect(seen.filter { $0 != "block" } == ["B called on the loop's thread: true",
                                                  "A resumed on the loop's thread: true"])
        thread.shutdownAndJoin()
    }

    @Test func jobsRunOnlyInTheExecutorsModes() async throws {
        let thread = try LoopThread(name: "mode-loop")
        let loop = thread.loop
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
        let probe = ModeProbe(executor: LoopExecutor(loop: loop, modes: [.tracking]))
        let seen = Recorder<LoopMode?>()
        let job = Task { seen.append(await probe.modeAndStop()) }
        // The thread runs `default`: the job waits, however many passes default makes meanwhile.
        try await Task.sleep(for: .milliseconds(20))
        for _ in 0..<3 {
            try await loop.submit(inModes: [.default]) {}
        }
        #expect(seen.elements.isEmpty, "a job of a tracking-only executor ran in default")
        // A block runs `tracking` nested, as a drag would, until the job has run.
        thread.perform { runTrackingUntilStopped(loop) }
        await job.value
        #expect(seen.elements == [.tracking])
        thread.shutdownAndJoin()
    }

    // MARK: Jobs queued before the loop ends

    /// What `ThreeHopRecorder.threeHops()` records when each hop runs on the loop's thread.
    private static let threeHops = (1...3).map { "hop \($0) on the loop's thread: true" }

    /// Waits until `loop` holds a queued block: the job of a task that has just gone to one of its actors.
    private static func untilABlockIsQueued(on loop: Loop) async throws {
        while !loop.state.pending.contains(.blocks) {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Starts a thread that makes its `Loop.current`, hands over an executor of it, and waits for `finish` before
    /// it does it (on its loop's thread, outside every run) and exits, never having run its loop.
    private static func threadThatNeverRunsItsLoop(
        finish: @escaping @Sendable (Loop) -> Void
    ) async throws -> (PlatformThread, LoopExecutor, release: @Sendable () -> Void) {
        let handoff = LoopLock<LoopExecutor?>(nil)
        let released = DispatchSemaphore(value: 0)
        let thread = startThread {
            let loop = Loop.current
            handoff.withLock { $0 = LoopExecutor(loop: loop) }
            released.wait()
            finish(loop)
        }
        while handoff.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(1))
        }
        let executor = handoff.withLock { $0! }
        let release: @Sendable () -> Void = { released.signal() }
        return (thread, executor, release)
    }

    @Test func aJobQueuedToAPlainThreadsLoopRunsWhenTheThreadExits() async throws {
        let record = Recorder<String>()
        let (thread, executor, release) = try await Self.threadThatNeverRunsItsLoop { loop in
            loop.perform { record.append("a perform block") }  // dropped at the exit, as CF drops it
        }
        let recorder = ThreeHopRecorder(executor: executor, record: record)
        let task = Task { await recorder.threeHops() }
        try await Self.untilABlockIsQueued(on: executor.loop)
        release()
        thread.join()  // the jobs ran on the way out
        #expect(record.elements == Self.threeHops)
        if record.count == 3 {
            await task.value  // would wait for ever had a job been dropped
        }
        #expect(executor.loop.hasEnded)
    }

    @Test func invalidateRunsTheJobsQueuedSoFarAndThoseTheyQueueBeforeItReturns() async throws {
        let record = Recorder<String>()
        let (thread, executor, release) = try await Self.threadThatNeverRunsItsLoop { loop in
            loop.perform { record.append("a perform block") }  // dropped, as `invalidate()` documents
            loop.invalidate()
            record.append("invalidate() returned")
        }
        let recorder = ThreeHopRecorder(executor: executor, record: record)
        let task = Task { await recorder.threeHops() }
        try await Self.untilABlockIsQueued(on: executor.loop)
        release()
        thread.join()
        #expect(record.elements == Self.threeHops + ["invalidate() returned"])
        if record.count == 4 {
            await task.value
        }
    }

    @Test func aLoopThreadsFinalDrainGivesABlockWaitingForAnotherModeItsRoundsToo() throws {
        let thread = try LoopThread(name: "final-drain")
        let loop = thread.loop
        let record = Recorder<String>()
        // The second drain takes both blocks below; the shutdown runs, and the tracking block is left waiting in the
        // loop's own queue when its runs end. It still runs, and what it queues runs in a later round.
        thread.perform {
            loop.perform(inModes: [.tracking]) {
                record.append("tracking block")
                loop.perform { record.append("its follow-up") }
            }
            loop.perform { loop.shutDown() }
        }
        thread.join()
        #expect(record.elements == ["tracking block", "its follow-up"])
    }
}
