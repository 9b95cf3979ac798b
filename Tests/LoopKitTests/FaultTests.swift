#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Testing
@testable import LoopKit

/// The kernel refusing what it rarely refuses, scripted into LoopKit's own system calls (`SystemCallFaults`): the
/// loop neither spins, nor hangs, nor loses a wake-up, and fires no timer early.
///
/// Faults are armed on the test's thread, which runs the loop, so tests running beside these are untouched. A
/// descriptor closed under a live source, or its number reused by a new file, needs no script: those are real
/// faults, tested on both wait paths in `LoopDescriptorSourceTests` and `LargeModeDescriptorTests`.
@Suite("Scripted system-call faults")
struct FaultTests {
    /// The call a loop sleeps in: its futex (Linux, a mode without descriptors), ppoll (Linux, a mode that watches
    /// one) or poll (the portable backend).
    enum SleepCall: String, CaseIterable, CustomTestStringConvertible {
        case futex
        case ppoll
        case poll

        var backend: LoopBackend { self == .poll ? .portable : .linux }
        var testDescription: String { self.rawValue }
    }

    /// A loop on the real clock and `backend`, whatever `LOOPKIT_BACKEND` selects for the rest of the suite.
    private func makeLoop(_ backend: LoopBackend) throws -> Loop {
        let clock = SystemLoopClock()
        return Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: backend))
    }

    /// A loop whose default mode sleeps in `call`: for ppoll, it watches `idle`, a pipe nobody writes to.
    private func makeLoop(sleepingIn call: SleepCall, idle: TestPipe) throws -> Loop {
        let loop = try self.makeLoop(call.backend)
        if call == .ppoll {
            loop.add(LoopDescriptorSource(descriptor: idle.readEnd, events: .readable) { _, _ in }, forMode: .default)
        }
        return loop
    }

    /// Records `beforeWaiting` and `afterWaiting` into `trace`.
    private func traceSleeps(of loop: Loop, into trace: Recorder<String>) {
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
        }, forMode: .default)
    }

    @Test(arguments: SleepCall.allCases)
    func anInterruptStormNeitherEndsTheSleepNorFiresTheTimerEarly(call: SleepCall) throws {
        // A wait with a deadline sleeps on the futex only on a thread with a tight timer slack, a LoopThread's.
        try withTimerSlack(call == .futex ? 1_000 : 50_000) { try self.interruptStorm(sleepingIn: call) }
    }

    private func interruptStorm(sleepingIn call: SleepCall) throws {
        let idle = try TestPipe()
        let loop = try self.makeLoop(sleepingIn: call, idle: idle)
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        let trace = Recorder<String>()
        self.traceSleeps(of: loop, into: trace)
        let start = loop.now
        let due = start + .seconds(1)
        let firedAt = Recorder<LoopInstant>()
        loop.add(LoopTimer(fireAt: due) { _ in
            firedAt.append(loop.now)
            trace.append("timer")
            loop.stop()  // a mode that watches a pipe would not finish
        }, forMode: .default)
        // A thousand interruptions take a few milliseconds (tens under a sanitizer), well inside the timer's delay.
        SystemCallFaults.inject(EINTR, into: call.rawValue, count: 1_000)

        #expect(loop.run(mode: .default, before: start + .seconds(60)) == .stopped)
        #expect(SystemCallFaults.remainingForCurrentThread == 0)
        #expect(try #require(firedAt.elements.first) >= due)
        // A thousand interruptions, and still one sleep: a signal is not a wake-up.
        #expect(trace.elements == ["beforeWaiting", "afterWaiting", "timer"])
    }

    /// (A futex wait allocates nothing: it has no ENOMEM.)
    @Test(arguments: [SleepCall.ppoll, .poll])
    func aWaitTheKernelCannotAllocateForIsRetriedAfterAPauseWithoutLosingAWakeUp(call: SleepCall) throws {
        let idle = try TestPipe()
        let loop = try self.makeLoop(sleepingIn: call, idle: idle)
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)  // keeps the mode from finishing
        let ran = Recorder<String>()
        let failures = 20
        let before = loop.counters
        let start = loop.now
        // The faults are armed, and the wake-up sent, as the loop goes to sleep: it must still end that sleep.
        loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in
            SystemCallFaults.inject(ENOMEM, into: call.rawValue, count: failures)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
                loop.perform {
                    ran.append("block")
                    loop.stop()
                }
            }
        }, forMode: .default)

        #expect(loop.run(mode: .default, before: start + .seconds(60)) == .stopped)
        #expect(ran.elements == ["block"])
        // Not a spin: each failed wait paused for a millisecond before the next try (a look after the wake-up, a few
        // tries without a pause).
        let failed = failures - SystemCallFaults.remainingForCurrentThread
        #expect(failed >= 1)
        #expect(loop.now - start >= .milliseconds(failed - 3))
        #expect(loop.counters.since(before).waits <= UInt64(failures) + 4)
    }

    @Test(arguments: [SleepCall.ppoll, .poll])
    func aLastingWaitFailureFiresADueTimerInsteadOfSpinning(call: SleepCall) throws {
        let idle = try TestPipe()
        let loop = try self.makeLoop(sleepingIn: call, idle: idle)
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        let start = loop.now
        let due = start + .milliseconds(3)
        let firedAt = Recorder<LoopInstant>()
        loop.add(LoopTimer(fireAt: due) { _ in
            firedAt.append(loop.now)
            loop.stop()
        }, forMode: .default)
        SystemCallFaults.inject(ENOMEM, into: call.rawValue, count: 1_000_000)
        let before = loop.counters

        #expect(loop.run(mode: .default, before: start + .seconds(60)) == .stopped)
        #expect(try #require(firedAt.elements.first) >= due)
        // About one try per millisecond until the timer was due, then the failed wait counted as a timeout.
        #expect(loop.counters.since(before).waits < 1_000)
    }

    @Test func aLookAtALargeModeThatEpollCannotAnswerFindsTheReadySourceOnALaterPass() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        let keepAlive = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: keepAlive.readEnd, events: .readable) { _, _ in }, forMode: .default)
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }, forMode: .default)
        try loop.sleepOnceInEpoll()
        SystemCallFaults.inject(ENOMEM, into: "epoll_wait", count: 3)
        let before = loop.counters
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { pipe.write() }

        let result = loop.run(mode: .default, before: loop.now + .seconds(60), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.readable])
        #expect(loop.counters.since(before).blockingWaits <= 5)
    }

    @Test func aDeadlineTimerTheKernelRefusesToArmFallsBackToThePollTimeout() throws {
        let idle = try TestPipe()
        let loop = try self.makeLoop(sleepingIn: .ppoll, idle: idle)
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        let start = loop.now
        let fired = Recorder<(due: LoopInstant, at: LoopInstant)>()
        for step in 1...3 {
            let due = start + .milliseconds(3 * step)
            loop.add(LoopTimer(fireAt: due) { _ in fired.append((due, loop.now)) }, forMode: .default)
        }
        SystemCallFaults.inject(EINVAL, into: "timerfd_settime", count: 1_000)

        #expect(loop.run(mode: .default, before: start + .milliseconds(20)) == .timedOut)
        #expect(fired.count == 3)
        #expect(fired.elements.allSatisfy { $0.at >= $0.due })

        // Once the kernel arms it again, the deadline timer is used again, and still fires nothing early.
        SystemCallFaults.clearForCurrentThread()
        let due = loop.now + .milliseconds(3)
        loop.add(LoopTimer(fireAt: due) { _ in fired.append((due, loop.now)) }, forMode: .default)
        #expect(loop.run(mode: .default, before: due + .milliseconds(10)) == .timedOut)
        #expect(fired.count == 4)
        #expect(fired.elements.allSatisfy { $0.at >= $0.due })
    }

    @Test(arguments: [SleepCall.ppoll, .poll])
    func aFullWakeUpPipeStillWakesTheLoopAndIsDrainedWhole(call: SleepCall) throws {
        let idle = try TestPipe()
        let loop = try self.makeLoop(sleepingIn: call, idle: idle)
        defer { loop.invalidate() }
        let waiter = try #require(loop.pollWaiter)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        // Fill the channel until the kernel says EAGAIN; a wake-up written now finds it full, and that is no error.
        var byte: UInt8 = 1
        while write(waiter.wakeupPipe.writeEnd, &byte, 1) == 1 {}
        #expect(errno == EAGAIN)
        waiter.wakeUp()

        let ran = Recorder<String>()
        loop.perform {
            ran.append("queued while full")
            loop.stop()
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
        #expect(ran.elements == ["queued while full"])

        // The drain emptied the channel: the loop sleeps again instead of waking on stale bytes.
        let before = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(20)) == .timedOut)
        #expect(loop.counters.since(before).emptyWakeUps == 0)
        #expect(loop.counters.since(before).blockingWaits <= 2)

        // And a wake-up from another thread still ends a sleep.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
            loop.perform {
                ran.append("from another thread")
                loop.stop()
            }
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
        #expect(ran.elements == ["queued while full", "from another thread"])
    }

    /// A futex wake-up whose producer was preempted until its wait had ended (a timer ended it) lands after it: the
    /// next wait ends at once, finds nothing arrived, and absorbs it without a pass; and the wake-up it stood for no
    /// longer holds back the next one.
    @Test func aFutexWakeUpThatLandsAfterItsWaitIsAbsorbedAndHoldsNothingBack() throws {
        // The runs' deadlines go to the futex only on a thread with a tight timer slack, a LoopThread's.
        try withTimerSlack(1_000) { try self.lateFutexWakeUp() }
    }

    private func lateFutexWakeUp() throws {
        let loop = try self.makeLoop(.linux)
        defer { loop.invalidate() }
        let waiter = try #require(loop.pollWaiter)
        let trace = Recorder<String>()
        self.traceSleeps(of: loop, into: trace)
        loop.add(LoopSource { _ in }, forMode: .default)  // no deadline: the futex, whatever the thread's timer slack
        let items = loop.modeItems(for: .default)
        #expect(waiter.wakeUpChannel(forWaitingIn: items, until: .distantFuture) == .futex)
        // Its wait is over; its wake-up lands now.
        let channel = loop.state.withLock { $0.beginWait(preferring: .futex) }
        let action = loop.state.withLock { $0.requestWakeUp() }
        _ = loop.state.withLock { $0.endWait() }
        #expect(channel == .futex)
        #expect(action == .wakeUp(.futex))
        waiter.wakeUp(through: .futex)

        let before = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(300)) == .timedOut)
        let spent = loop.counters.since(before)
        #expect(spent.emptyWakeUps == 0)
        #expect(spent.waits == 2)  // the one the stale wake-up ended at once, and the sleep to the deadline
        #expect(spent.wakeUpDrains == 1)
        #expect(trace.elements == ["beforeWaiting", "afterWaiting"])  // one sleep for the observers: no pass

        let ran = Recorder<String>()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
            loop.perform {
                ran.append("from another thread")
                loop.stop()
            }
        }
        // Held back by the lapsed wake-up, the loop would sleep to this deadline and time out.
        #expect(loop.run(mode: .default, before: loop.now + .seconds(5)) == .stopped)
        #expect(ran.elements == ["from another thread"])
    }
}
