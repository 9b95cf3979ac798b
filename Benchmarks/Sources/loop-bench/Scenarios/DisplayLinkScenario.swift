import Foundation
import LoopKit
import Synchronization

/// `displaylink`: a 120 Hz display link on an otherwise idle loop, beside a Foundation 120 Hz timer and the floor.
struct DisplayLinkScenario: Scenario {
    let name = "displaylink"
    let summary = "120 Hz display link for 25 s (3,000 frames): lateness, skipped frames, CPU; beside a Foundation "
        + "120 Hz timer; then 10 s more on one processor, for CPU"

    static let loopKit = "LoopKit LoopDisplayLink 120 Hz"
    static let foundation = "Foundation Timer 120 Hz"
    static let floor = "floor: clock_nanosleep 120 Hz"
    static let loopKitRealtime = "LoopKit LoopDisplayLink, SCHED_FIFO thread"
    static let period: UInt64 = 8_333_333
    /// The figure the CPU targets compare: each ticker's CPU time over the phase on one processor.
    static let cpuOnOneProcessor = "CPU ms, 1 CPU"

    func run(_ context: BenchContext) -> [ScenarioReport] {
        _ = Self.measureAll(duration: context.duration(seconds: 1), onOneProcessor: false)  // warm-up, discarded
        // 3,000 frames, so that p99 is the 30th-worst lateness, not the 12th (issue 12: ≥ 3,000 samples at 8.333 ms).
        let duration = context.duration(seconds: 25)
        var report = ScenarioReport(name: "displaylink", title: "120 Hz frames on an idle loop: lateness (µs)",
                                    unit: .microseconds)
        report.floor = Self.floor
        report.foundation = Self.foundation
        report.plotsCDF = true
        report.results = Self.measureAll(duration: duration, onOneProcessor: false)
        // The CPU a ticker is charged for a wake-up depends on which vCPU takes it, so the tickers are compared
        // again sharing one processor; lateness is judged from the first phase, run as a program would run. Where
        // threads cannot be pinned, the figure is left out and the CPU targets read "not measured".
        if System.canPinToOneProcessor {
            let pinned = Self.measureAll(duration: context.duration(seconds: 10), onOneProcessor: true)
            for (index, result) in report.results.enumerated() {
                guard let cpu = pinned.first(where: { $0.implementation == result.implementation })?
                    .figures.first(where: { $0.name == "CPU ms" })?.value else { continue }
                report.results[index].figures.append(Figure(name: Self.cpuOnOneProcessor, value: cpu))
            }
        }
        report.notes = [
            "All run at once for \(Format.number(Double(duration) / 1e9)) s, each on its own thread, their grids a "
                + "quarter of a frame apart so that they never wake together. Lateness: the link's callback time − its "
                + "frame's timestamp; the timers' fire time − their slot.",
            "'\(Self.cpuOnOneProcessor)': each one's CPU time over 10 s more (not 25), the link, the Foundation timer "
                + "and the floor all on one processor (the last the thread may use; the SCHED_FIFO link, which would "
                + "preempt them there, sits that phase out); the CPU targets use it. On this kind of VM a wake-up's "
                + "CPU time depends on which vCPU takes it: three bare C threads sleeping to the same 120 Hz grid with "
                + "clock_nanosleep used up to 1.5× one another's CPU unpinned, within 4% on one processor "
                + "(2026-12-04). Lateness is judged unpinned: on one processor the link's p99 rose from about 100 to "
                + "140 µs.",
            "'skipped': for the links, the frames they reported as skipped (DisplayFrame.skippedFrames) or the grid "
                + "points in the window they never called back for (frames counted once each, by index), whichever is "
                + "more; for the timers, slots with "
                + "no fire. 'CPU ms': the thread's CPU time over the run (its kernel CPU clock); 'wake-ups': its "
                + "voluntary context switches. The SCHED_FIFO row (when permitted) is a second link whose LoopThread "
                + "was put in the real-time class; the verdicts use the ordinary one.",
        ]
        return [report]
    }

    /// One 120 Hz ticker under test, started, and how to read and stop it.
    private struct Ticker {
        let name: String
        let thread: ThreadIdentity
        /// Lateness samples (ns) and skipped frames, once stopped.
        let finish: () -> (lateness: [UInt64], skipped: Int)
    }

    /// Runs every ticker for `duration`, each on a thread of its own; `onOneProcessor` puts them all on one, without
    /// the real-time link (it would preempt the others there).
    static func measureAll(duration: UInt64, onOneProcessor: Bool) -> [ImplementationResult] {
        // The default display's grid has its epoch at 0 on the monotonic clock; start a few frames ahead.
        let start = (System.now / period + 3) * period
        let end = start + duration
        let slots = Int(duration / period)
        let pin = onOneProcessor
        var tickers = [loopKitLink(name: loopKit, epoch: 0, start: start, end: end, realtime: false, pin: pin),
                       foundationTimer(first: start + period / 4, slots: slots, pin: pin)]
        if System.canUseRealtime && !pin {
            tickers.append(loopKitLink(name: loopKitRealtime, epoch: period / 2, start: start, end: end,
                                       realtime: true, pin: false))
        }
        tickers.append(floorSleeper(first: start + 3 * period / 4, slots: slots, pin: pin))

        System.sleep(until: start)
        let cpuBefore = tickers.map(\.thread.cpuNanoseconds)
        let switchesBefore = tickers.map(\.thread.voluntarySwitches)
        System.sleep(until: end + period)
        let cpu = zip(tickers, cpuBefore).map { Double($0.thread.cpuNanoseconds &- $1) / 1e6 }
        let switches = zip(tickers, switchesBefore).map { Double($0.thread.voluntarySwitches - $1) }
        return tickers.enumerated().map { index, ticker in
            let (lateness, skipped) = ticker.finish()
            var result = ImplementationResult(implementation: ticker.name,
                                              distribution: Distribution(nanoseconds: lateness))
            result.figures = [Figure(name: "frames", value: Double(lateness.count)),
                              Figure(name: "skipped", value: Double(skipped)),
                              Figure(name: "CPU ms", value: cpu[index]), Figure(name: "wake-ups", value: switches[index])]
            return result
        }
    }

    /// A LoopDisplayLink on a LoopThread of its own, counting frames between `start` and `end`.
    private static func loopKitLink(name: String, epoch: UInt64, start: UInt64, end: UInt64, realtime: Bool,
                                    pin: Bool) -> Ticker {
        let thread = try! LoopThread(name: "bench-link")
        thread.performAndWait {
            if pin {
                System.pinToLastProcessor()
            }
            if realtime {
                _ = System.setRealtimePriority()
            }
        }
        let lateness = SampleBuffer(capacity: Int((end - start) / period) + 64)
        let skipped = Atomic<Int>(0)
        // Frames called back for, each counted once: a frame called back twice must not hide one never called back.
        let distinctFrames = Atomic<Int>(0)
        let lastIndex = Atomic<Int64>(.min)
        let display = LoopDisplay(maximumRate: 120, epoch: LoopInstant(nanoseconds: epoch))
        // The frames of the grid points in [start, end): as many as the timers' slots.
        let link = LoopDisplayLink(display: display) { _, frame in
            let now = System.now
            guard frame.timestamp.nanoseconds >= start, frame.timestamp.nanoseconds < end else { return }
            lateness.record(now &- frame.timestamp.nanoseconds)
            skipped.wrappingAdd(frame.skippedFrames, ordering: .relaxed)
            if frame.index > lastIndex.load(ordering: .relaxed) {  // the link's thread only: no race
                lastIndex.store(frame.index, ordering: .relaxed)
                distinctFrames.wrappingAdd(1, ordering: .relaxed)
            }
        }
        thread.loop.add(link, forMode: .default)
        let slots = Self.gridPoints(epoch: epoch, from: start, to: end)
        return Ticker(name: name, thread: thread.identity()) {
            link.invalidate()
            thread.shutdownAndJoin()
            // Skipped: what the link reported, or the grid points it never called back for, whichever is more, so
            // that a link which stops, or skips without saying so, cannot pass.
            let called = distinctFrames.load(ordering: .relaxed)
            return (lateness.values, max(skipped.load(ordering: .relaxed), slots - called))
        }
    }

    /// How many frames a 120 Hz display with `epoch` has in [`start`, `end`), placed as `LoopDisplay` places them:
    /// frame i at `epoch` + ⌊i × 10⁹ ÷ 120⌋ ns, so the first at or after an instant t is ⌈(t − epoch) × 120 ÷ 10⁹⌉.
    private static func gridPoints(epoch: UInt64, from start: UInt64, to end: UInt64) -> Int {
        let firstFrame = { (instant: UInt64) in ((instant - epoch) * 120 + 999_999_999) / 1_000_000_000 }
        return Int(firstFrame(end) - firstFrame(start))
    }

    /// A repeating Foundation Timer at 120 Hz on a RunLoop thread.
    private static func foundationTimer(first: UInt64, slots: Int, pin: Bool) -> Ticker {
        let thread = FoundationLoopThread(name: "bench-link-fdn")
        if pin {
            let pinned = Handoff<Void>()
            thread.perform {
                System.pinToLastProcessor()
                pinned.put(())
            }
            pinned.take()
        }
        let fires = SampleBuffer(capacity: slots * 2 + 64)
        let fireDate = Date(timeIntervalSinceNow: Double(Int64(first) - Int64(System.now)) / 1e9)
        let timer = Timer(fire: fireDate, interval: Double(period) / 1e9, repeats: true) { _ in
            fires.record(System.now)
        }
        thread.add(timer)
        return Ticker(name: foundation, thread: thread.identity) {
            timer.invalidate()
            thread.shutdown()
            let grid = GridLateness(fires: fires.values, first: first, period: period, slots: slots)
            return (grid.lateness, grid.missed)
        }
    }

    /// The floor: a bare thread sleeping to each slot with clock_nanosleep(TIMER_ABSTIME), tuned as a LoopThread is.
    private static func floorSleeper(first: UInt64, slots: Int, pin: Bool) -> Ticker {
        let fires = SampleBuffer(capacity: slots * 2 + 64)
        let release = Handoff<Void>()
        let thread = BenchThread(name: "bench-link-floor", tuned: true) { ready in
            if pin {
                System.pinToLastProcessor()
            }
            ready()
            defer { release.take() }  // stays alive until its CPU time and switches have been read
            var slot = first
            while slot < first + UInt64(slots) * period {
                System.sleep(until: slot)
                let now = System.now
                fires.record(now)
                slot += period
                if slot <= now { slot += (now - slot) / period * period + period }
            }
        }
        return Ticker(name: floor, thread: thread.identity) {
            release.put(())
            thread.join()
            let grid = GridLateness(fires: fires.values, first: first, period: period, slots: slots)
            return (grid.lateness, grid.missed)
        }
    }
}
