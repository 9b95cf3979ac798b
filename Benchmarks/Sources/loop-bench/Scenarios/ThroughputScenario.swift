import Dispatch
import Foundation
import LoopKit

/// `throughput`: a producer posting blocks as fast as it can to a running loop.
struct ThroughputScenario: Scenario {
    let name = "throughput"
    let summary = "500,000 blocks posted as fast as possible: LoopKit perform, Foundation perform + wake, Dispatch"

    static let loopKit = "LoopKit perform"
    static let foundation = "Foundation perform + CFRunLoopWakeUp"
    static let dispatch = "DispatchQueue.async (serial)"

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let total = context.samples(500_000, minimum: 1_000)
        let rounds = 5
        let perRound = total / rounds

        let loopThread = try! LoopThread(name: "bench-tp-lk")
        let foundationThread = FoundationLoopThread(name: "bench-tp-fdn")
        let queue = DispatchQueue(label: "bench.throughput")
        let posters: [(String, (Sink) -> Void)] = [
            (Self.loopKit, { sink in loopThread.loop.perform { sink.hit() } }),
            (Self.foundation, { sink in foundationThread.perform { sink.hit() } }),
            (Self.dispatch, { sink in queue.async { sink.hit() } }),
        ]
        for (_, post) in posters {
            _ = Self.round(blocks: max(100, perRound / 10), post: post)  // warm-up, discarded
        }
        var rates = Array(repeating: [Double](), count: posters.count)
        var postingNanoseconds = Array(repeating: 0.0, count: posters.count)
        for _ in 0..<rounds {
            for (index, (_, post)) in posters.enumerated() {
                let (elapsed, posting) = Self.round(blocks: perRound, post: post)
                rates[index].append(Double(perRound) / (Double(elapsed) / 1e9))
                postingNanoseconds[index] += Double(posting)
            }
        }
        loopThread.shutdownAndJoin()
        foundationThread.shutdown()

        var report = ScenarioReport(name: "throughput", title: "blocks run per second, one producer posting flat out",
                                    unit: .blocksPerSecond)
        report.higherIsBetter = true
        report.foundation = Self.foundation
        for (index, (name, _)) in posters.enumerated() {
            var result = ImplementationResult(implementation: name, distribution: Distribution(rates[index]))
            result.figures = [Figure(name: "blocks", value: Double(perRound * rounds)),
                              Figure(name: "post ns/block", value: postingNanoseconds[index] / Double(perRound * rounds))]
            report.results.append(result)
        }
        report.notes = [
            "\(rounds) rounds of \(perRound) blocks per implementation, taking turns; each sample is one round's rate: "
                + "blocks ÷ (last block run − first post). Each block increments a counter on the loop's thread. "
                + "'post ns/block': the producer's time to post them all. Ratios: rate ÷ the reference's rate.",
        ]
        return [report]
    }

    /// Posts `blocks` blocks and waits until the last has run; returns the elapsed time and the posting time (ns).
    static func round(blocks: Int, post: (Sink) -> Void) -> (elapsed: UInt64, posting: UInt64) {
        let sink = Sink(target: blocks)
        let start = System.now
        for _ in 0..<blocks {
            post(sink)
        }
        let posted = System.now
        sink.done.wait()
        return (sink.finishedAt &- start, posted &- start)
    }
}

/// Counts the blocks that ran, on the consumer's thread, and signals after the last.
// @unchecked Sendable: `count` and `finishedAt` are touched only by the blocks, which run one at a time on the
// consumer (a loop's thread or a serial queue); `finishedAt` is read after `done` is signalled.
final class Sink: @unchecked Sendable {
    private var count = 0
    private let target: Int
    private(set) var finishedAt: UInt64 = 0
    let done = DispatchSemaphore(value: 0)

    init(target: Int) {
        self.target = target
    }

    func hit() {
        self.count += 1
        if self.count == self.target {
            self.finishedAt = System.now
            self.done.signal()
        }
    }
}
