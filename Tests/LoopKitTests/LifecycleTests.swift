#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import Testing
@testable import LoopKit

/// Items and loops come and go: queues stay bounded, loops and links are freed, items can move to a new loop.
@Suite("Lifecycles of loops and items", .serialized, .timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test func aCommonModeTimerDoesNotPileUpEntriesInTheCommonModesThatAreNotRunning() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        var fires = 0
        loop.add(LoopTimer(interval: .milliseconds(1), repeats: true, on: loop.assumeIsolated()) { _ in
            fires += 1
        }, forMode: .common)
        loop.run(mode: .default, before: clock.now + .seconds(10))
        #expect(fires == 10_000)
        #expect(loop.modeItems(for: .tracking).timers.count < 200)
    }

    @Test func aCommonModeDisplayLinkDoesNotPileUpEntriesInTracking() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let link = LoopDisplayLink(display: .default) { _, _ in }
        loop.add(link, forMode: .common)
        loop.run(mode: .default, before: clock.now + .seconds(60))
        #expect(loop.modeItems(for: .tracking).timers.count < 200)
        link.invalidate()
    }

    @Test func reArmingATimerAgainAndAgainKeepsItsQueueBounded() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let idle = LoopTimer(interval: .seconds(3600)) { _ in }
        loop.add(idle, forMode: .default)
        for _ in 0..<20_000 {
            idle.setNextFireDate(clock.now + .seconds(3600))  // "activity seen: push the timeout back"
            loop.run(mode: .default, before: clock.now)
        }
        #expect(loop.modeItems(for: .default).timers.count < 200)
    }

    @Test func aTimerWhoseLoopWentAwayFiresInTheNextLoopItJoins() throws {
        let clock = ManualLoopClock()
        let fired = Recorder<Int>()  // Sendable: the timer is bound to no loop, it moves from one to the next
        let timer = LoopTimer(interval: .milliseconds(10)) { _ in fired.append(1) }
        weak var firstLoop: Loop?
        do {
            let first = try Loop(clock: clock)
            first.add(timer, forMode: .default)
            firstLoop = first
        }
        #expect(firstLoop == nil)
        let second = try Loop(clock: clock)
        second.add(timer, forMode: .default)
        #expect(second.contains(timer, inMode: .default))
        #expect(second.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(fired.count == 1)
    }

    @Test func aBurstOfCrossThreadReArmsOfOneTimerCoalescesAndTheLastOneWins() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<LoopInstant>()
        let timer = LoopTimer(interval: .seconds(1)) { _ in fired.append(clock.now) }
        loop.add(timer, forMode: .default)
        let start = clock.now
        let rearmer = startThread {
            for step in 1...100_000 {
                timer.setNextFireDate(start + .microseconds(step))  // unpaced: the loop is not running meanwhile
            }
        }
        rearmer.join()
        #expect(loop.state.withLock { $0.pendingControlMessageCount } <= 1)  // not 100,000 queued changes
        loop.run(mode: .default, before: start + .seconds(2))
        #expect(fired.elements == [start + .microseconds(100_000)])  // the last date, once
    }

    @Test func anItemAddedToAnEndedLoopThreadIsRefusedAndStaysFreeToJoinAnotherLoop() throws {
        let ended = try LoopThread(name: "ended")
        ended.shutdownAndJoin()
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .milliseconds(10)) { _ in fired.append(1) }
        #expect(ended.loop.add(timer, forMode: .default) == false)  // not silently dropped: the caller is told
        let clock = ManualLoopClock()
        let other = try Loop(clock: clock)
        defer { other.invalidate() }
        #expect(other.add(timer, forMode: .default))  // not bound to the ended loop: no "belongs to another loop" trap
        #expect(other.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(fired.count == 1)
        withExtendedLifetime(ended) {}
    }

    /// A producer racing a `LoopThread`'s shutdown: every block `performUnlessEnded` accepted runs (in the final drain
    /// if need be), every one it refused is let go of unrun, and nothing traps.
    @Test func performUnlessEndedRacesAShutdownWithoutTrappingOrLosingAnAcceptedBlock() throws {
        let thread = try LoopThread(name: "racing-shutdown")
        let accepted = AtomicCounter()
        let ran = AtomicCounter()
        let refusedBlocksFreed = AtomicCounter()
        let producer = startThread {
            var refusals = 0
            while refusals < 3 {
                let witness = DeinitCounter(refusedBlocksFreed)
                if thread.loop.performUnlessEnded({ withExtendedLifetime(witness) { ran.increment() } }) {
                    accepted.increment()
                } else {
                    refusals += 1
                }
            }
        }
        _ = waitUntil { accepted.current >= 100 }
        thread.shutdownAndJoin()
        producer.join()
        #expect(accepted.current >= 100)
        #expect(ran.current == accepted.current)
        #expect(refusedBlocksFreed.current >= 3 + accepted.current, "each refused block let go of at once")
        #expect(thread.loop.performUnlessEnded(inModes: [.tracking]) {} == false)
    }

    @Test func aSourceWhoseLoopWentAwayIsScheduledAndRunsInTheNextLoop() throws {
        let ran = Recorder<Int>()
        let scheduled = Recorder<LoopMode>()
        let source = LoopSource(onSchedule: { _, mode in scheduled.append(mode) }, { _ in ran.append(1) })
        do {
            let first = try Loop(clock: ManualLoopClock())
            first.add(source, forMode: .default)
        }
        let second = try Loop(clock: ManualLoopClock())
        second.add(source, forMode: .default)
        source.signal()
        second.run(mode: .default, before: second.now)
        #expect(scheduled.elements == [.default, .default])
        #expect(ran.count == 1)
    }

    @Test func anItemChangeQueuedToAnEndedLoopDoesNotKeepTheLoopAlive() throws {
        weak var weakLoop: Loop?
        do {
            let thread = try LoopThread()
            weakLoop = thread.loop
            let timer = LoopTimer(interval: .seconds(3600), repeats: true) { _ in }
            thread.loop.add(timer, forMode: .default)
            thread.shutdownAndJoin()
            timer.invalidate()  // e.g. from the owner's deinit, after the helper thread ended
        }
        #expect(weakLoop == nil)
    }

    @Test func aThreadsLoopIsFreedAtThreadExitEvenWhenItsItemsCaptureIt() {
        final class WeakBox: @unchecked Sendable { weak var loop: Loop? }
        let box = WeakBox()
        let cancelled = Recorder<LoopMode>()
        onAnotherThread {
            let loop = Loop.current
            box.loop = loop
            loop.add(LoopTimer(interval: .seconds(1), repeats: true) { _ in loop.stop() }, forMode: .default)
            loop.add(LoopSource(onUnschedule: { _, mode in cancelled.append(mode) }, { _ in loop.stop() }),
                     forMode: .default)
        }
        #expect(box.loop == nil)
        #expect(cancelled.elements == [.default])  // as CF cancels the sources of a finalized run loop
    }

    @Test func theTeardownAtThreadExitRunsAsTheLoopsOwnThread() {
        let seen = Recorder<Bool>()
        onAnotherThread {
            _ = ThreadLocal.currentToken  // the token's slot first, as in most processes: glibc clears it first too
            let loop = Loop.current
            loop.add(LoopSource(onUnschedule: { _, _ in seen.append(loop.isCurrent) }, { _ in }), forMode: .default)
        }
        #expect(seen.elements == [true])
    }

    @Test func loopCurrentDuringTheTeardownAtThreadExitIsTheEndingLoopNotANewOne() {
        let seen = Recorder<Bool>()
        onAnotherThread {
            let loop = Loop.current
            loop.add(LoopSource(onUnschedule: { _, _ in seen.append(Loop.current === loop) }, { _ in }),
                     forMode: .default)
        }
        #expect(seen.elements == [true])
    }

    @Test func aLoopThreadReleasedByItsOwnTeardownDoesNotJoinItself() throws {
        _ = ThreadLocal.currentToken
        weak var released: LoopThread?
        do {
            let thread = try LoopThread()
            thread.loop.add(LoopSource { _ in _ = thread }, forMode: .default)  // the source keeps the helper alive
            released = thread
            thread.shutdown()
        }
        #expect(waitUntil { released == nil })  // released on its own thread at exit: detached, not joined
    }

    @Test func performOnTheLoopOfAThreadThatExitedIsAPreconditionFailure() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            final class Box: @unchecked Sendable { var loop: Loop? }
            let box = Box()
            onAnotherThread { box.loop = Loop.current }
            box.loop?.perform {}
        }
        #expect(result?.standardErrorText.contains("the loop has ended") == true)
    }

    @Test func aDisplayLinkThatIsNotScheduledIsFreed() throws {
        weak var neverAdded: LoopDisplayLink?
        do {
            let link = LoopDisplayLink { _, _ in }
            neverAdded = link
        }
        #expect(neverAdded == nil)
        weak var inAFreedLoop: LoopDisplayLink?
        weak var freedLoop: Loop?
        do {
            let loop = try Loop(clock: ManualLoopClock())
            defer { loop.invalidate() }
            let link = LoopDisplayLink { _, _ in }
            loop.add(link, forMode: .default)
            inAFreedLoop = link
            freedLoop = loop
        }
        #expect(freedLoop == nil)
        #expect(inAFreedLoop == nil)
    }

    @Test func aScheduledDisplayLinkKeepsTickingWithoutAReferenceFromTheCaller() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<Int64>()
        loop.add(LoopDisplayLink { link, frame in
            frames.append(frame.index)
            if frames.count == 3 { link.invalidate() }
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(frames.count == 3)
    }

    @Test func aLinkLeftOnlyInTheCommonItemsIsKeptAndTicksInAModeMadeCommonLater() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<Int64>()
        weak var weakLink: LoopDisplayLink?
        do {
            let link = LoopDisplayLink(display: .sixtyHertz) { _, frame in frames.append(frame.index) }
            weakLink = link
            loop.add(link, forMode: .common)
            // Removed by name from each real mode, as CF allows: the link stays in the common items.
            loop.remove(link, forMode: .default)
            loop.remove(link, forMode: .tracking)
        }
        #expect(weakLink != nil)
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        #expect(frames.count == 0)
        loop.addCommonMode("panel")  // brings every common item into the new mode, the link included
        loop.run(mode: "panel", before: clock.now + .milliseconds(50))
        #expect(frames.count == 3)
        weakLink?.invalidate()
        #expect(weakLink == nil)
    }

    @Test func aLinkRemovedFromTheCommonItemsWhileInNoModeIsFreed() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        weak var weakLink: LoopDisplayLink?
        do {
            let link = LoopDisplayLink { _, _ in }
            weakLink = link
            loop.add(link, forMode: .common)
            loop.remove(link, forMode: .default)
            loop.remove(link, forMode: .tracking)
        }
        if let link = weakLink {
            loop.remove(link, forMode: .common)
        }
        #expect(weakLink == nil)
        loop.addCommonMode("panel")
        loop.run(mode: "panel", before: loop.now + .milliseconds(50))
    }

    /// Something a link's callback captures, that says when it is freed.
    private final class Capture: @unchecked Sendable {
        let freed: Recorder<Bool>
        init(_ freed: Recorder<Bool>) { self.freed = freed }
        deinit { self.freed.append(true) }
    }

    /// Adds a link capturing a `Capture` to `.common` of `loop`, then removes it by name from each real mode, as CF
    /// allows: it is left only in the common items. Returns the link, weakly.
    private static func addLinkLeftOnlyInTheCommonItems(
        to loop: Loop, freed: Recorder<Bool>
    ) -> () -> LoopDisplayLink? {
        let capture = Capture(freed)
        let link = LoopDisplayLink { _, _ in _ = capture }
        loop.add(link, forMode: .common)
        loop.remove(link, forMode: .default)
        loop.remove(link, forMode: .tracking)
        return { [weak link] in link }
    }

    @Test func aLinkLeftOnlyInTheCommonItemsIsFreedWhenItsLoopIsInvalidated() throws {
        let loop = try Loop(clock: ManualLoopClock())
        let freed = Recorder<Bool>()
        let weakLink = Self.addLinkLeftOnlyInTheCommonItems(to: loop, freed: freed)
        #expect(weakLink() != nil)  // held by the common items while the loop lives
        loop.invalidate()
        #expect(weakLink() == nil)
        #expect(freed.elements == [true])  // and what its callback captured
    }

    @Test func aLinkLeftOnlyInTheCommonItemsIsFreedWithItsLoop() throws {
        let freed = Recorder<Bool>()
        weak var weakLoop: Loop?
        var weakLink: () -> LoopDisplayLink? = { nil }
        do {
            let loop = try Loop(clock: ManualLoopClock())  // let go of without `invalidate()`
            weakLoop = loop
            weakLink = Self.addLinkLeftOnlyInTheCommonItems(to: loop, freed: freed)
        }
        #expect(weakLoop == nil)
        #expect(weakLink() == nil)
        #expect(freed.elements == [true])
    }

    @Test func aLinkLeftOnlyInTheCommonItemsOfALoopThreadIsFreedWhenTheThreadEnds() throws {
        final class WeakLinkBox: @unchecked Sendable { var link: () -> LoopDisplayLink? = { nil } }
        let freed = Recorder<Bool>()
        let box = WeakLinkBox()
        let added = DispatchSemaphore(value: 0)
        let thread = try LoopThread()
        thread.loop.perform {
            box.link = Self.addLinkLeftOnlyInTheCommonItems(to: thread.loop, freed: freed)
            added.signal()
        }
        added.wait()
        #expect(box.link() != nil)
        thread.shutdownAndJoin()
        #expect(box.link() == nil)
        #expect(freed.elements == [true])
    }

    @Test func anInvalidatedSourceLeftOnlyInTheCommonItemsLetsGoOfItsCallbacksWhenItsLoopEnds() throws {
        let freed = Recorder<Bool>()
        let loop = try Loop(clock: ManualLoopClock())
        let source: LoopSource
        do {
            let capture = Capture(freed)
            source = LoopSource(onSchedule: { _, _ in _ = capture }, onUnschedule: { _, _ in _ = capture }) { _ in }
        }
        loop.add(source, forMode: .common)
        loop.remove(source, forMode: .default)
        loop.remove(source, forMode: .tracking)
        onAnotherThread { source.invalidate() }  // its removal is queued for the loop's next pass, which never comes
        #expect(freed.elements.isEmpty)
        loop.invalidate()
        #expect(freed.elements == [true])  // while the caller still holds the source
        withExtendedLifetime(source) {}
    }

    @Test func aSourceSignalledInALoopThatWentAwayRunsInTheNextLoopItJoins() throws {
        let runs = Recorder<Int>()
        let source = LoopSource { _ in runs.append(runs.count + 1) }
        do {
            let first = try Loop(clock: ManualLoopClock())  // let go of without `invalidate()`
            first.add(source, forMode: .default)
            first.add(LoopTimer(interval: .seconds(3_600)) { _ in }, forMode: "other")
            source.signal()
            // A pass of another mode takes the signal among its candidates, and leaves it for `.default`.
            #expect(first.run(mode: "other", before: first.now + .milliseconds(1)) == .timedOut)
        }
        #expect(runs.elements.isEmpty)
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        loop.add(source, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(10), returnAfterSourceHandled: true)
                    == .handledSource)
        source.signal()
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(10), returnAfterSourceHandled: true)
                    == .handledSource)
        #expect(runs.elements == [1, 2])  // the signal from before the move, and a later one
    }

    @Test func anItemIsAdoptedByAnotherLoopOnlyOnceItsLoopsTeardownHasLetGoOfIt() throws {
        let loop = try Loop(clock: ManualLoopClock())
        let other = try LoopThread()
        defer { other.shutdownAndJoin() }
        let fires = Recorder<Int>()
        let timer = LoopTimer(interval: .milliseconds(2), repeats: true) { _ in fires.append(1) }
        let unscheduled = DispatchSemaphore(value: 0)
        let adopted = DispatchSemaphore(value: 0)
        // The teardown takes sources out of a mode before its timers; this callback gives another thread the time to
        // adopt the timer while it would still be in this loop's mode, if the callback ran in the middle of the
        // teardown.
        loop.add(LoopSource(onUnschedule: { _, _ in
            unscheduled.signal()
            usleep(50_000)
        }) { _ in }, forMode: .default)
        loop.add(timer, forMode: .default)
        let added = Recorder<Bool>()
        DispatchQueue.global().async {
            unscheduled.wait()
            added.append(other.loop.add(timer, forMode: .default))
            adopted.signal()
        }
        loop.invalidate()
        adopted.wait()
        #expect(added.elements == [true])
        #expect(waitUntil { fires.count >= 2 })  // it ticks in its new loop
        // And it is that loop's, whole: removed, it leaves the mode empty.
        other.loop.remove(timer, forMode: .default)
        let isEmpty = Recorder<Bool>()
        let looked = DispatchSemaphore(value: 0)
        other.loop.perform {
            isEmpty.append(other.loop.modeItemsByMode[.default].map { $0.timers.count == 0 } ?? true)
            looked.signal()
        }
        looked.wait()
        #expect(isEmpty.elements == [true])
        #expect(timer.isValid)
    }

    @Test func addingADisplayLinkToASecondLoopIsAPreconditionFailureNamingTheLink() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let first = try Loop(clock: ManualLoopClock())
            let second = try Loop(clock: ManualLoopClock())
            let link = LoopDisplayLink { _, _ in }
            first.add(link, forMode: .default)
            withExtendedLifetime(first) { _ = second.add(link, forMode: .default) }
        }
        #expect(result?.standardErrorText.contains("this LoopDisplayLink already belongs to another loop") == true)
    }

    @Test func aRunNestedInADescriptorHandlerLeavesNoStaleReportForTheOuterPass() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let first = try TestPipe()
        let second = try TestPipe()
        var nested = false
        var secondReads: [String] = []
        loop.add(LoopDescriptorSource(descriptor: first.readEnd, events: .readable, order: 0,
                                      on: loop.assumeIsolated()) { _, _ in
            first.readAll()
            if !nested {
                nested = true
                loop.run(mode: .default, before: loop.now)
            }
        }, forMode: .default)
        loop.add(LoopDescriptorSource(descriptor: second.readEnd, events: .readable, order: 1,
                                      on: loop.assumeIsolated()) { _, events in
            secondReads.append("\(events):'\(second.readAll())'")
        }, forMode: .default)
        first.write()
        second.write("data")
        loop.run(mode: .default, before: loop.now)
        #expect(secondReads == ["[readable]:'data'"])
    }

    @Test func aBlockThatKeepsRequeueingItselfDuringShutdownIsAPreconditionFailureNotAHang() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread()
            let loop = thread.loop
            @Sendable func again() { loop.perform(again) }
            thread.perform(again)
            thread.shutdownAndJoin()
        }
        #expect(result?.standardErrorText.contains("the loop has ended") == true)
    }

    @Test func aRunStartedByAJobOfTheFinalDrainAtThreadExitReturnsStoppedWithoutAPass() {
        let seen = Recorder<String>()
        onAnotherThread {
            let loop = Loop.current
            loop.add(LoopTimer(fireAt: loop.now, interval: .zero) { _ in seen.append("timer fired") },
                     forMode: .default)
            loop.enqueueJob(inModes: .single(.default), serialExecutor: nil) {
                let result = loop.run(mode: .default, before: loop.now + .seconds(1))
                seen.append("nested run: \(result)")
                loop.invalidate()  // from inside the end: returns at once
                seen.append("invalidate() returned")
            }
        }
        #expect(seen.elements == ["nested run: stopped", "invalidate() returned"])
    }

    @Test func blocksOfEveryModeStillQueuedAtShutdownRun() throws {
        let thread = try LoopThread()
        let ran = Recorder<String>()
        thread.loop.perform(inModes: [.tracking]) { ran.append("tracking") }
        thread.perform { ran.append("default") }
        thread.shutdownAndJoin()
        #expect(Set(ran.elements) == ["tracking", "default"])
    }
}

@Suite("Pass details")
struct PassDetailTests {
    @Test func aBlockQueuedByTheFirstDrainRunsAtTheSecondBeforeTheLoopSleeps() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeTimers, .beforeSources, .beforeWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.perform {
            trace.append("first")
            loop.perform { trace.append("second") }
        }
        loop.run(mode: .default, before: clock.now + .milliseconds(1))
        #expect(Array(trace.elements.prefix(5)) == ["beforeTimers", "beforeSources", "first", "second", "beforeWaiting"])
    }

    @Test func afterWakingTimersFireThenDescriptorSourcesThenBlocks() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let trace = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            trace.append("descriptor")
            pipe.readAll()
        }, forMode: .default)
        loop.add(LoopTimer(interval: .zero) { _ in
            trace.append("timer")
            loop.perform { trace.append("block") }
        }, forMode: .default)
        pipe.write()
        loop.run(mode: .default, before: clock.now)
        #expect(trace.elements == ["timer", "descriptor", "block"])
    }

    @Test func aTimerOfAnotherModeDoesNotWakeTheLoop() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let wakes = Recorder<LoopInstant>()
        loop.add(LoopObserver(activities: .afterWaiting) { _, _ in wakes.append(clock.now) }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in }, forMode: .tracking)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let deadline = clock.now + .milliseconds(20)
        #expect(loop.run(mode: .default, before: deadline) == .timedOut)
        #expect(wakes.elements == [deadline])
    }

    @Test func handledSourceWinsOverFinished() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let source = LoopSource { source in source.invalidate() }  // the mode becomes empty in the same pass
        loop.add(source, forMode: .default)
        source.signal()
        #expect(loop.run(mode: .default, before: .distantFuture, returnAfterSourceHandled: true) == .handledSource)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
    }

    /// DESIGN §2: a run finishes "also when the mode becomes empty", and it may become empty as the loop is about to
    /// sleep: a `beforeWaiting` observer that invalidates the last timer leaves nothing that could end the sleep.
    @Test func aModeEmptiedAtBeforeWaitingFinishesInsteadOfSleeping() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let timer = LoopTimer(interval: .seconds(10)) { _ in }
        loop.add(timer, forMode: .default)
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting, .exit]) { _, activity in
            trace.append("\(activity)")
            if activity == .beforeWaiting {
                timer.invalidate()
            }
        }, forMode: .default)
        let start = clock.now
        #expect(loop.run(mode: .default, before: clock.now + .seconds(60)) == .finished)
        #expect(clock.now == start)  // returned without waiting for the deadline
        #expect(trace.elements == ["\(LoopActivity.beforeWaiting)", "\(LoopActivity.afterWaiting)",
                                   "\(LoopActivity.exit)"])
    }

    @Test func aDisplayLinkRemovedFromItsModeStopsTicking() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<Int64>()
        let link = LoopDisplayLink(display: .sixtyHertz) { _, frame in frames.append(frame.index) }
        loop.add(link, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        let seen = frames.count
        #expect(seen == 3)
        loop.remove(link, forMode: .default)
        #expect(!loop.contains(link, inMode: .default))
        loop.run(mode: .default, before: clock.now + .milliseconds(50))
        #expect(frames.count == seen)
        #expect(link.isValid)
    }

    @Test func theSystemClockIsTheMonotonicClockInNanoseconds() {
        var before = timespec()
        var after = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        let now = SystemLoopClock().now
        clock_gettime(CLOCK_MONOTONIC, &after)
        let low = UInt64(before.tv_sec) * 1_000_000_000 + UInt64(before.tv_nsec)
        let high = UInt64(after.tv_sec) * 1_000_000_000 + UInt64(after.tv_nsec)
        #expect(now.nanoseconds >= low)
        #expect(now.nanoseconds <= high)
    }
}
