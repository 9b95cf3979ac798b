import Dispatch
import Foundation
import LoopKit

/// `pingpong`: a message bounced between two loops on two threads; the round trip, halved.
struct PingPongScenario: Scenario {
    let name = "pingpong"
    let summary = "round trip between two loops on two threads, halved: LoopKit, Foundation, the pipe floor"

    static let loopKit = "LoopKit perform ⇄ perform"
    static let foundation = "Foundation perform + wake ⇄"
    static let floor = "floor: poll on pipes ⇄"

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let rounds = context.samples(20_000)
        let chunk = max(1, rounds / 10)
        let rallies = [Self.loopKitRally(), Self.foundationRally(), Self.floorRally()]
        for rally in rallies {
            _ = rally.play(max(10, rounds / 10))  // warm-up, discarded
        }
        // Chunk by chunk in turn, so that the machine's noise falls on all three alike.
        var samples: [[UInt64]] = Array(repeating: [], count: rallies.count)
        var remaining = rounds
        while remaining > 0 {
            let count = min(chunk, remaining)
            for (index, rally) in rallies.enumerated() {
                samples[index] += rally.play(count)
            }
            remaining -= count
        }
        for rally in rallies { rally.close() }

        var report = ScenarioReport(name: "pingpong", title: "half a round trip between two loops (µs)",
                                    unit: .microseconds)
        report.floor = Self.floor
        report.foundation = Self.foundation
        report.plotsCDF = true
        for (rally, values) in zip(rallies, samples) {
            report.results.append(ImplementationResult(implementation: rally.name,
                                                       distribution: Distribution(nanoseconds: values)))
        }
        report.notes = [
            "Thread A stamps the time and hands a message to thread B, whose callback hands one back; A records half "
                + "the elapsed time and serves again at once. Chunks of \(chunk) rounds, the three taking turns.",
        ]
        return [report]
    }

    /// Two LoopThreads, each queueing a block on the other.
    static func loopKitRally() -> Rally {
        let a = try! LoopThread(name: "bench-ping-a")
        let b = try! LoopThread(name: "bench-ping-b")
        let ball = Ball()
        ball.serve = {
            b.loop.perform {
                a.loop.perform { ball.hit() }
            }
        }
        return Rally(name: loopKit, ball: ball, start: { a.loop.perform { ball.hit() } }, shutdown: {
            a.shutdownAndJoin()
            b.shutdownAndJoin()
        })
    }

    /// Two threads running Foundation's RunLoop, each performing a block on the other and waking it.
    static func foundationRally() -> Rally {
        let a = FoundationLoopThread(name: "bench-ping-fa")
        let b = FoundationLoopThread(name: "bench-ping-fb")
        let ball = Ball()
        ball.serve = {
            b.perform {
                a.perform { ball.hit() }
            }
        }
        return Rally(name: foundation, ball: ball, start: { a.perform { ball.hit() } }, shutdown: {
            a.shutdown()
            b.shutdown()
        })
    }

    /// Two bare threads, each in poll(2) on its own pipe, writing a byte into the other's.
    static func floorRally() -> Rally {
        let ball = Ball()
        let a = FloorWaiter(name: "bench-ping-pa", signal: .pipe, wait: .poll) { ball.hit() }
        let b = FloorWaiter(name: "bench-ping-pb", signal: .pipe, wait: .poll) { a.wake() }
        ball.serve = { b.wake() }
        return Rally(name: floor, ball: ball, start: { a.wake() }, shutdown: {
            a.shutdown()
            b.shutdown()
        })
    }
}

/// One pair of threads and the ball they bounce.
struct Rally {
    let name: String
    fileprivate let ball: Ball
    /// Makes thread A hit the ball for the first time.
    let start: () -> Void
    let shutdown: () -> Void

    /// Stops both threads and breaks the closure cycle between the ball and the threads.
    func close() {
        self.shutdown()
        self.ball.serve = {}
    }

    /// Plays `rounds` rounds and returns half of each round trip, in nanoseconds.
    fileprivate func play(_ rounds: Int) -> [UInt64] {
        self.ball.prepare(rounds: rounds)
        self.start()
        self.ball.done.wait()
        return self.ball.halves.values
    }
}

/// The state of a rally, touched only on thread A once a rally starts.
// @unchecked Sendable: `serve`, `sentAt`, `remaining` and `halves` are set by `prepare` before the rally starts
// (the hand-over to thread A orders it) and touched only on thread A until `done` is signalled.
private final class Ball: @unchecked Sendable {
    var serve: @Sendable () -> Void = {}
    private var sentAt: UInt64 = 0
    private var remaining = 0
    private(set) var halves = SampleBuffer(capacity: 1)
    let done = DispatchSemaphore(value: 0)

    func prepare(rounds: Int) {
        self.sentAt = 0
        self.remaining = rounds
        self.halves = SampleBuffer(capacity: rounds)
    }

    /// Thread A got the ball back (or starts the rally): record the round, then serve again or finish.
    func hit() {
        let now = System.now
        if self.sentAt != 0 {
            self.halves.record((now &- self.sentAt) / 2)
            self.remaining -= 1
        }
        guard self.remaining > 0 else {
            self.done.signal()
            return
        }
        self.sentAt = System.now
        self.serve()
    }
}
