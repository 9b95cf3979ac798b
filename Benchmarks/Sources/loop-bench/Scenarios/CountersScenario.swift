import Dispatch
import Foundation
import LoopKit

/// `counters`: the deterministic figures, which do not depend on the machine's load: system calls per wake-up,
/// wake-up writes per burst of blocks, heap allocations per idle pass and per timer fire.
struct CountersScenario: Scenario {
    let name = "counters"
    let summary = "system calls per wake-up, writes per 10,000-block burst, heap allocations per idle pass and fire"

    func run(_ context: BenchContext) -> [ScenarioReport] {
        [self.systemCalls(context), self.burst(context), self.allocations(context)]
    }

    // MARK: System calls per cross-thread wake-up

    private func systemCalls(_ context: BenchContext) -> ScenarioReport {
        var report = ScenarioReport(name: "counters/syscalls", title: "system calls per cross-thread wake-up",
                                    unit: .figures)
        guard SyscallCounter.isAvailable else {
            report.notes = ["Not measured: perf_event_open on the raw_syscalls tracepoint was refused (needs root or "
                            + "perf_event_paranoid ≤ -1, and a mounted tracefs)."]
            return report
        }
        let wakeUps = context.samples(2_000)
        let targets = WakeupScenario.makeTargets(capacity: wakeUps + wakeUps / 10 + 16)
            .filter { $0.name != WakeupScenario.eventfdFloor }
        for target in targets {
            let consumer = target.consumer
            _ = Self.countCalls(target: target, consumer: consumer, wakeUps: max(10, wakeUps / 10))  // warm-up
            let (producer, consumerCalls) = Self.countCalls(target: target, consumer: consumer, wakeUps: wakeUps)
            var figures = [Figure(name: "producer calls", value: producer)]
            if let consumerCalls {
                figures += [Figure(name: "consumer calls", value: consumerCalls),
                            Figure(name: "total", value: producer + consumerCalls)]
            }
            report.results.append(ImplementationResult(implementation: target.name, distribution: nil,
                                                       figures: figures))
        }
        for target in targets { target.shutdown() }
        report.notes = [
            "Counted by the kernel: a perf_event_open counter on the raw_syscalls:sys_enter tracepoint per thread. "
                + "Producer: the calls inside the hand-over; consumer: every call the woken thread makes from one "
                + "sleep to the next, over \(wakeUps) wake-ups with 100–300 µs gaps.",
            "Dispatch's consumer is a pool thread that varies, so only its producer side is counted.",
        ]
        return report
    }

    /// Returns the producer's and the consumer's system calls per wake-up.
    static func countCalls(target: WakeupTarget, consumer: ThreadIdentity?, wakeUps: Int) -> (Double, Double?) {
        let producerCounter = SyscallCounter(thread: .current)!
        let consumerCounter = consumer.flatMap { SyscallCounter(thread: $0) }
        var random = SplitMix64(seed: 7)
        var producerCalls: Int64 = 0
        target.probe.reset()
        let consumerBefore = consumerCounter?.value ?? 0
        for index in 0..<wakeUps {
            System.sleep(nanoseconds: UInt64.random(in: WakeupHarness.gapNanoseconds, using: &random))
            let before = producerCounter.value
            target.probe.stampSend()
            target.send()
            producerCalls += producerCounter.value - before - 1  // the second read counts itself
            while target.probe.arrived <= index { System.sleep(nanoseconds: 10_000) }
        }
        // Let the consumer go back to sleep, so that its last cycle is complete.
        System.sleep(nanoseconds: 2_000_000)
        let consumerCalls = consumerCounter.map { Double($0.value - consumerBefore) / Double(wakeUps) }
        return (Double(producerCalls) / Double(wakeUps), consumerCalls)
    }

    // MARK: Coalescing: a burst of blocks

    private func burst(_ context: BenchContext) -> ScenarioReport {
        let blocks = 10_000
        var report = ScenarioReport(name: "counters/burst", title: "a burst of 10,000 performs to a sleeping loop",
                                    unit: .figures)
        let loopThread = try! LoopThread(name: "bench-burst-lk")
        let loopIdentity = loopThread.identity()
        let foundationThread = FoundationLoopThread(name: "bench-burst-fdn")
        let producer = ThreadIdentity.current
        let posters: [(String, ThreadIdentity, (Sink) -> Void)] = [
            ("LoopKit perform", loopIdentity, { sink in loopThread.loop.perform { sink.hit() } }),
            ("Foundation perform + CFRunLoopWakeUp", foundationThread.identity,
             { sink in foundationThread.perform { sink.hit() } }),
        ]
        for (index, (name, consumer, post)) in posters.enumerated() {
            _ = ThroughputScenario.round(blocks: blocks, post: post)  // warm-up
            System.sleep(nanoseconds: 2_000_000)
            let writes = SyscallCounter(thread: producer, tracepoint: "syscalls/sys_enter_write")
            let reads = SyscallCounter(thread: consumer, tracepoint: "syscalls/sys_enter_read")
            let all = SyscallCounter(thread: consumer)
            let (writesBefore, readsBefore, allBefore) = (writes?.value ?? 0, reads?.value ?? 0, all?.value ?? 0)
            let countersBefore = loopThread.loop.counters
            _ = ThroughputScenario.round(blocks: blocks, post: post)
            System.sleep(nanoseconds: 2_000_000)
            var figures: [Figure] = []
            if let writes, let reads, let all {
                // Counters of one call (write, read) do not count the read(2) that fetches them.
                figures += [Figure(name: "producer writes", value: Double(writes.value - writesBefore)),
                            Figure(name: "consumer reads", value: Double(reads.value - readsBefore)),
                            Figure(name: "consumer calls", value: Double(all.value - allBefore))]
            }
            if index == 0 {
                let counters = loopThread.loop.counters.since(countersBefore)
                figures += [Figure(name: "wakeUpWrites", value: Double(counters.wakeUpWrites)),
                            Figure(name: "wakeUpDrains", value: Double(counters.wakeUpDrains)),
                            Figure(name: "waits", value: Double(counters.waits)),
                            Figure(name: "emptyWakeUps", value: Double(counters.emptyWakeUps))]
            }
            report.results.append(ImplementationResult(implementation: name, distribution: nil, figures: figures))
        }
        loopThread.shutdownAndJoin()
        foundationThread.shutdown()
        report.notes = [
            "One producer posts \(blocks) blocks back to back to a loop that was asleep; the loop drains them as they "
                + "come. 'producer writes' and 'consumer reads' are write(2) and read(2) calls counted by the kernel "
                + "(syscalls:sys_enter_write/read tracepoints); wakeUpWrites, wakeUpDrains and waits are "
                + "LoopKit's Loop.counters. Coalescing holds when wakeUpWrites ≤ wakeUpDrains. A LoopKit loop with no "
                + "descriptor to watch sleeps on a futex, whose wake-up is a futex(2) call, not a write, and whose "
                + "drain reads nothing: its write and read counts are 0. emptyWakeUps: passes "
                + "that woke and found nothing to do (a stale wake-up); 0 is the target.",
        ]
        return report
    }
}
