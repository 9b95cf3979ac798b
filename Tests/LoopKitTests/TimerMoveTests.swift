import Testing
@testable import LoopKit

/// A timer's fire date moved from another thread while its loop is firing timers: the move wins over the slot the
/// loop was about to fire, and the last of many moves is the date that stays.
@Suite("Timers moved from other threads", .serialized, .timeLimit(.minutes(1)))
struct TimerMoveTests {
    /// Runs a loop in which a first timer fires and has another thread move a second one, due in the same pass, to
    /// `newDate(due)`: the pass already holds the second timer's entry, and the move reaches the loop as a block,
    /// after this pass's timers.
    ///
    /// - Returns: What happened in order ("timers" at each pass's `beforeTimers`, then "mover" and "moved" as they
    ///   fire), the moved timer's fire date afterwards, and the date it was moved to.
    private func moveADueTimerDuringThePass(
        to newDate: (LoopInstant) -> LoopInstant
    ) throws -> (events: [String], fireDate: LoopInstant?, movedTo: LoopInstant) {
        let loop = try Loop()
        let events = Recorder<String>()
        let due = loop.now
        let movedTo = newDate(due)
        let moved = LoopTimer(fireAt: due + .nanoseconds(1), interval: .seconds(3_600), repeats: true) { _ in
            events.append("moved")
        }
        let mover = LoopTimer(fireAt: due) { _ in
            events.append("mover")
            onAnotherThread { moved.setNextFireDate(movedTo) }
        }
        loop.add(mover, forMode: .default)
        loop.add(moved, forMode: .default)
        loop.add(LoopObserver(activities: .beforeTimers) { _, _ in events.append("timers") }, forMode: .default)
        _ = loop.run(mode: .default, before: loop.now + .milliseconds(20))
        return (events.elements, moved.fireDate, movedTo)
    }

    @Test func aDueTimerMovedFromAnotherThreadDuringThePassDoesNotFireItsOldSlot() throws {
        let result = try self.moveADueTimerDuringThePass { $0 + .seconds(3_600) }
        #expect(!result.events.contains("moved"), "the timer fired for the slot it was moved away from")
        #expect(result.fireDate == result.movedTo)
    }

    @Test func aDueTimerMovedFromAnotherThreadToAnotherDueDateFiresForItsNewSlotInThatPass() throws {
        // As CF fires a timer whose date is still due at its callout, on the grid of its new date.
        let result = try self.moveADueTimerDuringThePass { $0 - .milliseconds(500) }
        #expect(Array(result.events.prefix(3)) == ["timers", "mover", "moved"], "not fired in the same pass")
        #expect(result.events.filter { $0 == "moved" }.count == 1)
        #expect(result.fireDate == result.movedTo + .seconds(3_600))
    }

    @Test func aTimerMovedFromOtherThreadsWhileItFiresEndsOnTheLastDate() throws {
        let loop = try Loop()
        let timer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in }
        loop.add(timer, forMode: .default)
        let farAway = loop.now + .seconds(3_600)
        let finishedMovers = Recorder<Int>()
        let movers = (0..<4).map { index in
            startThread {
                for step in 0..<2_000 {
                    // Near dates keep the loop firing; each mover ends on the same far date.
                    timer.setNextFireDate(step == 1_999 ? farAway : loop.now + .microseconds(20 * index))
                    _ = timer.isValid
                    timer.tolerance = .microseconds(step % 7)
                }
                finishedMovers.append(index)
            }
        }
        let giveUp = ContinuousClock.now + .seconds(120)  // a stuck mover fails the test below instead of hanging it
        while finishedMovers.count < movers.count && ContinuousClock.now < giveUp {
            _ = loop.run(mode: .default, before: loop.now + .milliseconds(5))
        }
        for mover in movers { mover.join() }
        _ = loop.run(mode: .default, before: loop.now + .milliseconds(5))  // the last re-arm
        #expect(timer.fireDate == farAway)
        timer.invalidate()
        #expect(!timer.isValid)
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(5)) == .finished)
    }

    @Test func aPausedLinkResumedWhileAnotherThreadAddsItTicks() throws {
        let thread = try LoopThread(name: "resume-race")
        defer { thread.shutdownAndJoin() }
        for round in 0..<100 {
            let ticked = Recorder<Int>()
            let link = LoopDisplayLink(display: .default) { link, _ in
                ticked.append(round)
                link.invalidate()
            }
            link.isPaused = true
            // The resume reads whether the link has a loop while the add ties it to one: whichever wins, the link
            // must end with a date its loop has queued.
            let adder = startThread { thread.loop.add(link, forMode: .default) }
            link.isPaused = false
            adder.join()
            #expect(waitUntil { ticked.count == 1 }, "round \(round): the link never ticked")
        }
    }

    /// Widening a timer's tolerance does not move it behind timers added later with the same fire date (CF's
    /// CFRunLoopTimerSetTolerance does not re-sort); setting the same tolerance again changes nothing either.
    @Test func aWiderToleranceKeepsATimersPlaceAmongEqualDates() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let order = Recorder<String>()
        let date = clock.now + .milliseconds(10)
        let first = LoopTimer(fireAt: date) { _ in order.append("first") }
        let second = LoopTimer(fireAt: date) { _ in order.append("second") }
        loop.add(first, forMode: .default)
        loop.add(second, forMode: .default)
        first.tolerance = .zero  // the same: nothing to re-queue
        first.tolerance = .milliseconds(5)  // wider: re-queued in its place
        loop.run(mode: .default, before: clock.now + .seconds(1))
        #expect(order.elements == ["first", "second"])
        #expect(clock.now >= date)
    }
}
