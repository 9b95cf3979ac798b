import Testing
@testable import LoopKit

/// A timer's fire date moved from another thread while its loop is firing timers: the move wins over the slot the
/// loop was about to fire, and the last of many moves is the date that stays.
@Suite("Timers moved from other threads", .serialized, .timeLimit(.minutes(1)))
struct TimerMoveTests {
    @Test func aDueTimerMovedFromAnotherThreadDuringThePassDoesNotFireItsOldSlot() throws {
        let loop = try Loop()
        let fires = Recorder<String>()
        let due = loop.now
        let later = due + .seconds(3_600)
        let moved = LoopTimer(fireAt: due + .nanoseconds(1), interval: .seconds(1), repeats: true) { _ in
            fires.append("moved")
        }
        // Fires first in the same pass, and has another thread move the second timer, whose entry the pass already
        // holds: the move reaches the loop as a block, after this pass's timers.
        let mover = LoopTimer(fireAt: due) { _ in
            fires.append("mover")
            onAnotherThread { moved.setNextFireDate(later) }
        }
        loop.add(mover, forMode: .default)
        loop.add(moved, forMode: .default)
        _ = loop.run(mode: .default, before: loop.now + .milliseconds(20))
        #expect(fires.elements == ["mover"], "the timer fired for the slot it was moved away from")
        #expect(moved.fireDate == later)
    }

    @Test func aDueTimerMovedFromAnotherThreadToAnotherDueDateFiresForItsNewSlotInThatPass() throws {
        let loop = try Loop()
        let slots = Recorder<String>()
        let due = loop.now
        let earlier = due - .milliseconds(500)
        let moved = LoopTimer(fireAt: due + .nanoseconds(1), interval: .seconds(1), repeats: true) { _ in
            slots.append("moved")
        }
        // The move lands while the pass holds the second timer's entry; its new date is due too, so it fires in this
        // pass (as CF fires a timer whose date is still due at its callout), on the grid of its new date.
        let mover = LoopTimer(fireAt: due) { _ in
            slots.append("mover")
            onAnotherThread { moved.setNextFireDate(earlier) }
        }
        loop.add(mover, forMode: .default)
        loop.add(moved, forMode: .default)
        loop.add(LoopObserver(activities: .beforeTimers) { _, _ in slots.append("timers") }, forMode: .default)
        _ = loop.run(mode: .default, before: loop.now + .milliseconds(20))
        #expect(Array(slots.elements.prefix(3)) == ["timers", "mover", "moved"], "not fired in the same pass")
        #expect(slots.elements.filter { $0 == "moved" }.count == 1)
        #expect(moved.fireDate == earlier + .seconds(1))
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
        while finishedMovers.count < movers.count {
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
            #expect(waitUntil(limit: .seconds(5)) { ticked.count == 1 }, "round \(round): the link never ticked")
        }
    }
}
