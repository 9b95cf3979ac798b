#if canImport(Glibc)
import Glibc
#endif
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
        // The thread runs `default`; a block runs `tracking` nested, as a drag would, until the job has run.
        thread.perform { runTrackingUntilStopped(loop) }
        let probe = ModeProbe(executor: LoopExecutor(loop: loop, modes: [.tracking]))
        #expect(await probe.modeAndStop() == .tracking)
        thread.shutdownAndJoin()
    }
}
