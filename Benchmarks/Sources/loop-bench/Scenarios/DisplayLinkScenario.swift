import Foundation
import LoopKit
import Synchronization

/// `displaylink`: a 120 Hz display link on an otherwise idle loop, beside a Foundation 120 Hz timer and the floor.
struct DisplayLinkScenario: Scenario {
    let name = "displaylink"
    let summary = "120 Hz display link for 10 s: lateness, skipped frames, CPU; beside a Foundation 120 Hz timer"

    static let loopKit = "LoopKit LoopDisplayLink 120 Hz"
    static let foundation = "Foundation Timer 120 Hz"
    static let floor = "floor: clock_nanosleep 120 Hz"
    static let period: UInt64 = 8_333_333

    func run(_ context: BenchContext) -> [ScenarioReport] {
        _ = Self.measureAll(duration: context.duration(seconds: 1))  // warm-up, discarded
        let duration = context.duration(seconds: 10)
        var report = ScenarioReport(name: "displaylink", title: "120 Hz frames on an idle loop: lateness (µs)",
                                    unit: .microseconds)
        report.floor = Self.floor
        report.foundation = Self.foundation
        report.plotsCDF = true
        report.results = Self.measureAll(duration: duration)
        report.notes = [
            "All three run at once for \(Format.number(Double(duration) / 1e9)) s on their own threads, their grids "
                + "a third of a frame apart so that they never wake together. Lateness: the link's callback time − "
                + "its frame's timestamp; the timers' fire time − their slot.",
            "'skipped': frames the link reported as skipped (DisplayFrame.skippedFrames); for the timers, slots with "
                + "no fire. 'CPU ms': the thread's CPU time over the run (its kernel CPU clock); 'wake-ups': its "
                + "voluntary context switches.",
        ]
        return [report]
    }

    static func measureAll(duration: UInt64) -> [ImplementationResult] {
        // The display grid is epoch 0 of the monotonic clock; start on a frame comfortably ahead.
        let start = (System.now / period + 3) * period
        let end = start + duration
        let slots = Int(duration / period)

        let linkThread = try! LoopThread(name: "bench-link")
        let linkIdentity = linkThread.identity()
        let lateness = SampleBuffer(capacity: slots + 64)
        let skipped = Atomic<Int>(0)
        let link = LoopDisplayLink(display: .default) { _, frame in
            let now = System.now
            guard now >= start, now < end else { return }
            lateness.record(now &- frame.timestamp.nanoseconds)
            skipped.wrappingAdd(frame.skippedFrames, ordering: .relaxed)
        }

        let foundationThread = FoundationLoopThread(name: "bench-link-fdn")
        let foundationFires = SampleBuffer(capacity: slots * 2 + 64)
        let foundationFirst = start + period / 3
        let timer = Timer(fire: Date(timeIntervalSinceNow: Double(Int64(foundationFirst) - Int64(System.now)) / 1e9),
                          interval: Double(period) / 1e9, repeats: true) { _ in foundationFires.record(System.now) }

        let floorFirst = start + 2 * period / 3
        let floorFires = SampleBuffer(capacity: slots * 2 + 64)
        let floorStart = Handoff<Void>()
        let floorRelease = Handoff<Void>()
        let floorThread = BenchThread(name: "bench-link-floor", timerSlack: 1_000) { ready in
            ready()
            floorStart.take()
            defer { floorRelease.take() }  // stay alive until its CPU time and switches are read
            var slot = floorFirst
            while slot < floorFirst + UInt64(slots) * period {
                System.sleep(until: slot)
                let now = System.now
                floorFires.record(now)
                slot += period
                if slot <= now { slot += (now - slot) / period * period + period }
            }
        }

        linkThread.loop.add(link, forMode: .default)
        foundationThread.add(timer)
        floorStart.put(())
        let identities = [linkIdentity, foundationThread.identity, floorThread.identity]
        System.sleep(until: start)
        let cpuBefore = identities.map(\.cpuNanoseconds)
        let switchesBefore = identities.map(\.voluntarySwitches)
        System.sleep(until: end + period)
        let cpu = zip(identities, cpuBefore).map { Double($0.cpuNanoseconds &- $1) / 1e6 }
        let switches = zip(identities, switchesBefore).map { Double($0.voluntarySwitches - $1) }
        link.invalidate()
        timer.invalidate()
        floorRelease.put(())
        floorThread.join()
        linkThread.shutdownAndJoin()
        foundationThread.shutdown()

        let linkFrames = lateness.count
        var linkResult = ImplementationResult(implementation: loopKit,
                                              distribution: Distribution(nanoseconds: lateness.values))
        linkResult.figures = [Figure(name: "frames", value: Double(linkFrames)),
                              Figure(name: "skipped", value: Double(skipped.load(ordering: .relaxed))),
                              Figure(name: "CPU ms", value: cpu[0]), Figure(name: "wake-ups", value: switches[0])]
        var results = [linkResult]
        for (index, name, first, fires) in [(1, foundation, foundationFirst, foundationFires),
                                            (2, floor, floorFirst, floorFires)] {
            let grid = GridLateness(fires: fires.values, first: first, period: period, slots: slots)
            var result = ImplementationResult(implementation: name, distribution: Distribution(nanoseconds: grid.lateness))
            result.figures = [Figure(name: "frames", value: Double(grid.lateness.count)),
                              Figure(name: "skipped", value: Double(grid.missed)),
                              Figure(name: "CPU ms", value: cpu[index]), Figure(name: "wake-ups", value: switches[index])]
            results.append(result)
        }
        return results
    }
}
