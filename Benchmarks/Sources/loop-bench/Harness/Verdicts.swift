/// Judges the benchmark's targets against a run's reports.
struct VerdictJudge {
    let reports: [ScenarioReport]

    private func report(_ name: String) -> ScenarioReport? {
        self.reports.first { $0.name == name }
    }

    private func distribution(_ report: String, _ implementation: String) -> Distribution? {
        self.report(report)?.result(implementation)?.distribution
    }

    private func figure(_ report: String, _ implementation: String, _ name: String) -> Double? {
        self.report(report)?.result(implementation)?.figure(name)
    }

    private static func us(_ value: Double) -> String { Format.number(value) + " µs" }

    /// `value ≤ factor × reference` (`<` when `strictly`), described.
    private static func atMost(_ target: String, _ value: Double?, _ valueName: String, _ factor: Double,
                               _ reference: Double?, _ referenceName: String, strictly: Bool = false,
                               unit: (Double) -> String = us) -> Verdict {
        guard let value, let reference else {
            return Verdict(target: target, value: nil, bound: nil, detail: "not measured in this run")
        }
        guard value.isFinite, reference.isFinite else {
            // A figure with no samples behind it: scored as an infinite miss, never left out or passed.
            return Verdict(target: target, value: .infinity, bound: 1, strictly: strictly,
                           detail: "\(valueName) \(unit(value)) vs \(referenceName) \(unit(reference)): no figure to judge")
        }
        let bound = factor * reference
        let factorText = factor == 1 ? "" : Format.number(factor) + " × "
        return Verdict(target: target, value: value, bound: bound, strictly: strictly,
                       detail: "\(valueName) \(unit(value)) vs \(factorText)\(referenceName) \(unit(reference))"
                           + (factor == 1 ? "" : " = \(unit(bound))"))
    }

    /// A verdict for `target` when its scenario ran without one of `implementations`, with the reason: NOT MET when
    /// a LoopKit implementation started and failed (LoopKit's own failure is a miss), NOT RUN otherwise (the machine
    /// could not hold the run, or a peer failed and there is nothing to compare with).
    private func notRun(_ target: String, _ report: String, _ implementations: [String]) -> Verdict? {
        let missing = implementations.lazy.compactMap { self.report(report)?.result($0) }.filter {
            $0.notRunReason != nil
        }
        if let failure = missing.first(where: { $0.failed && $0.implementation.hasPrefix("LoopKit") }) {
            return Verdict(target: target, value: .infinity, bound: 1,
                           detail: "\(failure.implementation) failed: " + (failure.notRunReason ?? ""))
        }
        return missing.first.map {
            Verdict(target: target, value: nil, bound: nil, detail: "not run: " + ($0.notRunReason ?? ""),
                    wasNotRun: true)
        }
    }

    func verdicts() -> [Verdict] {
        var verdicts: [Verdict] = []
        let lk = distribution("wakeup", WakeupScenario.loopKitPerform)
        let floor = distribution("wakeup", WakeupScenario.pipeFloor)
        let fdn = distribution("wakeup", WakeupScenario.foundationPerform)
        let dispatch = distribution("wakeup", WakeupScenario.dispatchAsync)
        verdicts.append(Self.atMost("wakeup p50 ≤ 1.5 × pipe floor", lk?.p50, "LoopKit perform p50", 1.5, floor?.p50,
                                    "floor p50"))
        verdicts.append(Self.atMost("wakeup p99 ≤ 1.5 × pipe floor", lk?.p99, "LoopKit perform p99", 1.5, floor?.p99,
                                    "floor p99"))
        verdicts.append(Self.atMost("wakeup p50 ≥ 4× better than Foundation perform + wake", lk?.p50,
                                    "LoopKit p50", 0.25, fdn?.p50, "Foundation p50"))
        verdicts.append(Self.atMost("wakeup p50 no worse than DispatchQueue.async", lk?.p50, "LoopKit p50", 1,
                                    dispatch?.p50, "Dispatch p50"))

        let source = distribution("wakeup", WakeupScenario.loopKitSource)
        verdicts.append(Self.atMost("wakeup: signalled source p50 ≤ 1.3 × pipe floor", source?.p50,
                                    "LoopKit source p50", 1.3, floor?.p50, "floor p50"))
        verdicts.append(Self.atMost("wakeup: signalled source p99 ≤ 1.5 × pipe floor", source?.p99,
                                    "LoopKit source p99", 1.5, floor?.p99, "floor p99"))

        for (label, _, _) in TimerScenario.periods {
            let name = "timer/\(label)"
            let lkTimer = distribution(name, TimerScenario.loopKit)
            let fdnTimer = distribution(name, TimerScenario.foundation)
            verdicts.append(Self.atMost("timer \(label) p50 ≤ Foundation Timer", lkTimer?.p50, "LoopKit p50", 1,
                                        fdnTimer?.p50, "Foundation p50"))
            verdicts.append(Self.atMost("timer \(label) p99 ≤ Foundation Timer", lkTimer?.p99, "LoopKit p99", 1,
                                        fdnTimer?.p99, "Foundation p99"))
            verdicts.append(Self.atMost("timer \(label): no slot missed", figure(name, TimerScenario.loopKit, "missed"),
                                        "LoopKit missed", 1, 0, "allowed", unit: Format.number))
        }

        let link = distribution("displaylink", DisplayLinkScenario.loopKit)
        verdicts.append(Self.atMost("displaylink: no frame skipped",
                                    figure("displaylink", DisplayLinkScenario.loopKit, "skipped"), "skipped", 1, 0,
                                    "allowed", unit: Format.number))
        var timerFloor = distribution("timer/8.333ms", TimerScenario.floor)?.p99
        var floorName = "timer floor p99 at 8.333 ms"
        if timerFloor == nil {
            timerFloor = distribution("displaylink", DisplayLinkScenario.floor)?.p99
            floorName = "120 Hz floor p99 (this scenario's)"
        }
        verdicts.append(Self.atMost("displaylink p99 ≤ 1.2 × timer floor p99", link?.p99, "link p99", 1.2, timerFloor,
                                    floorName))
        // CPU from the phase with the tickers on one processor (`DisplayLinkScenario.cpuOnOneProcessor`).
        let tickerCPU = { (ticker: String) in figure("displaylink", ticker, DisplayLinkScenario.cpuOnOneProcessor) }
        let milliseconds = { (value: Double) in Format.number(value) + " ms" }
        verdicts.append(Self.atMost("displaylink CPU ≤ Foundation 120 Hz timer",
                                    tickerCPU(DisplayLinkScenario.loopKit), "link CPU on 1 processor", 1,
                                    tickerCPU(DisplayLinkScenario.foundation), "Foundation's", unit: milliseconds))
        verdicts.append(Self.atMost("displaylink CPU ≤ 1.5 × clock_nanosleep floor",
                                    tickerCPU(DisplayLinkScenario.loopKit), "link CPU on 1 processor", 1.5,
                                    tickerCPU(DisplayLinkScenario.floor), "floor's", unit: milliseconds))

        let rate = distribution("throughput", ThroughputScenario.loopKit)?.p50
        let blocks: (Double) -> String = { Format.number($0) + " blocks/s" }
        // "At least" targets: the reference must be at most LoopKit's rate.
        verdicts.append(Self.atMost("throughput ≥ DispatchQueue.async", distribution("throughput",
                                    ThroughputScenario.dispatch)?.p50, "Dispatch", 1, rate, "LoopKit", unit: blocks))
        verdicts.append(Self.atMost("throughput ≥ 2 × Foundation", (distribution("throughput",
                                    ThroughputScenario.foundation)?.p50).map { $0 * 2 }, "2 × Foundation", 1, rate,
                                    "LoopKit", unit: blocks))

        let one = distribution("producers", ProducersScenario.loopKit(1))?.p50
        let eight = distribution("producers", ProducersScenario.loopKit(8))?.p50
        verdicts.append(Self.atMost("producers: 8 producers keep ≥ 50% of 1 producer's rate", one.map { $0 / 2 },
                                    "½ × 1 producer", 1, eight, "8 producers", unit: blocks))

        verdicts.append(Self.atMost("idle: 0 wake-ups in 5 s", figure("idle", IdleScenario.loopKit, "wake-ups"),
                                    "LoopKit wake-ups", 1, 0, "allowed", unit: Format.number))
        verdicts.append(Self.atMost("idle: CPU < 1 ms in 5 s", figure("idle", IdleScenario.loopKit, "CPU ms"),
                                    "LoopKit CPU", 1, 1, "limit", unit: { Format.number($0) + " ms" }))

        let timers = self.report("scale/timers")
        let small = timers?.results.first { $0.implementation.hasPrefix("LoopKit") }
        let large = timers?.results.last { $0.implementation.hasPrefix("LoopKit") }
        // "In every run" (issue 12): no tolerance for a run that misses.
        var timerScale = Self.atMost("scale: ns/op at the largest size ≤ 1.5 × at 1,000 (in every run)",
                                     large?.distribution?.p50, large?.implementation ?? "largest", 1.5,
                                     small?.distribution?.p50, small?.implementation ?? "smallest",
                                     unit: { Format.number($0) + " ns" })
        timerScale.inEveryRun = true
        verdicts.append(timerScale)
        let fds = self.report("scale/descriptors")
        verdicts.append(Self.atMost("scale: wake-up p50 at 1,000 descriptors ≤ 2 × at 1",
                                    fds?.results[safe: 2]?.distribution?.p50, "1,000 idle", 2,
                                    fds?.results[safe: 0]?.distribution?.p50, "1 idle"))

        verdicts += self.scaleEchoVerdicts()

        let syscalls = "counters/syscalls"
        let burst = "counters/burst"
        let writes = figure(burst, "LoopKit perform", "wakeUpWrites")
        let drains = figure(burst, "LoopKit perform", "wakeUpDrains")
        verdicts.append(Self.atMost("counters: ≤ 1 write per coalesced wake-up (burst)", writes, "wake-up writes", 1,
                                    drains, "drains", unit: Format.number))
        verdicts.append(Self.atMost("counters: ≤ 1 read per coalesced wake-up (burst)",
                                    figure(burst, "LoopKit perform", "consumer reads"), "consumer reads", 1, drains,
                                    "drains", unit: Format.number))
        verdicts.append(Self.atMost("counters: ≤ 1 write + 1 read + 1 wait per single wake-up",
                                    figure(syscalls, WakeupScenario.loopKitPerform, "total"),
                                    "LoopKit perform calls", 1, 3, "allowed", unit: Format.number))
        verdicts.append(Self.atMost("counters: 0 passes with nothing to do (burst to a sleeping loop)",
                                    figure(burst, "LoopKit perform", "emptyWakeUps"), "empty passes", 1, 0, "allowed",
                                    unit: Format.number))
        verdicts.append(Self.atMost("counters: 0 heap allocations per idle pass",
                                    figure("counters/allocations", "LoopKit LoopThread", "per idle pass"),
                                    "allocations", 1, 0, "allowed", unit: Format.number))
        let callouts = ["per timer fire", "per display-link frame", "per descriptor callout"].map {
            figure("counters/allocations", "LoopKit LoopThread", $0)
        }
        verdicts.append(Self.atMost("counters: 0 heap allocations per callout (timer, frame, descriptor)",
                                    callouts.contains { $0 == nil } ? nil : callouts.compactMap { $0 }.max(),
                                    "allocations", 1, 0, "allowed", unit: Format.number))

        let echo = EchoScenario.messagesReport
        let messages: (Double) -> String = { Format.number($0) + " msgs/s" }
        for threads in EchoScenario.threadCounts {
            let (lk, dq) = (EchoScenario.loopKit(threads), EchoScenario.dispatch(threads))
            let label = "echo, \(threads) thread\(threads == 1 ? "" : "s")"
            let rateTarget = "\(label): msgs/s ≥ 1.5 × Dispatch"
            // "At least" target: 1.5 × Dispatch's rate must be at most LoopKit's.
            verdicts.append(notRun(rateTarget, echo, [lk, dq]) ?? Self.atMost(
                rateTarget, figure(echo, dq, "msgs/s").map { $0 * 1.5 }, "1.5 × Dispatch", 1,
                figure(echo, lk, "msgs/s"), "LoopKit", unit: messages))
            let tailTarget = "\(label): round-trip p99 < Dispatch"
            verdicts.append(notRun(tailTarget, echo, [lk, dq]) ?? Self.atMost(
                tailTarget, distribution(echo, lk)?.p99, "LoopKit p99", 1, distribution(echo, dq)?.p99, "Dispatch p99",
                strictly: true))
        }
        verdicts.append(Self.atMost("actor: same-loop actor-to-actor call ≤ 5 × between default actors",
                                    distribution(ActorScenario.name, ActorScenario.sameLoop)?.p50, "same loop", 5,
                                    distribution(ActorScenario.name, ActorScenario.defaultActors)?.p50,
                                    "default actors", unit: { Format.number($0) + " ns" }))
        return verdicts
    }

    /// At the most idle connections: LoopKit's server no slower, and no costlier per round trip, than 1.3 × itself
    /// with none, and faster and cheaper than the Dispatch server beside the same idle connections.
    private func scaleEchoVerdicts() -> [Verdict] {
        let report = "scale/echo"
        let most = ScaleEchoScenario.idleCounts.max()!
        let idle = Format.grouped(most)
        let lk = ScaleEchoScenario.implementation(ScaleEchoScenario.loopKit, idle: most)
        let none = ScaleEchoScenario.implementation(ScaleEchoScenario.loopKit, idle: 0)
        let dq = ScaleEchoScenario.implementation(ScaleEchoScenario.dispatch, idle: most)
        let cpu = "server CPU µs/rt"
        let microseconds: (Double) -> String = { Format.number($0) + " µs" }
        let judged = [
            Self.atMost("scale/echo: p50 at \(idle) idle ≤ 1.3 × at 0", distribution(report, lk)?.p50,
                        "LoopKit at \(idle)", 1.3, distribution(report, none)?.p50, "at 0"),
            Self.atMost("scale/echo: CPU per round trip at \(idle) idle ≤ 1.3 × at 0", figure(report, lk, cpu),
                        "LoopKit at \(idle)", 1.3, figure(report, none, cpu), "at 0", unit: microseconds),
            Self.atMost("scale/echo: p50 at \(idle) idle < Dispatch", distribution(report, lk)?.p50, "LoopKit p50", 1,
                        distribution(report, dq)?.p50, "Dispatch p50", strictly: true),
            Self.atMost("scale/echo: CPU per round trip at \(idle) idle < Dispatch", figure(report, lk, cpu), "LoopKit",
                        1, figure(report, dq, cpu), "Dispatch", strictly: true, unit: microseconds),
        ]
        let needed = [[lk, none], [lk, none], [lk, dq], [lk, dq]]
        return zip(judged, needed).map { verdict, implementations in
            self.notRun(verdict.target, report, implementations) ?? verdict
        }
    }
}

extension Array {
    subscript(safe index: Int) -> Element? {
        self.indices.contains(index) ? self[index] : nil
    }
}
