#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import Testing
@testable import LoopKit

/// A loop driven from a host loop written here with plain poll(2), as GLib or SDL would drive it: the driver's one
/// descriptor becomes readable for timers, ready descriptors and work queued from other threads.
@Suite("Driving a loop from a host loop", .serialized, .timeLimit(.minutes(1)))
struct HostDriverTests {
    /// One turn of the host: prepare, poll the driver's descriptor (for at most the timeout it asks), dispatch.
    private func hostTurn(_ driver: LoopHostDriver) {
        let timeout = driver.prepare()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = timeout.map { Int32(clamping: Int64(($0 / .milliseconds(1)).rounded(.up))) } ?? 5_000
        _ = poll(&watched, 1, milliseconds)
        driver.dispatch()
    }

    @Test func aDriverOfALoopThatHasEndedGoesQuietInsteadOfMakingTheHostSpin() throws {
        let loop = try Loop()
        let driver = try LoopHostDriver(loop: loop)
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        // Registered, the timer armed, the wait announced (`.zero` if the 1 ms timer is due already: a slow machine).
        #expect(driver.prepare() != nil)
        loop.wakeUp()  // a wake-up byte in the channel
        pipe.write()  // a ready descriptor
        loop.invalidate()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        for _ in 0..<3 {
            #expect(driver.prepare() == nil)
            #expect(poll(&watched, 1, 20) == 0, "the timer's date passes too, and nothing makes it readable")
            #expect(driver.dispatch() == .finished)
        }
    }

    @Test func timersDescriptorsAndWorkFromOtherThreadsAllArriveThroughTheOneDescriptor() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        let events = Recorder<String>()
        let start = loop.now
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in events.append("timer") }, forMode: .default)
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            pipe.readAll()
            events.append("descriptor")
        }, forMode: .default)
        let producer = startThread {
            _ = waitUntil { events.elements.contains("timer") && loop.isWaiting }
            loop.perform { events.append("block") }
            _ = waitUntil { events.elements.contains("block") && loop.isWaiting }
            pipe.write()
        }
        while events.count < 3, loop.now < start + .seconds(30) {
            self.hostTurn(driver)
        }
        producer.join()
        #expect(events.elements == ["timer", "block", "descriptor"])
        #expect(loop.now - start >= .milliseconds(20))
    }

    /// When `prepare()` answers `.zero`, the descriptor is readable too: a host that watches only the descriptor
    /// (GLib's `g_unix_fd_add`) dispatches at once, whatever made the answer (queued work, a due timer).
    @Test func aZeroAnswerMakesTheDescriptorReadable() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let ran = Recorder<String>()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        loop.perform { ran.append("block") }  // queued while no wait is announced: no wake-up byte is written
        #expect(driver.prepare() == .zero)
        #expect(poll(&watched, 1, 2_000) == 1)  // the timer's expiry arrives by interrupt: at once, give or take
        driver.dispatch()
        #expect(ran.elements == ["block"])
        loop.add(LoopTimer(fireAt: loop.now) { _ in ran.append("timer") }, forMode: .default)  // due now
        #expect(driver.prepare() == .zero)
        #expect(poll(&watched, 1, 2_000) == 1)
        driver.dispatch()
        #expect(ran.elements == ["block", "timer"])
        #expect(driver.prepare() != .zero)
        #expect(poll(&watched, 1, 0) == 0, "re-armed for the next timer, an hour away")
        driver.dispatch()
    }

    /// `Loop.stop()` reaches a host-driven loop: made while the host sleeps on the descriptor (from another thread,
    /// which wakes it) or during a pass (a callback), it makes that `dispatch()` return `.stopped`, where the pass's
    /// deadline, `now`, would otherwise spend it on `.timedOut`.
    @Test func aStopMadeWhileTheHostSleepsOrDuringAPassEndsTheNextDispatchStopped() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let stopper = startThread {
            _ = waitUntil { loop.isWaiting }  // the host's wait, announced by prepare()
            loop.stop()
        }
        _ = driver.prepare()  // the stop may come before it returns or after: either way the host's wait is announced
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 20_000) == 1, "the stop wakes the host")
        stopper.join()
        #expect(driver.dispatch() == .stopped)
        #expect(driver.prepare() != .zero, "spent: the next host sleep is an ordinary one")
        #expect(driver.dispatch() == .timedOut)

        loop.perform { loop.stop() }  // during a pass
        #expect(driver.prepare() == .zero)
        #expect(driver.dispatch() == .stopped)
        _ = driver.prepare()
        #expect(driver.dispatch() == .timedOut)
    }

    /// A stop made while the host sleeps belongs to the host's next `dispatch()` alone: a run the host's own code
    /// makes first (a modal drag) does not take it, a mode with nothing in it does not lose it, and once taken the
    /// host sleeps again instead of spinning.
    @Test func aStopMadeWhileTheHostSleepsIsTakenByTheNextDispatchAlone() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)  // the default mode holds nothing
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
        #expect(driver.prepare() == nil)
        let stopper = startThread { loop.stop() }  // the host's wait is announced: the stop is the host's
        stopper.join()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 20_000) == 1, "the stop wakes the host")
        #expect(loop.run(mode: .tracking, before: loop.now + .milliseconds(20)) == .timedOut)  // a modal run first
        #expect(driver.dispatch() == .stopped)
        #expect(driver.prepare() == nil)
        #expect(poll(&watched, 1, 0) == 0, "taken: the host sleeps again")
        #expect(driver.dispatch() == .finished)
    }

    /// While a driver lives, the host loop stands for the outermost run: a stop made between two passes, with the
    /// host busy on its own work, is kept for the next `dispatch()`, and freeing a second driver does not drop it.
    @Test func aStopMadeWhileTheHostIsBusyBetweenPassesEndsTheNextDispatch() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        _ = driver.prepare()
        #expect(driver.dispatch() == .timedOut)
        var other: LoopHostDriver? = try LoopHostDriver(loop: loop, mode: .tracking)
        let stopper = startThread { loop.stop() }  // no run active, no wait announced: the host is busy
        stopper.join()
        other = nil  // another driver going does not take this one's stop with it
        withExtendedLifetime(other) {}
        #expect(driver.prepare() == .zero)
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 2_000) == 1)
        #expect(driver.dispatch() == .stopped)
        _ = driver.prepare()
        #expect(driver.dispatch() == .timedOut)
    }

    /// A stop made after a host pass's last look (here by the mode's `exit` observer; another thread can make one
    /// there too) is the host's next `dispatch()`'s, as one made between passes is: not spent with the pass it came
    /// too late for, which would leave the host asleep.
    @Test func aStopMadeAtTheEndOfAHostPassEndsTheNextDispatch() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let stopsLeft = Atomic<Int>(1)
        loop.add(LoopObserver(activities: .exit) { _, _ in
            if stopsLeft.subtract(1, ordering: .relaxed).newValue == 0 { loop.stop() }
        }, forMode: .default)
        _ = driver.prepare()
        #expect(driver.dispatch() == .timedOut)  // its stop came after the pass's result
        #expect(driver.prepare() == .zero)
        #expect(driver.dispatch() == .stopped)
        _ = driver.prepare()
        #expect(driver.dispatch() == .timedOut)  // spent
    }

    /// A source invalidated and its descriptor closed at once (the usual order) leaves nothing of it in the
    /// driver's set, even while a duplicate of the file lives on elsewhere (a child process): the host does not
    /// wake, and spin, for the file's input.
    @Test func aSourceInvalidatedThenClosedLeavesNoRegistrationBehindADuplicate() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let pipe = try TestPipe()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }
        loop.add(source, forMode: .default)
        _ = driver.prepare()  // registered
        driver.dispatch()
        let duplicate = dup(pipe.readEnd)  // the file lives on under another number, as in a child
        try #require(duplicate >= 0)
        defer { close(duplicate) }
        source.invalidate()
        pipe.closeReadEnd()
        pipe.write("for no one")
        #expect(driver.prepare() != .zero)
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 50) == 0, "the file's input does not wake the host")
        driver.dispatch()
    }

    @Test func prepareAsksForNoSleepWhileWorkIsQueuedAndForTheTimeToTheNextTimer() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let ran = Recorder<Int>()
        loop.perform { ran.append(1) }
        #expect(driver.prepare() == .zero)
        driver.dispatch()
        #expect(ran.elements == [1])
        #expect(driver.prepare() == .seconds(3600))
        driver.dispatch()
    }

    /// A timer parked at `.distantFuture` never fires, so it gives a host no time to wake for, even once a virtual
    /// clock has reached the end of time: `prepare()` asks for no timeout rather than for no sleep, every turn.
    @Test func aParkedTimerGivesTheHostNoTimeToWakeForEvenAtTheEndOfVirtualTime() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .seconds(1)) { _ in fired.append(1) }
        loop.add(timer, forMode: .default)
        timer.setNextFireDate(.distantFuture)
        #expect(driver.prepare() == nil)
        clock.advance(to: .distantFuture)
        for _ in 0..<3 {
            #expect(driver.prepare() == nil)
            driver.dispatch()
        }
        #expect(fired.elements.isEmpty)
        timer.invalidate()
    }

    @Test func aWakeUpFromAnotherThreadEndsTheHostsSleep() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        #expect(driver.prepare() != nil)
        onAnotherThread { loop.wakeUp() }
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 30_000) == 1)
        #expect(driver.dispatch() == .timedOut)
    }

    /// A wake-up that arrives while the host sleeps on a driver whose mode holds nothing (a `wakeUp()`, work for
    /// another mode) is read by the dispatch, so that the descriptor does not stay readable and spin the host.
    @Test func aWakeUpForAnEmptyModeIsReadSoTheHostDoesNotSpin() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        #expect(driver.prepare() == nil)
        let waker = startThread { loop.wakeUp() }
        waker.join()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 5_000) == 1)
        #expect(driver.dispatch() == .finished)
        #expect(driver.prepare() == nil)
        watched.revents = 0
        #expect(poll(&watched, 1, 100) == 0, "nothing to do: the descriptor is not readable")
        driver.dispatch()
    }

    /// A source cancelled and its descriptor closed, then a new source on a new pipe that got the same number: the
    /// kernel dropped the old file's registration with it, so the driver must register the new file.
    @Test func aDescriptorNumberReusedByANewSourceWakesTheHost() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)  // keeps the mode alive
        var first: TestPipe? = try TestPipe()
        // The number is taken by a duplicate and handed over with dup2(2): waiting for close and pipe(2) to reuse
        // it races with the other tests' descriptors, which run in parallel in this process.
        let number = try highDuplicate(of: first!.readEnd, atLeast: 3800)
        let old = LoopDescriptorSource(descriptor: number, events: .readable) { _, _ in }
        loop.add(old, forMode: .default)
        _ = driver.prepare()
        driver.dispatch()
        old.invalidate()
        first = nil  // the pipe's own ends closed: `number` holds the old file's last reference
        let second = try TestPipe()
        try #require(dup2(second.readEnd, number) == number)  // closes the old file, and `number` names the new one
        defer { closeDescriptorForTest(number) }
        let reads = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: number, events: .readable) { _, _ in
            reads.append(second.readAll())
        }, forMode: .default)
        #expect(driver.prepare() != .zero, "the host may sleep")
        second.write()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 5_000) == 1, "the host wakes for the new file")
        driver.dispatch()
        #expect(reads.elements == ["x"])
    }

    /// The host's own code runs the loop between prepare() and dispatch() (a modal drag in a toolkit's handler): the
    /// nested run may wait, and the driver carries on after it.
    @Test func aRunBetweenPrepareAndDispatchWaitsAndTheDriverCarriesOn() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        let fired = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in fired.append("modal") }, forMode: .default)
        #expect(driver.prepare() != nil)
        loop.run(mode: .default, before: loop.now + .seconds(5), returnAfterSourceHandled: false)
        #expect(fired.elements == ["modal"])
        loop.perform { fired.append("block") }
        #expect(driver.prepare() == .zero)
        driver.dispatch()
        #expect(fired.elements == ["modal", "block"])
    }

    /// Work for another mode (a block, a signal) wakes a host whose driver's mode is empty: it waits for its mode,
    /// and the host goes back to sleep instead of being told to dispatch on every turn.
    @Test func workForAnotherModeLetsAnEmptyModesHostSleepAgain() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        let ran = Recorder<String>()
        let source = LoopSource { _ in ran.append("source") }
        loop.add(source, forMode: .tracking)
        #expect(driver.prepare() == nil)
        let producer = startThread {
            loop.perform(inModes: [.tracking]) { ran.append("block") }
            source.signal()
        }
        producer.join()
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 5_000) == 1)
        driver.dispatch()
        #expect(driver.prepare() == nil, "nothing for the driver's mode: the host may sleep")
        watched.revents = 0
        #expect(poll(&watched, 1, 100) == 0)
        driver.dispatch()
        loop.run(mode: .tracking, before: loop.now)
        #expect(Set(ran.elements) == ["block", "source"], "the work waited for its mode")
    }

    /// A block taken from the queue by a run of another mode, which it does not admit, waits in the loop's own queue:
    /// the driver of its mode dispatches at once instead of letting the host sleep on it.
    @Test func aBlockAlreadyTakenByAnotherModesRunIsDispatchedAtOnce() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop, mode: .tracking)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let ran = Recorder<String>()
        loop.perform(inModes: [.tracking]) { ran.append("block") }
        loop.run(mode: .default, before: loop.now)  // takes it, cannot run it
        #expect(ran.elements.isEmpty)
        #expect(driver.prepare() == .zero)
        driver.dispatch()
        #expect(ran.elements == ["block"])
    }
}
