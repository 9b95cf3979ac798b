#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Testing
@testable import LoopKit

/// What a sleeping loop is woken through: the pipe, polled beside the mode's descriptors, or, on Linux, a futex for a
/// mode with no descriptor to watch (`WakeupFutex`); and the state machine that keeps the two from losing a wake-up.
@Suite("Wake-up channels")
struct WakeUpChannelTests {
    // MARK: The futex word

    @Test func aFutexNotifiedBeforeItsWaitEndsTheWaitAtOnceUntilConsumed() throws {
        let futex = try #require(WakeupFutex())
        #expect(!futex.hasUnreadWakeUp)
        futex.notify()
        #expect(futex.hasUnreadWakeUp)
        #expect(futex.wait(until: nil))  // would sleep for ever otherwise
        futex.consume()
        #expect(!futex.hasUnreadWakeUp)
    }

    @Test func aFutexWaitEndsAtItsDeadlineNotBefore() throws {
        let futex = try #require(WakeupFutex())
        let clock = SystemLoopClock()
        let deadline = clock.now + .milliseconds(5)
        #expect(!futex.wait(until: deadline.nanoseconds))
        #expect(clock.now >= deadline)
        #expect(!futex.wait(until: 1))  // long past: returns at once
    }

    @Test func aFutexWaitEndsWhenAnotherThreadNotifies() throws {
        let futex = try #require(WakeupFutex())
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { futex.notify() }
        #expect(futex.wait(until: nil))
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
        state.noteWakeUpConsumed()
        #expect(state.beginWait() == .descriptor)
        #expect(state.requestWakeUp() == .wakeUp(.descriptor))
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

    @Test func aModeWithoutDescriptorsSleepsOnTheFutexAndOneThatWatchesOneOnThePipe() throws {
        let clock = SystemLoopClock()
        let loop = Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: .linux))
        defer { loop.invalidate() }
        let waiter = try #require(loop.pollWaiter)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        #expect(waiter.wakeUpChannel(forWaitingIn: loop.modeItems(for: .default)) == .futex)
        let pipe = try TestPipe()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }
        loop.add(source, forMode: .default)
        #expect(waiter.wakeUpChannel(forWaitingIn: loop.modeItems(for: .default)) == .descriptor)
        loop.remove(source, forMode: .default)
        #expect(waiter.wakeUpChannel(forWaitingIn: loop.modeItems(for: .default)) == .futex)

        let portable = Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: .portable))
        defer { portable.invalidate() }
        let portableWaiter = try #require(portable.pollWaiter)
        #expect(portableWaiter.wakeUpChannel(forWaitingIn: portable.modeItems(for: .default)) == .descriptor)
    }

    /// Asleep on the futex, the loop is woken for a descriptor source added from another thread, and its next sleep
    /// watches the descriptor.
    @Test func aDescriptorSourceAddedWhileTheLoopSleepsOnTheFutexIsWatched() throws {
        let clock = SystemLoopClock()
        let loop = Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: .linux))
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let pipe = try TestPipe()
        let reads = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reads.append(events)
            loop.stop()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
            loop.add(source, forMode: .default)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { pipe.write() }
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
        #expect(reads.elements == [.readable])
    }
}
