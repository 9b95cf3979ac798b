import Dispatch
import Testing
@testable import LoopKit

/// An item invalidated from another thread lets go of its callback, and of what the callback captured, before
/// `invalidate()` returns, while its loop's thread is elsewhere: CF lets go of an item's context in its invalidate.
/// The item itself leaves its modes at the loop's next pass. A task whose loop ends before it ran is cancelled.
extension ReleaseTests {
    /// Every kind of item with a callback of the user's.
    enum ItemKind: CaseIterable, Sendable {
        case timer, source, descriptorSource, observer, displayLink
    }

    /// An item of `kind` in `loop`'s default mode, how to invalidate it, and what its callback alone captures.
    static func item(
        _ kind: ItemKind, in loop: Loop, pipe: TestPipe
    ) -> (item: AnyObject & Sendable, invalidate: @Sendable () -> Void, captured: WeakPayload) {
        let payload = Payload()
        let (item, invalidate) = Self.item(kind, capturing: payload, in: loop, pipe: pipe)
        return (item, invalidate, WeakPayload(payload))
    }

    private static func item(
        _ kind: ItemKind, capturing payload: Payload, in loop: Loop, pipe: TestPipe
    ) -> (item: AnyObject & Sendable, invalidate: @Sendable () -> Void) {
        switch kind {
        case .timer:
            let timer = LoopTimer(interval: .seconds(60)) { _ in _ = payload }
            loop.add(timer, forMode: .default)
            return (timer, timer.invalidate)
        case .source:
            let source = LoopSource { _ in _ = payload }
            loop.add(source, forMode: .default)
            return (source, source.invalidate)
        case .descriptorSource:
            let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in _ = payload }
            loop.add(source, forMode: .default)
            return (source, source.invalidate)
        case .observer:
            let observer = LoopObserver(activities: .allActivities) { _, _ in _ = payload }
            loop.add(observer, forMode: .default)
            return (observer, observer.invalidate)
        case .displayLink:
            let link = LoopDisplayLink(preferredRate: 60) { _, _ in _ = payload }
            loop.add(link, forMode: .default)
            return (link, link.invalidate)
        }
    }

    @Test(arguments: ItemKind.allCases)
    func anItemInvalidatedFromAnotherThreadLetsGoOfWhatItsCallbackCapturedAtOnce(_ kind: ItemKind) throws {
        let loop = try Loop(clock: ManualLoopClock())  // this thread's, and not running while the other thread acts
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        weak var weakItem: AnyObject?
        do {
            let (item, invalidate, payload) = Self.item(kind, in: loop, pipe: pipe)
            weakItem = item
            loop.runOnePass()  // in its mode now
            #expect(payload.payload != nil)
            let seenByTheInvalidatingThread = Recorder<Bool>()
            withExtendedLifetime(item) {  // held here and by its mode: only the callback is let go of
                onAnotherThread {
                    invalidate()
                    seenByTheInvalidatingThread.append(payload.payload == nil)
                }
            }
            #expect(seenByTheInvalidatingThread.elements == [true])
        }
        loop.runOnePass()  // the pass that takes the item out of its mode
        #expect(weakItem == nil)
    }

    @Test func aOneShotTimerLetsGoOfItsCallbackOnceItHasFiredThoughItsOwnerKeepsIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let payload: WeakPayload
        let fired = Recorder<Int>()
        let timer: LoopTimer
        do {
            let captured = Payload()
            payload = WeakPayload(captured)
            timer = LoopTimer(interval: .milliseconds(5)) { _ in _ = captured; fired.append(1) }
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(fired.elements == [1])
        #expect(!timer.isValid)
        #expect(payload.payload == nil)
    }

    /// `onUnschedule` still runs on the loop's thread, at its next pass, for a source another thread invalidated; the
    /// source lets go of it after that call.
    @Test func aSourceInvalidatedFromAnotherThreadIsUnscheduledOnItsLoopsThreadThenLetsGoOfTheCallback() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let unscheduled = Recorder<Bool>()
        let (performPayload, unschedulePayload): (WeakPayload, WeakPayload)
        let source: LoopSource
        do {
            let (forPerform, forUnschedule) = (Payload(), Payload())
            (performPayload, unschedulePayload) = (WeakPayload(forPerform), WeakPayload(forUnschedule))
            source = LoopSource(onUnschedule: { _, _ in
                _ = forUnschedule
                unscheduled.append(loop.isCurrent)
            }) { _ in _ = forPerform }
        }
        loop.add(source, forMode: .default)
        onAnotherThread { source.invalidate() }
        #expect(performPayload.payload == nil)
        #expect(unschedulePayload.payload != nil)  // owed a call on the loop's thread
        #expect(unscheduled.elements.isEmpty)
        loop.runOnePass()
        #expect(unscheduled.elements == [true])
        #expect(unschedulePayload.payload == nil)
    }

    /// However a source leaves its last mode before or as it is invalidated, it ends up holding none of its callbacks.
    @Test func aSourceRemovedBeforeItIsInvalidatedLetsGoOfItsScheduleCallbacks() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let (source, captured) = Self.sourceWithEveryCallback()
        loop.add(source, forMode: .default)
        loop.remove(source, forMode: .default)
        #expect(captured.payload != nil)  // still valid: it may join a mode again
        source.invalidate()
        #expect(captured.payload == nil)
    }

    @Test func aSourceInvalidatedBeforeAnotherThreadsAddArrivedLetsGoOfItsCallbacksAtThatPass() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let (source, captured) = Self.sourceWithEveryCallback()
        onAnotherThread {
            loop.add(source, forMode: .default)
            source.invalidate()
        }
        loop.runOnePass()
        #expect(captured.payload == nil)
    }

    @Test func aSourceInvalidatedAfterItsLoopEndedLetsGoOfItsCallbacksAtOnce() throws {
        let thread = try LoopThread(name: "ended-before-invalidate")
        let (source, captured) = Self.sourceWithEveryCallback()
        thread.loop.add(source, forMode: .default)
        thread.shutdownAndJoin()
        source.invalidate()
        #expect(captured.payload == nil)
    }

    /// A signalled source with all three callbacks, which alone capture the payload.
    static func sourceWithEveryCallback() -> (LoopSource, WeakPayload) {
        let payload = Payload()
        let source = LoopSource(onSchedule: { _, _ in _ = payload }, onUnschedule: { _, _ in _ = payload }) { _ in
            _ = payload
        }
        return (source, WeakPayload(payload))
    }

    /// Non-`Sendable` captures of an item made through the isolated view are let go of on the loop's thread, at its
    /// next pass, when another thread invalidates the item: their deinit never runs elsewhere.
    @Test func anIsolatedItemInvalidatedFromAnotherThreadLetsGoOfItsCapturesOnTheLoopsThread() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let released = Recorder<Bool>()
        let timer = Self.isolatedTimer(on: loop) { released.append(loop.isCurrent) }
        loop.add(timer, forMode: .default)
        onAnotherThread { timer.invalidate() }
        #expect(released.elements.isEmpty)
        loop.runOnePass()
        #expect(released.elements == [true])
    }

    /// An item made on the isolated view holds its loop weakly, as every item does: the loop is freed once let go of.
    @Test func aLoopWhoseItemsWereMadeOnItsIsolatedViewIsFreed() throws {
        weak var weakLoop: Loop?
        do {
            let loop = try Loop(clock: ManualLoopClock())
            weakLoop = loop
            let timer = LoopTimer(interval: .seconds(1), repeats: true, on: loop.assumeIsolated()) { _ in }
            loop.add(timer, forMode: .default)
            loop.add(LoopObserver(activities: .allActivities, on: loop.assumeIsolated()) { _, _ in }, forMode: .default)
            loop.runOnePass()
        }
        #expect(weakLoop == nil)
    }

    /// A timer made through `loop`'s isolated view whose callback alone captures a non-`Sendable` value that calls
    /// `deinitialized` from its deinit.
    static func isolatedTimer(on loop: Loop, deinitialized: @escaping () -> Void) -> LoopTimer {
        final class Tracked {
            let deinitialized: () -> Void
            init(_ deinitialized: @escaping () -> Void) { self.deinitialized = deinitialized }
            deinit { self.deinitialized() }
        }
        let tracked = Tracked(deinitialized)
        return LoopTimer(interval: .seconds(60), on: loop.assumeIsolated()) { _ in _ = tracked }
    }

    /// The loop's reference keeps a running callback's captures alive when another thread invalidates its timer.
    @Test func aCallbackRunningWhileAnotherThreadInvalidatesItsTimerFinishesWithItsCaptures() throws {
        let thread = try LoopThread(name: "invalidated-mid-call")
        defer { thread.shutdownAndJoin() }
        let started = DispatchSemaphore(value: 0)
        let invalidated = DispatchSemaphore(value: 0)
        let seenAfterwards = Recorder<Bool>()
        let payload: WeakPayload
        let timer: LoopTimer
        do {
            let captured = Payload()
            payload = WeakPayload(captured)
            timer = LoopTimer(interval: .milliseconds(1)) { _ in
                started.signal()
                invalidated.wait()
                withExtendedLifetime(captured) { seenAfterwards.append(true) }
            }
        }
        thread.loop.add(timer, forMode: .default)
        started.wait()
        timer.invalidate()
        #expect(payload.payload != nil)  // the running call still holds it
        invalidated.signal()
        #expect(waitUntil { payload.payload == nil })
        #expect(seenAfterwards.elements == [true])
    }

    @Test func aPendingTaskIsCancelledWhenItsLoopThreadEnds() throws {
        let thread = try LoopThread(name: "ending-with-a-task")
        let ran = Recorder<Int>()
        let payload: WeakPayload
        let (once, repeating): (LoopScheduledTask, LoopScheduledTask)
        do {
            let captured = Payload()
            payload = WeakPayload(captured)
            once = thread.loop.schedule(after: .seconds(3600)) { _ = captured; ran.append(1) }
            repeating = thread.loop.scheduleRepeating(initialDelay: .seconds(3600), every: .seconds(1)) { _ in
                _ = captured
                ran.append(2)
            }
        }
        #expect(!once.isCancelled && !repeating.isCancelled)
        thread.shutdownAndJoin()
        #expect(once.isCancelled && repeating.isCancelled)
        #expect(payload.payload == nil)
        #expect(ran.elements.isEmpty)
        let completions = Recorder<Int>()
        once.cancel { completions.append(1) }
        #expect(completions.elements == [1])
    }

    @Test func aTaskThatRanIsNotCancelledWhenItsLoopEnds() throws {
        let thread = try LoopThread(name: "ending-after-a-task")
        let ran = DispatchSemaphore(value: 0)
        let task = thread.loop.schedule(after: .milliseconds(1)) { ran.signal() }
        ran.wait()
        thread.shutdownAndJoin()
        #expect(!task.isCancelled)
    }

    /// A cancel after a one-shot task ran changes nothing but calls its completion: the task ran, it was not
    /// cancelled.
    @Test func cancellingATaskThatRanLeavesItNotCancelled() throws {
        let thread = try LoopThread(name: "cancel-after-a-task")
        defer { thread.shutdownAndJoin() }
        let ran = DispatchSemaphore(value: 0)
        let task = thread.loop.schedule(after: .milliseconds(1)) { ran.signal() }
        ran.wait()
        _ = waitUntil { thread.loop.isWaiting }  // the run that ran it has returned: the task is spent
        let completed = DispatchSemaphore(value: 0)
        task.cancel { completed.signal() }
        #expect(completed.wait(timeout: .now() + 10) == .success)
        #expect(!task.isCancelled)
    }
}
