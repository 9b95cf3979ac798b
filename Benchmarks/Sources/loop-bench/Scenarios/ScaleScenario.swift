import CLoopBench
import CoreFoundation
import Foundation
import LoopKit

/// `scale`: the cost of a timer operation as the number of timers grows, and wake-up latency as idle descriptors
/// pile up in the running mode.
struct ScaleScenario: Scenario {
    let name = "scale"
    let summary = "ns per timer operation at 1k/100k/1M timers; wake-up latency with 1/100/1,000 idle descriptors"

    static let sizes = [1_000, 100_000, 1_000_000]
    /// Samples taken at 1,000 timers, where one slice of another tenant's time is a large share of a sample.
    static let smallSizeSamples = 25
    /// LoopKit's sizes are measured in this many interleaved rounds (see `timers(_:)`), one sample of each larger size
    /// per round. Five, not three: a sample at a million timers is mostly fresh pages, whose cost on a virtual machine
    /// varies from one sample to the next by up to 2×, and the median of three followed one slow sample too often.
    static let loopKitRounds = 5
    /// Foundation's timers live in a sorted array per mode (O(n) per insert and remove); past this size a run would
    /// take minutes, so it is not attempted.
    static let foundationLimit = 100_000

    /// The tables `--only` can pick out of this scenario.
    static let reports = ["scale/timers", "scale/descriptors"]

    func run(_ context: BenchContext) -> [ScenarioReport] {
        var reports: [ScenarioReport] = []
        if context.wants("scale/timers", of: self.name) {
            reports.append(self.timers(context))
        }
        if context.wants("scale/descriptors", of: self.name) {
            reports.append(self.descriptors(context))
        }
        return reports
    }

    // MARK: Timers

    private func timers(_ context: BenchContext) -> ScenarioReport {
        let sizes = context.isQuick ? Self.sizes.map { $0 / 10 } : Self.sizes
        _ = Self.loopKitTimers(count: 1_000)
        _ = Self.foundationTimers(count: 1_000)  // warm-up, discarded
        var report = ScenarioReport(name: "scale/timers", title: "schedule n timers, cancel half, fire the rest",
                                    unit: .nanosecondsPerOperation)
        // LoopKit's sizes are measured in rounds, each taking an equal share of every size's samples, so that the
        // host's noise during the run falls on all sizes alike: the verdict divides the largest size by the smallest,
        // and a size measured alone in a slow (or fast) second of the host would decide it.
        let rounds = Self.loopKitRounds
        var loopKitRuns: [Int: [Phases]] = [:]
        for _ in 0..<rounds {
            for size in sizes {
                let repetitions = size <= 1_000 ? Self.smallSizeSamples / rounds : 1
                loopKitRuns[size, default: []] += (0..<repetitions).map { _ in Self.loopKitTimers(count: size) }
            }
        }
        for size in sizes {
            report.results.append(Self.result("LoopKit, \(Format.number(Double(size))) timers", size: size,
                                              runs: loopKitRuns[size] ?? []))
            let implementation = "Foundation, \(Format.number(Double(size))) timers"
            guard size <= Self.foundationLimit else {
                report.notes.append("\(implementation): not run (a sorted array: O(n²) in all, minutes at this "
                                    + "size; see the 100,000 row's growth).")
                continue
            }
            // Small sizes take a millisecond or two, where one slice of another tenant's time is a large share: they
            // are repeated, and the median run is reported.
            let repetitions = size <= 1_000 ? Self.smallSizeSamples : 1
            report.results.append(Self.result(implementation, size: size,
                                              runs: (0..<repetitions).map { _ in Self.foundationTimers(count: size) }))
        }
        report.notes.insert(
            "Each sample: the thread's CPU time for scheduling n one-shot timers with fire dates in random order "
                + "(all already due), invalidating every other one, then running the loop until the rest have fired, "
                + "divided by 2n operations (n schedules, n/2 cancels, n/2 fires), on a fresh thread, with the memory "
                + "earlier samples freed given back to the system first (malloc_trim), so that every size starts on "
                + "fresh pages. \(Self.smallSizeSamples) samples at 1,000 timers; above, \(rounds) for LoopKit and 1 "
                + "for Foundation (a tenth of each size with --quick); the per-phase ns per operation beside them are "
                + "each phase's median over the samples. LoopKit's sizes are taken in \(rounds) rounds "
                + "(\(Self.smallSizeSamples / rounds) samples of 1,000, then one of each larger size), so that the "
                + "host's noise falls on every size alike; Foundation's after them.",
            at: 0)
        return report
    }

    /// A size's row: every run's ns per operation, and each phase's median over the runs.
    private static func result(_ implementation: String, size: Int, runs: [Phases]) -> ImplementationResult {
        var result = ImplementationResult(
            implementation: implementation,
            distribution: Distribution(runs.map { $0.total / Double(2 * size) }))
        let median = { (phase: KeyPath<Phases, Double>, operations: Int) in
            Distribution(runs.map { $0[keyPath: phase] / Double(operations) }).p50
        }
        result.figures = [Figure(name: "schedule ns", value: median(\.schedule, size)),
                          Figure(name: "cancel ns", value: median(\.cancel, size / 2)),
                          Figure(name: "fire ns", value: median(\.fire, size - size / 2))]
        return result
    }

    struct Phases {
        var schedule = 0.0
        var cancel = 0.0
        var fire = 0.0
        var total: Double { self.schedule + self.cancel + self.fire }
    }

    /// Fire dates for `count` timers: a shuffled spread over the second before `base` (all due when the loop runs).
    static func fireOffsets(count: Int) -> [UInt64] {
        var random = SplitMix64(seed: 2024)
        return (0..<count).map { _ in UInt64.random(in: 0..<1_000_000_000, using: &random) }
    }

    /// Runs on a fresh thread, so that CPU time is the work's alone, with the memory that earlier samples freed given
    /// back to the system first (malloc_trim(3)): every sample then pays for fresh pages, as a million timers always
    /// do. Without it, a 1,000-timer sample sometimes found its pages still mapped and sometimes not, depending on
    /// where the allocator's heap ended, and ran a third faster or not: the smallest size's figure, which the
    /// verdict divides by, moved between runs by that much.
    static func onFreshThread<R>(_ body: @escaping @Sendable () -> R) -> R {
        System.releaseFreeMemory()
        let result = Handoff<R>()
        let thread = BenchThread(name: "bench-scale") { ready in
            ready()
            result.put(body())
        }
        thread.join()
        return result.take()
    }

    /// Runs the three phases in order on the calling thread and returns the thread's CPU time for each.
    static func measurePhases(schedule: () -> Void, cancel: () -> Void, fire: () -> Void) -> Phases {
        let identity = ThreadIdentity.current
        func cpuTime(of phase: () -> Void) -> Double {
            let started = identity.cpuNanoseconds
            phase()
            return Double(identity.cpuNanoseconds - started)
        }
        let scheduled = cpuTime(of: schedule)
        let cancelled = cpuTime(of: cancel)
        return Phases(schedule: scheduled, cancel: cancelled, fire: cpuTime(of: fire))
    }

    static func loopKitTimers(count: Int) -> Phases {
        let offsets = fireOffsets(count: count)
        return onFreshThread {
            let loop = try! Loop()
            let base = System.now - 1_000_000_000
            var timers: [LoopTimer] = []
            timers.reserveCapacity(count)
            var result = RunResult.timedOut
            let phases = measurePhases(schedule: {
                for offset in offsets {
                    let timer = LoopTimer(fireAt: LoopInstant(nanoseconds: base + offset)) { _ in }
                    loop.add(timer, forMode: .default)
                    timers.append(timer)
                }
            }, cancel: {
                for index in stride(from: 0, to: count, by: 2) {
                    timers[index].invalidate()
                }
            }, fire: {
                result = loop.run(mode: .default, before: loop.now + .seconds(300))
            })
            precondition(result == .finished && !timers.contains { $0.isValid }, "LoopKit: timers left unfired")
            return phases
        }
    }

    static func foundationTimers(count: Int) -> Phases {
        let offsets = fireOffsets(count: count)
        return onFreshThread {
            let runLoop = RunLoop.current
            let base = Date().timeIntervalSinceReferenceDate - 1
            var timers: [Timer] = []
            timers.reserveCapacity(count)
            let remaining = Counter(count - count / 2)
            return measurePhases(schedule: {
                for offset in offsets {
                    let timer = Timer(fire: Date(timeIntervalSinceReferenceDate: base + Double(offset) / 1e9),
                                      interval: 0, repeats: false) { _ in
                        if remaining.decrement() == 0 { CFRunLoopStop(CFRunLoopGetCurrent()) }
                    }
                    runLoop.add(timer, forMode: .default)
                    timers.append(timer)
                }
            }, cancel: {
                for index in stride(from: 0, to: count, by: 2) {
                    timers[index].invalidate()
                }
            }, fire: {
                while remaining.value > 0 {
                    _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 300, false)
                }
            })
        }
    }

    // MARK: Descriptors

    /// Adds `count` idle eventfds to `loop`'s default mode as readable descriptor sources (which never fire).
    static func addIdleSources(_ count: Int, to loop: Loop) -> ([CInt], [LoopDescriptorSource]) {
        var descriptors: [CInt] = []
        var sources: [LoopDescriptorSource] = []
        for _ in 0..<count {
            let descriptor = cbench_eventfd()
            precondition(descriptor >= 0, "eventfd failed (descriptor limit?)")
            descriptors.append(descriptor)
            let source = LoopDescriptorSource(descriptor: descriptor, events: .readable) { _, _ in }
            loop.add(source, forMode: .default)
            sources.append(source)
        }
        return (descriptors, sources)
    }

    private func descriptors(_ context: BenchContext) -> ScenarioReport {
        System.raiseDescriptorLimit(to: 8_192)
        let rounds = context.samples(4_000)
        var targets: [WakeupTarget] = []
        for idle in [1, 100, 1_000] {
            let thread = try! LoopThread(name: "bench-scale-fd")
            let (descriptors, sources) = Self.addIdleSources(idle, to: thread.loop)
            let probe = WakeupProbe(capacity: rounds)
            targets.append(WakeupTarget(name: "LoopKit perform, \(Format.number(Double(idle))) idle", probe: probe,
                                        consumer: nil, send: { thread.loop.perform { probe.arrive() } }, shutdown: {
                for source in sources { source.invalidate() }
                thread.shutdownAndJoin()
                for descriptor in descriptors { _ = cbench_close(descriptor) }
            }))
        }
        for (idle, wait) in [(1, FloorWaiter.Wait.poll), (1_000, .poll), (1_000, .epoll)] {
            let probe = WakeupProbe(capacity: rounds)
            let floor = FloorWaiter(name: "bench-scale-floor", signal: .pipe, wait: wait, idleDescriptors: idle) {
                probe.arrive()
            }
            let kind = wait == .poll ? "poll" : "epoll"
            targets.append(WakeupTarget(name: "floor: \(kind), \(Format.number(Double(idle))) idle", probe: probe,
                                        consumer: nil, send: { floor.wake() }, shutdown: { floor.shutdown() }))
        }
        // Readiness itself: a descriptor source's own descriptor becomes readable (in a large mode, epoll's report
        // and the poll that confirms it), beside 0 or 1,000 idle ones. Appended last: the verdicts index the rows.
        for idle in [0, 1_000] {
            let thread = try! LoopThread(name: "bench-scale-rd")
            var (descriptors, sources) = Self.addIdleSources(idle, to: thread.loop)
            let signal = cbench_eventfd()
            precondition(signal >= 0, "eventfd failed (descriptor limit?)")
            descriptors.append(signal)
            let probe = WakeupProbe(capacity: rounds)
            let ready = LoopDescriptorSource(descriptor: signal, events: .readable) { _, _ in
                probe.arrive()
                _ = cbench_read_discard(signal)
            }
            thread.loop.add(ready, forMode: .default)
            sources.append(ready)
            targets.append(WakeupTarget(name: "LoopKit descriptor ready, \(Format.number(Double(idle))) idle",
                                        probe: probe, consumer: nil, send: { _ = cbench_eventfd_signal(signal) },
                                        shutdown: {
                for source in sources { source.invalidate() }
                thread.shutdownAndJoin()
                for descriptor in descriptors { _ = cbench_close(descriptor) }
            }))
        }
        let latencies = WakeupHarness.measure(targets, rounds: rounds, warmUpRounds: max(10, rounds / 10))
        for target in targets { target.shutdown() }

        var report = ScenarioReport(name: "scale/descriptors",
                                    title: "wake-up latency with idle descriptor sources in the running mode (µs)",
                                    unit: .microseconds)
        report.floor = targets[3].name
        report.plotsCDF = true
        for (target, samples) in zip(targets, latencies) {
            report.results.append(ImplementationResult(implementation: target.name,
                                                       distribution: Distribution(nanoseconds: samples)))
        }
        report.notes = [
            "Measured as in `wakeup` (shuffled turns, random 100–300 µs gaps), with 1, 100 or 1,000 idle eventfds "
                + "registered as LoopDescriptorSources (readable) in the running mode. The floors wait on a pipe "
                + "beside 1 or 1,000 idle eventfds, in poll(2) and in epoll_wait(2).",
            "'descriptor ready': the producer writes an eventfd that a LoopDescriptorSource watches (with 0 or 1,000 "
                + "idle ones beside it); its handler is the callback. With 1,000 idle, the ready one is found through "
                + "epoll and confirmed with one poll on it.",
            "LoopKit polls a mode's descriptors in its one ppoll up to 31 sources; from 32 on, it keeps them in an "
                + "epoll set and sleeps on that, after one look at all of them without waiting (which is how a "
                + "descriptor closed without cancelling its source is still reported). The 100 and 1,000 rows take "
                + "that path.",
            "Foundation is not in this table: swift-corelibs-foundation has no public descriptor source on Linux.",
        ]
        return report
    }
}

/// A countdown touched only on one thread.
// @unchecked Sendable: used only on the thread that runs the timers (Foundation's timer blocks are `@Sendable`).
final class Counter: @unchecked Sendable {
    private(set) var value: Int

    init(_ value: Int) {
        self.value = value
    }

    func decrement() -> Int {
        self.value -= 1
        return self.value
    }
}
