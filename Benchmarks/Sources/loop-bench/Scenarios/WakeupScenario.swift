import CoreFoundation
import Dispatch
import Foundation
import LoopKit

/// `wakeup`: one-way latency from a producer's time stamp to the start of the callback on a sleeping thread.
struct WakeupScenario: Scenario {
    let name = "wakeup"
    let summary = "one-way wake-up latency to a sleeping loop, 9 implementations interleaved, random 100–300 µs gaps"

    static let loopKitPerform = "LoopKit perform"
    static let loopKitSource = "LoopKit signalled source"
    static let foundationPerform = "Foundation perform + CFRunLoopWakeUp"
    static let foundationPerformTuned = "Foundation perform + wake-up, tuned thread"
    static let foundationTimer = "Foundation timer added, fire date now"
    static let dispatchAsync = "DispatchQueue.async (serial)"
    static let pipeFloor = "floor: poll on a pipe"
    static let eventfdFloor = "floor: poll on an eventfd"
    static let futexFloor = "floor: futex wait"

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let rounds = context.samples(20_000)
        let targets = Self.makeTargets(capacity: rounds)
        let latencies = WakeupHarness.measure(targets, rounds: rounds, warmUpRounds: max(10, rounds / 10))
        for target in targets { target.shutdown() }

        var report = ScenarioReport(name: "wakeup", title: "one-way wake-up latency of a sleeping thread (µs)",
                                    unit: .microseconds)
        report.floor = Self.pipeFloor
        report.foundation = Self.foundationPerform
        report.plotsCDF = true
        for (target, samples) in zip(targets, latencies) {
            report.results.append(ImplementationResult(
                implementation: target.name, distribution: Distribution(nanoseconds: samples),
                figures: [Figure(name: "% on sender's CPU", value: target.probe.percentOnSenderCPU)]))
        }
        report.notes = [
            "Each sample: the producer stamps CLOCK_MONOTONIC and hands over work; the callback's first statement "
                + "stamps again. One hand-over in flight at a time, each after a random 100–300 µs gap; the nine "
                + "implementations take turns in an order shuffled every round, so that the machine's noise, and "
                + "whatever ran just before a wake-up, falls on all of them alike.",
            "Foundation on Linux: RunLoop.perform does not wake a sleeping loop, so it is followed by "
                + "CFRunLoopWakeUp, as a user must. LoopKit runs on a LoopThread, Foundation on a Thread running "
                + "RunLoop.run(mode:before:), Dispatch on a serial queue of the global pool.",
            "Thread tuning: a LoopThread asks for 1 µs of timer slack and a 500 µs scheduler slice (EEVDF's custom "
                + "slice, sched_setattr). This kernel runs a woken thread on the waker's CPU ('% on sender's CPU'); "
                + "with the default slice the woken thread waits there until the producer blocks, with the short one "
                + "it preempts the producer. The floors get the same tuning, so that they stay floors; Foundation and "
                + "Dispatch run as they ship, and the 'tuned thread' row shows Foundation on a thread tuned the same "
                + "way, to separate the tuning from the loop.",
        ]
        return [report]
    }

    /// The nine implementations, each on a thread of its own, asleep until the producer hands over work.
    static func makeTargets(capacity: Int) -> [WakeupTarget] {
        var targets: [WakeupTarget] = []

        let performThread = try! LoopThread(name: "bench-lk-perform")
        let performProbe = WakeupProbe(capacity: capacity)
        targets.append(WakeupTarget(name: loopKitPerform, probe: performProbe, consumer: performThread.identity(), send: {
            performThread.loop.perform { performProbe.arrive() }
        }, shutdown: { performThread.shutdownAndJoin() }))

        let sourceThread = try! LoopThread(name: "bench-lk-source")
        let sourceProbe = WakeupProbe(capacity: capacity)
        let source = LoopSource { _ in sourceProbe.arrive() }
        sourceThread.loop.add(source, forMode: .default)
        targets.append(WakeupTarget(name: loopKitSource, probe: sourceProbe, consumer: sourceThread.identity(), send: { source.signal() }, shutdown: {
            source.invalidate()
            sourceThread.shutdownAndJoin()
        }))

        let foundationThread = FoundationLoopThread(name: "bench-fdn-perform")
        let foundationProbe = WakeupProbe(capacity: capacity)
        targets.append(WakeupTarget(name: foundationPerform, probe: foundationProbe, consumer: foundationThread.identity, send: {
            foundationThread.perform { foundationProbe.arrive() }
        }, shutdown: { foundationThread.shutdown() }))

        let tunedThread = FoundationLoopThread(name: "bench-fdn-tuned", tuned: true)
        let tunedProbe = WakeupProbe(capacity: capacity)
        targets.append(WakeupTarget(name: foundationPerformTuned, probe: tunedProbe, consumer: tunedThread.identity, send: {
            tunedThread.perform { tunedProbe.arrive() }
        }, shutdown: { tunedThread.shutdown() }))

        let timerThread = FoundationLoopThread(name: "bench-fdn-timer")
        let timerProbe = WakeupProbe(capacity: capacity)
        targets.append(WakeupTarget(name: foundationTimer, probe: timerProbe, consumer: timerThread.identity, send: {
            // The timer is made with a fire date of now; the hand-over is adding it from this thread.
            timerThread.add(Timer(fire: Date(), interval: 0, repeats: false) { _ in timerProbe.arrive() })
        }, shutdown: { timerThread.shutdown() }))

        let queue = DispatchQueue(label: "bench.wakeup.serial")
        let dispatchProbe = WakeupProbe(capacity: capacity)
        targets.append(WakeupTarget(name: dispatchAsync, probe: dispatchProbe, consumer: nil, send: {
            queue.async { dispatchProbe.arrive() }
        }, shutdown: {}))

        for (name, signal) in [(pipeFloor, FloorWaiter.Signal.pipe), (eventfdFloor, .eventfd), (futexFloor, .futex)] {
            let probe = WakeupProbe(capacity: capacity)
            let floor = FloorWaiter(name: "bench-floor", signal: signal, wait: .poll) { probe.arrive() }
            targets.append(WakeupTarget(name: name, probe: probe, consumer: floor.identity, send: { floor.wake() },
                                        shutdown: { floor.shutdown() }))
        }
        return targets
    }
}
