import Dispatch
import Synchronization
import Testing
@testable import LoopKit

/// Work that a nested run takes on the outer run's behalf, and item changes queued from other threads: each takes
/// effect in the order it was asked for, and nothing waits asleep.
@Suite("Order across threads and nested runs", .serialized, .timeLimit(.minutes(1)))
struct OrderAcrossThreadsAndNestedRunsTests {
    /// A run nested in a block after the pass's source phase takes a signal for a source of the outer mode, which it
    /// does not run: the outer pass must not then sleep as if nothing were signalled.
    @Test func aSignalThatARunNestedInABlockTookIsNotLeftAsleep() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let ran = Recorder<LoopInstant>()
        let source = LoopSource { _ in
            ran.append(loop.now)
            loop.stop()
        }
        loop.add(source, forMode: .default)
        // Repeating, so that the nested run makes passes after the signal, and takes it.
        loop.add(LoopTimer(interval: .milliseconds(1), repeats: true) { _ in source.signal() }, forMode: .tracking)
        // The first block runs at the pass's first drain and queues the second for the drain after the sources.
        loop.perform {
            loop.perform { loop.run(mode: .tracking, before: loop.now + .milliseconds(10)) }
        }
        let start = clock.now
        let result = loop.run(mode: .default, before: start + .seconds(10))
        #expect(result == .stopped)
        #expect(ran.count == 1)
        #expect(clock.now < start + .seconds(10), "the outer run slept to its deadline with the source signalled")
    }

    /// An `add` from another thread is done when it returns, as in CF: a block that thread queues afterwards finds
    /// the item in its mode, and its `remove` is the last word.
    @Test func aBlockQueuedAfterAnAddFromAnotherThreadFindsTheItemInItsMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let inCallback = DispatchSemaphore(value: 0)
        let queued = DispatchSemaphore(value: 0)
        let source = LoopSource { _ in }
        let seenByBlock = Recorder<Bool>()
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            inCallback.signal()
            queued.wait()  // the loop is busy in a callout while the other thread adds, then queues a block
        }, forMode: .default)
        let other = startThread {
            inCallback.wait()
            loop.add(source, forMode: .default)
            loop.perform {
                seenByBlock.append(loop.contains(source, inMode: .default))
                loop.remove(source, forMode: .default)
            }
            queued.signal()
        }
        loop.run(mode: .default, before: clock.now + .milliseconds(100))
        other.join()
        #expect(seenByBlock.elements == [true])
        #expect(!loop.contains(source, inMode: .default))
    }

    /// An item added from another thread, then added to another mode by a block that thread queues, is in both
    /// modes, and leaves each when removed from it.
    @Test func anItemAddedFromAnotherThreadAndThenByItsBlockIsInBothModesAndLeavesEach() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let inCallback = DispatchSemaphore(value: 0)
        let queued = DispatchSemaphore(value: 0)
        let calls = Recorder<LoopMode>()
        let observer = LoopObserver(activities: [.entry]) { _, _ in calls.append(loop.currentMode ?? .common) }
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            inCallback.signal()
            queued.wait()
        }, forMode: .default)
        let other = startThread {
            inCallback.wait()
            loop.add(observer, forMode: .default)
            loop.perform { loop.add(observer, forMode: .tracking) }
            queued.signal()
        }
        loop.run(mode: .default, before: clock.now + .milliseconds(100))
        other.join()
        #expect(loop.contains(observer, inMode: .default))
        #expect(loop.contains(observer, inMode: .tracking))

        loop.remove(observer, forMode: .tracking)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .tracking)
        loop.run(mode: .tracking, before: clock.now + .milliseconds(100))
        #expect(!calls.elements.contains(.tracking), "removed from tracking, it was still called there")
    }

    /// A run nested in an `onSchedule` callback, which applying one item change called, applies the changes taken
    /// with that one before any queued after them: a `remove` queued after an `add` wins.
    @Test func itemChangesFromAnotherThreadApplyInOrderAroundARunNestedInOnSchedule() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let inCallback = DispatchSemaphore(value: 0)
        let added = DispatchSemaphore(value: 0)
        let inSchedule = DispatchSemaphore(value: 0)
        let removed = DispatchSemaphore(value: 0)
        let second = LoopSource { _ in }
        let first = LoopSource(onSchedule: { _, _ in
            inSchedule.signal()
            removed.wait()  // the other thread removes `second` now, after adding it
            loop.run(mode: .tracking, before: loop.now)
        }) { _ in }
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            inCallback.signal()
            added.wait()
        }, forMode: .default)
        let other = startThread {
            inCallback.wait()
            loop.add(first, forMode: .default)
            loop.add(second, forMode: .default)
            added.signal()
            inSchedule.wait()
            loop.remove(second, forMode: .default)
            removed.signal()
        }
        loop.run(mode: .default, before: clock.now + .milliseconds(100))
        other.join()
        #expect(loop.contains(first, inMode: .default))
        #expect(!loop.contains(second, inMode: .default), "the remove was applied before the add queued ahead of it")
        first.invalidate()
        second.invalidate()
    }

    /// An item whose `onSchedule` for its first common mode takes it out of `.common` again is in no common mode
    /// afterwards: the add's fan-out stops where the removal took over.
    @Test func anOnScheduleThatTakesItsItemOutOfCommonEndsTheFanOut() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let scheduled = Recorder<LoopMode>()
        let source = LoopSource(onSchedule: { source, mode in
            scheduled.append(mode)
            loop.remove(source, forMode: .common)
        }) { _ in }
        loop.add(source, forMode: .common)
        #expect(scheduled.elements == [.default])
        #expect(!loop.contains(source, inMode: .common))
        #expect(!loop.contains(source, inMode: .default))
        #expect(!loop.contains(source, inMode: .tracking))
        source.invalidate()
    }

    /// A back-fill of a new common mode skips an item that an earlier item's `onSchedule` took out of `.common`.
    @Test func aBackFillSkipsAnItemAnEarlierCallbackTookOutOfCommon() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let custom = LoopMode("custom")
        let second = LoopSource { _ in }
        let first = LoopSource(onSchedule: { _, mode in
            if mode == custom { loop.remove(second, forMode: .common) }
        }) { _ in }
        loop.add(first, forMode: .common)
        loop.add(second, forMode: .common)
        loop.addCommonMode(custom)
        #expect(loop.contains(first, inMode: custom))
        #expect(!loop.contains(second, inMode: custom))
        #expect(!loop.contains(second, inMode: .common))
        first.invalidate()
        second.invalidate()
    }

    /// An actor's job that runs the loop nested (a modal drag) is not interleaved with the actor's next job: a serial
    /// executor runs one job at a time, and the next one runs once this one returns.
    @Test func aRunNestedInAnActorsJobDoesNotStartTheActorsNextJob() async throws {
        let thread = try LoopThread(name: "nested-job")
        defer { thread.shutdownAndJoin() }
        let loop = thread.loop
        loop.add(LoopTimer(interval: .seconds(3_600)) { _ in }, forMode: .tracking)  // a tracking mode to run
        let model = DraggingModel(executor: LoopExecutor(loop: loop, modes: [.common]))
        let dragging = DispatchSemaphore(value: 0)
        async let drag: Void = model.drag(announcing: dragging)
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                dragging.wait()
                continuation.resume()
            }
        }
        await model.note("second job")  // queued while the first job's nested run is under way
        await drag
        #expect(await model.log == ["drag begins", "drag ends", "second job"])
    }

    /// Only the jobs of the executor whose job ran the loop nested wait: an actor on another of the loop's executors
    /// (here one for the common modes, handling the touches) runs inside the drag, and can end it.
    @Test func aRunNestedInAnActorsJobStillRunsTheJobsOfAnotherExecutor() async throws {
        let thread = try LoopThread(name: "nested-job-other")
        defer { thread.shutdownAndJoin() }
        let loop = thread.loop
        loop.add(LoopTimer(interval: .seconds(3_600)) { _ in }, forMode: .tracking)
        let model = DraggingModel(executor: LoopExecutor(loop: loop, modes: [.default]))
        let touches = TouchHandler(executor: LoopExecutor(loop: loop, modes: [.common]))
        let dragging = DispatchSemaphore(value: 0)
        async let released = model.drag(announcing: dragging, until: { touches.hasReleased })
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                dragging.wait()
                continuation.resume()
            }
        }
        await touches.release()  // an actor job for the tracking executor, while the drag runs tracking
        #expect(await released, "the touch-up never ran inside the drag")
    }
}

private actor TouchHandler {
    let executor: LoopExecutor
    private let released = Atomic<Bool>(false)

    init(executor: LoopExecutor) {
        self.executor = executor
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    nonisolated var hasReleased: Bool {
        self.released.load(ordering: .acquiring)
    }

    func release() {
        self.released.store(true, ordering: .releasing)
    }
}

private actor DraggingModel {
    let executor: LoopExecutor
    private(set) var log: [String] = []

    init(executor: LoopExecutor) {
        self.executor = executor
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    func drag(announcing started: DispatchSemaphore) {
        self.log.append("drag begins")
        started.signal()
        let loop = self.executor.loop
        loop.run(mode: .tracking, before: loop.now + .milliseconds(100))
        self.log.append("drag ends")
    }

    /// Runs `tracking` until `isReleased` holds, for up to 30 s (a hang guard); returns whether it did.
    func drag(announcing started: DispatchSemaphore, until isReleased: @escaping @Sendable () -> Bool) -> Bool {
        started.signal()
        let loop = self.executor.loop
        let limit = loop.now + .seconds(30)
        while !isReleased() && loop.now < limit {
            loop.run(mode: .tracking, before: loop.now + .milliseconds(10))
        }
        return isReleased()
    }

    func note(_ entry: String) {
        self.log.append(entry)
    }
}
