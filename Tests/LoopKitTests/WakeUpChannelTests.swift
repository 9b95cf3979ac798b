#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import CLoopKitSystem
import Testing
@testable import LoopKit

#if os(Linux)
/// What a sleeping loop is woken through: the pipe, polled beside the mode's descriptors, or, on Linux, a futex for a
/// mode with no descriptor to watch (`WakeupFutex`); and the state machine that keeps the two from losing a wake-up.
@Suite("Wake-up channels")
struct WakeUpChannelTests {
    // MARK: The futex word

    @Test func aFutexNotifiedBeforeItsWaitEndsTheWaitAtOnceUntilConsumed() throws {
        let futex = try #require(WakeupFutex())
        defer { futex.deallocate() }
        #expect(!futex.hasUnreadWakeUp)
        futex.notify()
        #expect(futex.hasUnreadWakeUp)
        #expect(futex.wait(until: SystemLoopClock().now.nanoseconds + 30_000_000_000))  // a lost one: 30 s, false
        futex.consume()
        #expect(!futex.hasUnreadWakeUp)
    }

    @Test func aFutexWaitEndsAtItsDeadlineNotBefore() throws {
        let futex = try #require(WakeupFutex())
        defer { futex.deallocate() }
        let clock = SystemLoopClock()
        let deadline = clock.now + .milliseconds(5)
        #expect(!futex.wait(until: deadline.nanoseconds))
        #expect(clock.now >= deadline)
        #expect(!futex.wait(until: 1))  // long past: returns at once
    }

    @Test func aFutexWaitEndsWhenAnotherThreadNotifies() throws {
        let futex = try #require(WakeupFutex())
        let notified = DispatchSemaphore(value: 0)
        defer {
            notified.wait()  // the word is freed only once notify() has returned
            futex.deallocate()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
            futex.notify()
            notified.signal()
        }
        #expect(futex.wait(until: SystemLoopClock().now.nanoseconds + 30_000_000_000))  // a lost one: 30 s, false
        futex.consume()
    }

    // MARK: The state machine

    @Test func aWaitSleepsOnTheChannelItPrefersWhenNoWakeUpIsInFlight() {
        var state = LoopStateMachine()
        state.enterRun()
        #expect(state.beginWait(preferring: .futex) == .futex)
        #expect(state.requestWakeUp() == .wakeUp(.futex))
        #expect(state.requestWakeUp() == .none)  // coalesced
        let hadArrivals = state.endWait()
        #expect(hadArrivals)
        #expect(state.beginWait(preferring: .futex) == .futex)  // the futex's wake-up lapsed with its wait
        #expect(state.requestWakeUp() == .wakeUp(.futex))
    }

    /// The pipe's byte may not be written yet when the wait it was sent for ends: a wait on the futex would never
    /// see it, and every arrival until it is read sends nothing.
    @Test func aPipeWakeUpInFlightKeepsTheNextWaitOnThePipeUntilItIsRead() {
        var state = LoopStateMachine()
        state.enterRun()
        #expect(state.beginWait() == .descriptor)
        #expect(state.requestWakeUp() == .wakeUp(.descriptor))
        _ = state.endWait()  // ended by a timer, say, before the byte was written
        #expect(state.beginWait(preferring: .futex) == .descriptor)
        #expect(state.requestWakeUp() == .none)  // the byte in flight will end this wait
        _ = state.endWait()
        state.noteWakeUpConsumed()
        #expect(state.beginWait(preferring: .futex) == .futex)
    }

    /// A futex wake-up whose producer is slow to send it must not hold back the next wait's, which may be on the pipe.
    @Test func aFutexWakeUpInFlightLapsesWhenItsWaitEnds() {
        var state = LoopStateMachine()
        state.enterRun()
        #expect(state.beginWait(preferring: .futex) == .futex)
        #expect(state.post { _ in } == .wakeUp(.futex))
        let hadArrivals = state.endWait()  // ended by a timer, say, before the futex was woken
        #expect(hadArrivals)
        _ = state.takeControlMessages()
        #expect(state.beginWait(preferring: .descriptor) == .descriptor)
        #expect(state.post { _ in } == .wakeUp(.descriptor))
    }

    // MARK: A loop

    /// A loop on the Linux backend whose default mode holds one signalled source (no descriptor, no timer), its
    /// waiter, and the mode's items.
    private func loopWithoutDescriptors() throws -> (Loop, PollWaiter, ModeItems) {
        let loop = try Loop.onLinuxBackend()
        let waiter = try #require(loop.pollWaiter)
        loop.add(LoopSource { _ in }, forMode: .default)
        return (loop, waiter, loop.modeItems(for: .default))
    }

    /// A loop asleep on the futex, woken by a block: one write, one read, and the block runs in the pass that follows.
    @Test func aBlockToALoopAsleepOnTheFutexWakesItWithOneWrite() throws {
        try withTimerSlack(1_000) {  // the run's deadline is the wait's: on the futex only with tight slack
            let (loop, waiter, items) = try self.loopWithoutDescriptors()
            defer { loop.invalidate() }
            waiter.runWillBegin(in: items)
            #expect(waiter.wakeUpChannel(forWaitingIn: items, until: loop.now + .seconds(60)) == .futex)
            let before = loop.counters
            let producer = startThread {
                guard waitUntil({ loop.isWaiting }) else { return }
                loop.perform { loop.stop() }
            }
            #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
            producer.join()
            let spent = loop.counters.since(before)
            #expect(spent.wakeUpWrites == 1)
            #expect(spent.wakeUpDrains == 1)
            #expect(spent.emptyWakeUps == 0)
        }
    }

    @Test func aModeWithoutDescriptorsSleepsOnTheFutexAndOneThatWatchesOneOnThePipe() throws {
        let (loop, waiter, items) = try self.loopWithoutDescriptors()
        defer { loop.invalidate() }
        #expect(waiter.wakeUpChannel(forWaitingIn: items, until: .distantFuture) == .futex)
        let pipe = try TestPipe()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }
        loop.add(source, forMode: .default)
        #expect(waiter.wakeUpChannel(forWaitingIn: items, until: .distantFuture) == .descriptor)
        loop.remove(source, forMode: .default)
        #expect(waiter.wakeUpChannel(forWaitingIn: items, until: .distantFuture) == .futex)

        let clock = SystemLoopClock()
        let portable = Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: .portable))
        defer { portable.invalidate() }
        let portableWaiter = try #require(portable.pollWaiter)
        #expect(portableWaiter.wakeUpChannel(forWaitingIn: portable.modeItems(for: .default), until: .distantFuture)
                == .descriptor)
    }

    /// The futex's timeout is late by up to the thread's timer slack (50 µs by default); the timerfd's is not. So a
    /// wait with a deadline uses the futex only on a thread with at most 1 µs of slack, as a `LoopThread` has, as
    /// found when a run begins.
    @Test func aDeadlineStaysOnTheTimerfdUnlessTheThreadsTimerSlackIsTight() throws {
        let (loop, waiter, items) = try self.loopWithoutDescriptors()
        defer { loop.invalidate() }
        let deadline = loop.now + .milliseconds(1)
        withTimerSlack(50_000) {
            waiter.runWillBegin(in: items)
            #expect(waiter.wakeUpChannel(forWaitingIn: items, until: deadline) == .descriptor)
            #expect(waiter.wakeUpChannel(forWaitingIn: items, until: .distantFuture) == .futex)
        }
        withTimerSlack(1_000) {
            waiter.runWillBegin(in: items)
            #expect(waiter.wakeUpChannel(forWaitingIn: items, until: deadline) == .futex)
        }
    }

    /// Asleep on the futex, the loop is woken for a descriptor source added from another thread, and its next sleep
    /// watches the descriptor (the source's data wakes it through the descriptor itself, not the wake-up channel).
    @Test func aDescriptorSourceAddedWhileTheLoopSleepsOnTheFutexIsWatched() throws {
        let clock = SystemLoopClock()
        let loop = Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: .linux))
        defer { loop.invalidate() }
        loop.add(LoopSource { _ in }, forMode: .default)  // no timer: the loop sleeps on the futex, whatever the slack
        let pipe = try TestPipe()
        let reads = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reads.append(events)
            loop.stop()
        }
        let before = loop.counters
        DispatchQueue.global().async {
            _ = waitUntil(limit: .seconds(10)) { loop.isWaiting }
            let waits = loop.counters.waits  // the futex sleep's included
            loop.add(source, forMode: .default)
            _ = waitUntil(limit: .seconds(10)) { loop.counters.waits > waits && loop.isWaiting }  // on the pipe now
            pipe.write()
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
        #expect(reads.elements == [.readable])
        // The add's, through the futex (a cross-thread add posts two messages, which may wake it twice).
        #expect(loop.counters.since(before).wakeUpWrites >= 1)
    }
}

#endif
