import CLoopKitSystem
import Dispatch
import Foundation
import Glibc
import LoopKit

/// `timer`: how late repeating timers fire against their grid, at 1 ms and at 8.333 ms (120 Hz).
struct TimerScenario: Scenario {
    let name = "timer"
    let summary = "lateness of repeating timers at 1 ms and 8.333 ms: LoopKit, Foundation, strict Dispatch, the floor"

    static let loopKit = "LoopKit LoopTimer"
    static let foundation = "Foundation Timer"
    static let dispatch = "DispatchSourceTimer (strict)"
    static let floor = "floor: clock_nanosleep (absolute)"
    static let pollFloor = "floor: ppoll on a timerfd (absolute)"
    static let loopKitRealtime = "LoopKit LoopTimer, SCHED_FIFO thread"
    static let floorRealtime = "floor, SCHED_FIFO thread"

    static let periods: [(label: String, nanoseconds: UInt64)] = [("1ms", 1_000_000), ("8.333ms", 8_333_333)]

    /// The run of each implementation is cut into this many turns, taken in rotation, so that a burst of noise
    /// from the machine's other tenants lands on every implementation alike.
    static let turns = 8

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let duration = context.duration(seconds: 2)
        var reports: [ScenarioReport] = []
        for (label, period) in Self.periods {
            let slots = Int(duration / period)
            let slotsPerTurn = max(1, slots / Self.turns)
            let runners = Self.runners
            for runner in runners {
                _ = runner.measure(period, max(10, slotsPerTurn / 4))  // warm-up, discarded
            }
            var runs = Array(repeating: GridLateness(), count: runners.count)
            for _ in 0..<Self.turns {
                for (index, runner) in runners.enumerated() {
                    runs[index].append(runner.measure(period, slotsPerTurn))
                }
            }
            var report = ScenarioReport(name: "timer/\(label)",
                                        title: "lateness of a repeating \(label) timer against its grid (µs)",
                                        unit: .microseconds)
            report.floor = Self.floor
            report.foundation = Self.foundation
            report.plotsCDF = true
            for (runner, run) in zip(runners, runs) {
                var result = ImplementationResult(implementation: runner.name,
                                                  distribution: Distribution(nanoseconds: run.lateness))
                result.figures = [Figure(name: "slots", value: Double(slotsPerTurn * Self.turns)),
                                  Figure(name: "missed", value: Double(run.missed)),
                                  Figure(name: "early", value: Double(run.early))]
                report.results.append(result)
            }
            report.notes = [
                "Each implementation runs one repeating timer on the grid first + k × \(label) for "
                    + "\(slotsPerTurn * Self.turns) slots, in \(Self.turns) turns of \(slotsPerTurn) taken in rotation "
                    + "with the others (one at a time). Lateness = fire time − the latest slot at or before it; "
                    + "'missed': slots with no fire; 'early': fires before their slot (up to 50 µs, counted as 0).",
                "The ppoll floor sleeps the way a loop that also watches descriptors must: in ppoll on a timerfd armed "
                    + "at each slot. It shows what the wait itself costs over clock_nanosleep; the verdicts use the "
                    + "clock_nanosleep floor.",
                "LoopKit on a LoopThread and the floors on threads tuned the same way (1 µs timer slack, 500 µs "
                    + "slice); Foundation and Dispatch as they ship (their timers are timerfd-based, which timer "
                    + "slack does not delay). The SCHED_FIFO rows (when permitted) put the thread in the real-time "
                    + "class, as display-link threads are elsewhere: the verdicts use the ordinary rows.",
            ]
            reports.append(report)
        }
        return reports
    }

    /// One implementation: starts a repeating timer whose first slot is `first`, returns its fire times.
    struct Runner {
        let name: String
        let fires: (_ first: UInt64, _ period: UInt64, _ slots: Int) -> [UInt64]

        func measure(_ period: UInt64, _ slots: Int) -> GridLateness {
            let first = System.now + 20_000_000  // 20 ms ahead: time to set up, on every implementation
            let times = self.fires(first, period, slots)
            return GridLateness(fires: times, first: first, period: period, slots: slots)
        }
    }

    static var runners: [Runner] {
        var runners = [Runner(name: loopKit, fires: { loopKitFires(first: $0, period: $1, slots: $2) }),
                       Runner(name: foundation, fires: foundationFires), Runner(name: dispatch, fires: dispatchFires),
                       Runner(name: floor, fires: { floorFires(first: $0, period: $1, slots: $2) }),
                       Runner(name: pollFloor, fires: pollFloorFires)]
        if System.canUseRealtime {
            // What the thread's scheduling class buys on a shared machine: the same two, out of reach of the
            // other tenants' time slices.
            runners.append(Runner(name: loopKitRealtime) { loopKitFires(first: $0, period: $1, slots: $2, realtime: true) })
            runners.append(Runner(name: floorRealtime) { floorFires(first: $0, period: $1, slots: $2, realtime: true) })
        }
        return runners
    }

    /// Sleeps until one period after the last slot, so that the last fire, however late, is recorded.
    static func waitForSlots(first: UInt64, period: UInt64, slots: Int) {
        System.sleep(until: first + period * UInt64(slots) + period / 2)
    }

    static func loopKitFires(first: UInt64, period: UInt64, slots: Int, realtime: Bool = false) -> [UInt64] {
        let thread = try! LoopThread(name: "bench-timer-lk")
        if realtime {
            thread.performAndWait { _ = System.setRealtimePriority() }
        }
        let buffer = SampleBuffer(capacity: slots * 2 + 16)
        let timer = LoopTimer(fireAt: LoopInstant(nanoseconds: first), interval: .nanoseconds(Int64(period)),
                              repeats: true) { _ in buffer.record(System.now) }
        thread.loop.add(timer, forMode: .default)
        waitForSlots(first: first, period: period, slots: slots)
        timer.invalidate()
        thread.shutdownAndJoin()
        return buffer.values
    }

    static func foundationFires(first: UInt64, period: UInt64, slots: Int) -> [UInt64] {
        let thread = FoundationLoopThread(name: "bench-timer-fdn")
        let buffer = SampleBuffer(capacity: slots * 2 + 16)
        // Foundation's fire date is a Date: the first slot is mapped from the monotonic clock at one instant.
        let fireDate = Date(timeIntervalSinceNow: Double(Int64(first) - Int64(System.now)) / 1e9)
        let timer = Timer(fire: fireDate, interval: Double(period) / 1e9, repeats: true) { _ in
            buffer.record(System.now)
        }
        thread.add(timer)
        waitForSlots(first: first, period: period, slots: slots)
        timer.invalidate()
        thread.shutdown()
        return buffer.values
    }

    static func dispatchFires(first: UInt64, period: UInt64, slots: Int) -> [UInt64] {
        let queue = DispatchQueue(label: "bench.timer.dispatch")
        let buffer = SampleBuffer(capacity: slots * 2 + 16)
        let timer = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
        // DispatchTime's uptime clock is CLOCK_MONOTONIC on Linux, so the first slot needs no mapping.
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: first), repeating: .nanoseconds(Int(period)),
                       leeway: .nanoseconds(0))
        timer.setEventHandler { buffer.record(System.now) }
        timer.activate()
        waitForSlots(first: first, period: period, slots: slots)
        timer.cancel()
        return buffer.values
    }

    /// The floor of a loop that waits on descriptors too: a bare thread in ppoll on a timerfd armed at each slot
    /// (absolute CLOCK_MONOTONIC), skipping missed slots.
    static func pollFloorFires(first: UInt64, period: UInt64, slots: Int) -> [UInt64] {
        bareThreadFires(name: "bench-timer-pfloor", first: first, period: period, slots: slots) {
            let timer = cloopkit_timerfd_create()
            precondition(timer >= 0, "timerfd_create failed")
            var descriptors = [pollfd(fd: timer, events: Int16(POLLIN), revents: 0)]
            return (sleep: { slot in
                _ = cloopkit_timerfd_arm(timer, slot)
                _ = cloopkit_poll_ns(&descriptors, 1, -1)
            }, close: { _ = close(timer) })
        }
    }

    /// The floor: a bare thread sleeping to each slot with clock_nanosleep(TIMER_ABSTIME), skipping missed slots.
    static func floorFires(first: UInt64, period: UInt64, slots: Int, realtime: Bool = false) -> [UInt64] {
        bareThreadFires(name: "bench-timer-floor", first: first, period: period, slots: slots, realtime: realtime) {
            (sleep: { System.sleep(until: $0) }, close: {})
        }
    }

    /// A bare thread, tuned as a LoopThread is, that sleeps to each slot of the grid with the sleep `makeSleeper`
    /// makes on that thread, records when it woke, and goes on to the next slot after now (missed ones are skipped).
    static func bareThreadFires(
        name: String, first: UInt64, period: UInt64, slots: Int, realtime: Bool = false,
        makeSleeper: @escaping @Sendable () -> (sleep: (UInt64) -> Void, close: () -> Void)
    ) -> [UInt64] {
        let buffer = SampleBuffer(capacity: slots * 2 + 16)
        let end = first + period * UInt64(slots)
        let thread = BenchThread(name: name, tuned: true) { ready in
            if realtime { _ = System.setRealtimePriority() }
            let sleeper = makeSleeper()
            ready()
            var slot = first
            while slot < end {
                sleeper.sleep(slot)
                let now = System.now
                buffer.record(now)
                slot += period
                if slot <= now {
                    slot += (now - slot) / period * period + period
                }
            }
            sleeper.close()
        }
        thread.join()
        return buffer.values
    }
}
