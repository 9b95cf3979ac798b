import Testing
@testable import LoopKit

@Suite("Timer queue")
struct TimerQueueTests {
    private func entry(_ deadline: UInt64, tolerance: UInt64 = 0, sequence: UInt64, timer: LoopTimer) -> TimerEntry {
        TimerEntry(deadline: deadline, push: sequence, tolerance: tolerance, slot: 0)
    }

    @Test func entriesComeOutByDeadlineThenSchedulingOrder() {
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        var queue = TimerQueue()
        var generator = SystemRandomNumberGenerator()
        var expected: [(UInt64, UInt64)] = []
        for sequence in 0..<500 {
            let deadline = UInt64.random(in: 0..<50, using: &generator)
            queue.insert(self.entry(deadline, sequence: UInt64(sequence), timer: timer))
            expected.append((deadline, UInt64(sequence)))
            queue.checkInvariants()
        }
        expected.sort { $0 < $1 }
        var popped: [(UInt64, UInt64)] = []
        while !queue.isEmpty {
            let first = queue.removeFirst()
            popped.append((first.deadline, first.push))
        }
        #expect(popped.map(\.0) == expected.map(\.0))
        #expect(popped.map(\.1) == expected.map(\.1))
    }

    @Test func theWakeTimeServesEveryTimerInsideTheToleranceWindowAndMakesNoneLate() {
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        var queue = TimerQueue()
        queue.insert(self.entry(100, tolerance: 50, sequence: 1, timer: timer))   // may wait until 150
        queue.insert(self.entry(120, tolerance: 10, sequence: 2, timer: timer))   // may wait until 130
        queue.insert(self.entry(125, tolerance: 0, sequence: 3, timer: timer))    // due at 125, inside the window
        queue.insert(self.entry(140, tolerance: 0, sequence: 4, timer: timer))    // after 130: not served
        #expect(queue.coalescedWakeTime { _ in true } == 125)
    }

    @Test func withoutToleranceTheWakeTimeIsTheEarliestDeadline() {
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        var queue = TimerQueue()
        queue.insert(self.entry(300, sequence: 1, timer: timer))
        queue.insert(self.entry(200, sequence: 2, timer: timer))
        #expect(queue.coalescedWakeTime { _ in true } == 200)
    }

    @Test func staleEntriesDoNotNarrowOrExtendTheWindow() {
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        var queue = TimerQueue()
        queue.insert(self.entry(100, tolerance: 100, sequence: 1, timer: timer))
        queue.insert(self.entry(110, tolerance: 0, sequence: 2, timer: timer))   // stale: ignored
        queue.insert(self.entry(150, tolerance: 0, sequence: 3, timer: timer))
        #expect(queue.coalescedWakeTime { $0.push != 2 } == 150)
    }

    @Test func compactingKeepsOnlyLiveEntriesInOrder() {
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        var queue = TimerQueue()
        for sequence in 0..<200 {
            queue.insert(self.entry(UInt64(200 - sequence), sequence: UInt64(sequence), timer: timer))
        }
        queue.compact { $0.push % 2 == 0 }
        queue.checkInvariants()
        #expect(queue.count == 100)
        var last: UInt64 = 0
        while !queue.isEmpty {
            let first = queue.removeFirst()
            #expect(first.push % 2 == 0)
            #expect(first.deadline >= last)
            last = first.deadline
        }
    }

    /// Both paths of `removeDue`: pops for a few due entries, one scan and a sort for a burst (more than a 64th of a
    /// queue of at least `burstMinimumCount`, after as many pops). Either way the live due entries come out in (deadline, push) order,
    /// stale ones are dropped, and what is not due stays, as a valid heap.
    @Test(arguments: [100, TimerQueue.burstMinimumCount * 3])
    func dueEntriesComeOutLiveAndInOrderWhetherPoppedOrTakenAsABurst(count: Int) {
        for dueShare in [0.001, 0.1, 0.5, 1.0] {
            var queue = TimerQueue()
            var generator = SystemRandomNumberGenerator()
            for sequence in 0..<count {
                let deadline = UInt64.random(in: 0..<UInt64(count / 2), using: &generator)  // with ties
                queue.insert(TimerEntry(deadline: deadline, push: UInt64(sequence), tolerance: 0,
                                        slot: Int32(sequence)))
            }
            let now = UInt64(Double(count / 2) * dueShare)
            let isLive = { (entry: TimerEntry) in entry.push % 3 != 0 }
            let expected = queue.entries.filter { $0.deadline <= now && isLive($0) }
                .sorted(by: TimerEntry.precedes).map(\.push)
            let notDue = queue.entries.filter { $0.deadline > now }.count
            var batch: [TimerEntry] = []
            queue.removeDue(at: now, into: &batch, isLive: isLive)
            #expect(batch.map(\.push) == expected)
            #expect(queue.count == notDue)
            queue.checkInvariants()
            var last = now
            while !queue.isEmpty {
                let first = queue.removeFirst()
                #expect(first.deadline > now && first.deadline >= last)
                last = first.deadline
            }
        }
    }

    @Test func theNextSlotSkipsMissedSlotsAndStaysOnTheGrid() {
        let slot = LoopInstant(nanoseconds: 1_000)
        #expect(LoopTimer.nextSlot(after: slot, step: 100, now: LoopInstant(nanoseconds: 1_050))
                == LoopInstant(nanoseconds: 1_100))
        #expect(LoopTimer.nextSlot(after: slot, step: 100, now: LoopInstant(nanoseconds: 1_350))
                == LoopInstant(nanoseconds: 1_400))
        #expect(LoopTimer.nextSlot(after: slot, step: 100, now: LoopInstant(nanoseconds: 1_400))
                == LoopInstant(nanoseconds: 1_500))
        #expect(LoopTimer.nextSlot(after: .distantFuture, step: 100, now: slot) == .distantFuture)
    }

    @Test func instantArithmeticClampsInsteadOfOverflowing() {
        #expect(LoopInstant.distantFuture + .seconds(1) == .distantFuture)
        #expect(LoopInstant(nanoseconds: 5) - .seconds(1) == LoopInstant(nanoseconds: 0))
        #expect(LoopInstant(nanoseconds: 5) - LoopInstant(nanoseconds: 8) == .nanoseconds(-3))
    }

    @Test func instantArithmeticSaturatesForEveryDurationAndNeverTraps() {
        let origin = LoopInstant(nanoseconds: 0)
        // Minus a duration beyond -2⁶³ ns: exact, no trap.
        #expect(origin - .seconds(-9_223_372_037) == LoopInstant(nanoseconds: 9_223_372_037_000_000_000))
        #expect(origin - .seconds(-20_000_000_000) == .distantFuture)  // past the end: saturates
        #expect(origin - .nanoseconds(Int64.min) == LoopInstant(nanoseconds: 1 << 63))  // NIO's TimeAmount.min
        #expect(LoopInstant.distantFuture - .nanoseconds(Int64.min) == .distantFuture)
        #expect(LoopInstant(nanoseconds: 5) + .seconds(Int64.max) == .distantFuture)
        #expect(LoopInstant(nanoseconds: 5) + .seconds(Int64.min) == origin)
        #expect(LoopInstant.distantFuture - .seconds(Int64.max) == origin)
        #expect(LoopInstant(nanoseconds: 1 << 62) + .seconds(-4_611_686_019) == origin)  // just past zero: clamps
        // Beyond Int64 seconds, where Duration.components traps: still saturated.
        #expect(origin + .seconds(1e19) == .distantFuture)
        #expect(origin + Duration(attoseconds: .max) == .distantFuture)
        #expect(LoopInstant.distantFuture + Duration(attoseconds: .min) == origin)
        #expect(Duration(attoseconds: .max).nonNegativeNanoseconds == UInt64.max)  // the instants' range
        #expect(Duration.seconds(10_000_000_000).nonNegativeNanoseconds == 10_000_000_000_000_000_000)
        #expect(Duration(attoseconds: .min).nonNegativeNanoseconds == 0)
    }

    /// `run()` waits for `.distantFuture`, which a virtual clock can reach: it returns then, instead of spinning.
    @Test func runOnAVirtualClockAtTheEndOfTimeReturnsTimedOut() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .seconds(1), repeats: true) { _ in fired.append(1) }
        loop.add(timer, forMode: .default)
        clock.advance(to: .distantFuture)
        #expect(loop.run() == .timedOut)
        #expect(fired.elements == [1])
        timer.invalidate()
    }

    /// A period beyond `Int64.max` nanoseconds (292 years) but inside the instants' range: the next slot is a whole
    /// period later, not 292 years (the period cut to `Int64`), which would be decades early.
    @Test func aPeriodLongerThan292YearsKeepsItsLength() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let period = Duration.seconds(10_000_000_000)  // some 317 years
        let fired = Recorder<LoopInstant>()
        let timer = LoopTimer(fireAt: start, interval: period, repeats: true) { _ in fired.append(clock.now) }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .seconds(1)) == .timedOut)
        #expect(fired.elements == [start])
        #expect(timer.fireDate == start + period)
        timer.invalidate()
    }

    /// A window that saturates (a deadline past 2^63 ns on a manual clock, a tolerance of centuries) must not take in
    /// a parked timer's `.max`, which would read as "no timer": the run would sleep for good with a timer due.
    @Test func aParkedTimerDoesNotHideADueOneWhoseWindowReachesTheEndOfTime() throws {
        let clock = ManualLoopClock(start: LoopInstant(nanoseconds: 10_000_000_000_000_000_000))
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fired = Recorder<LoopInstant>()
        let due = LoopTimer(fireAt: start + .milliseconds(1), tolerance: .seconds(10_000_000_000)) { _ in
            fired.append(clock.now)
            loop.stop()
        }
        let parked = LoopTimer(fireAt: start + .seconds(1)) { _ in }
        loop.add(due, forMode: .default)
        loop.add(parked, forMode: .default)
        parked.setNextFireDate(.distantFuture)
        let guardThread = startThread {  // a stop in real time if the run sleeps for good
            _ = waitUntil(limit: .seconds(5)) { fired.count > 0 }
            loop.stop()
        }
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        guardThread.join()
        #expect(fired.elements == [start + .milliseconds(1)])
        parked.invalidate()
    }

    @Test func aTimerWithAnIntervalBeyondInt64SecondsNeverFiresAndDoesNotTrap() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<Int>()
        let timer = LoopTimer(interval: .seconds(1e19), repeats: true, tolerance: .seconds(1e19)) { _ in fired.append(1) }
        loop.add(timer, forMode: .default)
        loop.schedule(after: Duration(attoseconds: .max)) { fired.append(2) }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .timedOut)
        #expect(fired.elements.isEmpty)
        timer.invalidate()
    }

    @Test func aFractionOfANanosecondRoundsTheInstantUp() {
        let origin = LoopInstant(nanoseconds: 10)
        let tiny = Duration(secondsComponent: 0, attosecondsComponent: 1)
        #expect(origin + tiny == LoopInstant(nanoseconds: 11))
        #expect(origin - tiny == LoopInstant(nanoseconds: 10))  // subtracting less than a nanosecond: rounded up
        #expect(origin + .nanoseconds(-1) - tiny == LoopInstant(nanoseconds: 9))
        #expect(origin + .milliseconds(1) == LoopInstant(nanoseconds: 1_000_010))  // whole nanoseconds are exact
        #expect(Duration.seconds(Int64.max).clampedNanoseconds == .max)
    }
}
