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
    loop.run(mode: .tracking, before: loop.now + .seconds(30))
}

@Suite("Embedding: executors and process signals", .serialized, .timeLimit(.minutes(1)))
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

    @Test func eachProcessSignalIsDeliveredToTheLoopAsASourceAndCounted() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let counts = Recorder<Int>()
        let source = try LoopSignalSource(signal: SIGUSR1, loop: loop) { count in
            counts.append(count)
        }
        defer { source.invalidate() }
        let start = loop.now
        for round in 1...3 {
            LoopSignalSource.sendToThisProcess(SIGUSR1)
            while counts.elements.reduce(0, +) < round, loop.now < start + .seconds(30) {
                loop.run(mode: .default, before: start + .seconds(30), returnAfterSourceHandled: true)
            }
        }
        #expect(counts.elements.reduce(0, +) == 3)
        #expect(counts.elements.allSatisfy { $0 >= 1 })
    }

    @Test func aSignalWakesASleepingLoop() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let counts = Recorder<Int>()
        let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { count in
            counts.append(count)
            loop.stop()
        }
        defer { source.invalidate() }
        let raiser = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            LoopSignalSource.sendToThisProcess(SIGUSR2)
        }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        raiser.join()
        #expect(result == .stopped)
        #expect(counts.elements == [1])
    }

    @Test func severalSourcesOfOneSignalOnTwoLoopsAllSeeIt() throws {
        let first = try Loop()
        defer { first.invalidate() }
        let second = try Loop()
        defer { second.invalidate() }
        let seen = Recorder<String>()
        let sources = try [
            LoopSignalSource(signal: SIGWINCH, loop: first) { _ in seen.append("first a") },
            LoopSignalSource(signal: SIGWINCH, loop: first) { _ in seen.append("first b") },
            LoopSignalSource(signal: SIGWINCH, loop: second) { _ in seen.append("second") },
        ]
        defer { for source in sources { source.invalidate() } }
        LoopSignalSource.sendToThisProcess(SIGWINCH)
        let start = first.now
        while seen.count < 3, first.now < start + .seconds(30) {
            first.run(mode: .default, before: first.now + .milliseconds(10))
            second.run(mode: .default, before: second.now + .milliseconds(10))
        }
        #expect(Set(seen.elements) == ["first a", "first b", "second"])
    }

    @Test func aSourceWhoseHandleIsDroppedKeepsDeliveringUntilInvalidated() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let seen = Recorder<Int>()
        weak var weakSource: LoopSignalSource?
        do {
            let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { seen.append($0) }
            weakSource = source  // the test's last reference goes at the end of this scope
        }
        #expect(weakSource != nil)  // the loop keeps it
        LoopSignalSource.sendToThisProcess(SIGUSR2)
        let start = loop.now
        while seen.count < 1, loop.now < start + .seconds(30) {
            loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        }
        #expect(seen.elements == [1])
        weakSource?.invalidate()
        #expect(weakSource == nil)
    }

    @Test func anUncatchableSignalIsAThrownError() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        #expect(throws: SystemCallError(call: "sigaction", code: EINVAL)) {
            _ = try LoopSignalSource(signal: SIGKILL, loop: loop) { _ in }
        }
        let source = try LoopSignalSource(signal: SIGWINCH, loop: loop) { _ in }
        source.invalidate()
    }

    @Test func aSourceWhoseLoopEndsIsInvalidatedAndGivesItsSignalBack() throws {
        let thread = try LoopThread(name: "signals")
        weak var weakSource: LoopSignalSource?
        do {
            let source = try LoopSignalSource(signal: SIGUSR2, loop: thread.loop) { _ in }
            weakSource = source
            #expect(source.isValid)
        }
        #expect(weakSource != nil)  // kept alive by its loop while valid
        thread.shutdownAndJoin()
        #expect(weakSource == nil)  // ended with its loop: invalidated and freed, not left swallowing SIGUSR2
        var action = sigaction()
        sigaction(SIGUSR2, nil, &action)
        #expect(action.__sigaction_handler.sa_handler == nil)  // SIG_DFL again: no LoopKit handler installed
    }

    @Test func aSourceMadeForALoopThatHasEndedIsInvalidAndLeavesTheSignalAlone() throws {
        let thread = try LoopThread(name: "signals-after-end")
        thread.shutdownAndJoin()
        weak var weakSource: LoopSignalSource?
        do {
            let source = try LoopSignalSource(signal: SIGUSR2, loop: thread.loop) { _ in }
            weakSource = source
            #expect(!source.isValid)
        }
        #expect(weakSource == nil)
        var action = sigaction()
        sigaction(SIGUSR2, nil, &action)
        #expect(action.__sigaction_handler.sa_handler == nil)  // SIG_DFL: no LoopKit handler left behind
    }

    /// A loop of one's own that is let go of without `invalidate()` ends its signal sources as it goes.
    @Test func aSourceWhoseLoopIsFreedIsInvalidatedAndGivesItsSignalBack() throws {
        weak var weakSource: LoopSignalSource?
        weak var weakLoop: Loop?
        do {
            let loop = try Loop()
            weakLoop = loop
            let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
            weakSource = source
        }
        #expect(weakLoop == nil)
        #expect(weakSource == nil)
        var action = sigaction()
        sigaction(SIGUSR2, nil, &action)
        #expect(action.__sigaction_handler.sa_handler == nil)
    }

    /// A process whose threads all block a signal (a child spawned from one of Dispatch's threads inherits such a
    /// mask) would never see it: creating a source lets the calling thread take it.
    @Test func creatingASourceUnblocksItsSignalOnTheCallingThread() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let blockedAfter = Atomic<Bool>(true)
        let thread = startThread {
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGUSR2)
            pthread_sigmask(SIG_BLOCK, &signals, nil)
            let source = try! LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
            var mask = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &mask)
            blockedAfter.store(sigismember(&mask, SIGUSR2) == 1, ordering: .relaxed)
            source.invalidate()
        }
        thread.join()
        #expect(blockedAfter.load(ordering: .relaxed) == false)
    }
}
