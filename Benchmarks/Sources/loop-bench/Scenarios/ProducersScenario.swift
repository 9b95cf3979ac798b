import Dispatch
import Foundation
import LoopKit

/// `producers`: 1, 2, 4, 8 and 16 threads posting blocks to one loop at once, so that the lock around the loop's
/// shared state is measured where producers outnumber cores.
struct ProducersScenario: Scenario {
    let name = "producers"
    let summary = "1–16 threads posting 400,000 blocks in all to one loop at once: LoopKit perform, Dispatch serial"

    static let producerCounts = [1, 2, 4, 8, 16]
    static func loopKit(_ producers: Int) -> String { "LoopKit perform, \(producers) producer\(producers == 1 ? "" : "s")" }
    static func dispatch(_ producers: Int) -> String {
        "DispatchQueue.async, \(producers) producer\(producers == 1 ? "" : "s")"
    }

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let total = context.samples(400_000, minimum: 16_000)
        let rounds = 3
        let loopThread = try! LoopThread(name: "bench-prod-lk")
        let queue = DispatchQueue(label: "bench.producers")
        let posters: [(String, (Int) -> String, @Sendable (Sink) -> Void)] = [
            ("LoopKit", Self.loopKit, { sink in loopThread.loop.perform { sink.hit() } }),
            ("Dispatch", Self.dispatch, { sink in queue.async { sink.hit() } }),
        ]
        var report = ScenarioReport(name: "producers", title: "blocks run per second, N threads posting at once",
                                    unit: .blocksPerSecond)
        report.higherIsBetter = true
        for (_, label, post) in posters {
            _ = Self.round(blocks: total / 10, producers: 2, post: post)  // warm-up, discarded
            var single: Double?
            for producers in Self.producerCounts {
                var rates: [Double] = []
                for _ in 0..<rounds {
                    let elapsed = Self.round(blocks: total, producers: producers, post: post)
                    rates.append(Double(total) / (Double(elapsed) / 1e9))
                }
                let distribution = Distribution(rates)
                single = single ?? distribution.p50
                var result = ImplementationResult(implementation: label(producers), distribution: distribution)
                result.figures = [Figure(name: "vs 1 producer", value: distribution.p50 / single!)]
                report.results.append(result)
            }
        }
        loopThread.shutdownAndJoin()
        report.notes = [
            "\(total) blocks per round split evenly over the producer threads, which start together and post flat "
                + "out; \(rounds) rounds per row; each sample is one round's blocks ÷ (last block run − start). "
                + "'vs 1 producer': this row's p50 ÷ the one-producer row's p50, of the same implementation. "
                + "This machine has \(ProcessInfo.processInfo.activeProcessorCount) cores.",
        ]
        return [report]
    }

    /// Starts `producers` threads that post `blocks` blocks in all, and waits until the last has run.
    ///
    /// - Returns: The time from the start signal to the last block run, in nanoseconds.
    static func round(blocks: Int, producers: Int, post: @escaping @Sendable (Sink) -> Void) -> UInt64 {
        let sink = Sink(target: blocks)
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let perProducer = blocks / producers
        var threads: [Thread] = []
        for index in 0..<producers {
            let count = index == producers - 1 ? blocks - perProducer * (producers - 1) : perProducer
            let thread = Thread {
                ready.signal()
                go.wait()
                for _ in 0..<count {
                    post(sink)
                }
            }
            thread.name = "bench-producer-\(index)"
            threads.append(thread)
            thread.start()
        }
        for _ in 0..<producers { ready.wait() }
        let start = System.now
        for _ in 0..<producers { go.signal() }
        sink.done.wait()
        return sink.finishedAt &- start
    }
}
