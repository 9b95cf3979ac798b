import CLoopBench
import Foundation

/// `scale/echo`: one connection's 64-byte round trips through a server that also holds 0, 100, 1,000 or 10,000 idle
/// connections: LoopKit's `loop-demo echo` (one loop) beside a Dispatch server (one queue), each in a child process.
/// A server whose cost per pass grows with what it watches shows here; one whose cost follows what is ready does not.
struct ScaleEchoScenario: Scenario {
    let name = "scale/echo"
    let summary = "one connection's 64-byte round trip beside 0/100/1,000/10,000 idle ones: loop-demo vs Dispatch"

    static let idleCounts = [0, 100, 1_000, 10_000]
    static let loopKit = "LoopKit loop-demo echo, 1 loop"
    static let dispatch = "Dispatch sources, 1 queue"

    static func implementation(_ server: String, idle: Int) -> String {
        "\(server), \(Format.number(Double(idle))) idle"
    }

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let warmUp = context.duration(seconds: 0.3)
        let turn = context.duration(seconds: 0.2)
        let rounds = 10
        // Each server holds its idle connections, and a child process of their own the client's side of them
        // (`IdleConnectionHolder`): both inherit this process's limit.
        let limit = System.raiseDescriptorLimit(to: Self.idleCounts.max()! + 1_024)
        var report = ScenarioReport(name: "scale/echo", title: "round trip of a 64-byte message on one connection "
                                        + "beside n idle ones (µs)", unit: .microseconds)
        var measured: [(idle: Int, contenders: [EchoContender])] = []
        var random = SplitMix64(seed: 10_000)
        // The client, every server and their threads on one processor. Left to the scheduler, a server's thread woke
        // either on the client's processor or on the other one, and kept to it for the server's life: its p50 read
        // about 14.5 µs or 22 µs whatever n was, and 'vs 0 idle' compared the two placements, not the idle
        // connections (1.49× at 10,000 in one run of 2026-12-05 08:30). Children inherit the affinity.
        let pinned = cbench_pin_process_tree_begin() >= 0
        defer { if pinned { _ = cbench_pin_process_tree_end() } }
        for idle in Self.idleCounts {
            guard idle + 256 <= limit else {
                // Rows that say so, for every server: the verdicts at this n read NOT RUN, with the reason.
                let reason = "the descriptor limit is \(limit)"
                measured.append((idle, [Self.loopKit, Self.dispatch].map {
                    EchoContender(name: Self.implementation($0, idle: idle), command: $0, notRun: reason)
                }))
                continue
            }
            context.progress("      scale/echo: starting both servers with \(Format.number(Double(idle))) idle "
                                + "connections …")
            measured.append((idle, Self.startContenders(idle: idle)))
        }
        // Every server at every n at once, taking turns, so that a slow stretch of a shared machine falls on each n
        // alike: measured one n after the other, both servers' round trips once rose from 14 and 21 µs to 23 and
        // 32 µs between two n (2026-12-04), which read as a cost of idle connections.
        context.progress("      scale/echo: \(rounds) rounds of turns …")
        Self.measure(measured.flatMap(\.contenders), warmUp: warmUp, turn: turn, rounds: rounds, random: &random)
        report.results = Self.results(measured)
        report.notes += EchoScenario.problemNotes(measured.flatMap(\.contenders))
        report.notes.insert(contentsOf: [
            "Client: loop-bench's main thread, one connection to 127.0.0.1 (TCP_NODELAY) keeping one 64-byte message "
                + "in flight (send, wait until all of it is back, record the round trip, send the next); n more "
                + "connections, opened first and never used, held by a child process (`loop-bench "
                + "--hold-idle-connections n`) so that the client can keep every server's at once. Servers: child "
                + "processes, `loop-demo echo --port 0 --loops 1` and `loop-bench --echo-server-dispatch --queues 1`, "
                + "both holding every connection. "
                + (pinned ? "The client, both servers and the idle holders all run on one processor (the last), "
                    + "so that each server's thread wakes where the client is, at every n alike."
                    : "Not pinned: the affinity could not be set, so a server's placement may differ between n."),
            "Both servers at every n run together, each with its own idle connections: a "
                + "\(Format.number(Double(warmUp) / 1e9)) s warm-up turn each (discarded), then \(rounds) turns of "
                + "\(Format.number(Double(turn) / 1e9)) s each, in an order shuffled every round, so that a slow "
                + "stretch of the machine falls on every n alike. 'vs 0 idle': p50 ÷ the same server's p50 with no "
                + "idle connection. 'vs Dispatch': p50 ÷ the Dispatch server's p50 at the same n. 'server CPU "
                + "µs/rt': the server process's CPU time over its turns (user + system, in 10 ms ticks) ÷ round "
                + "trips; 'CPU vs 0 idle' compares it likewise.",
        ], at: 0)
        return [report]
    }

    /// A warm-up turn each (discarded), then `rounds` turns each, in an order shuffled every round; then stops them.
    private static func measure(_ contenders: [EchoContender], warmUp: UInt64, turn: UInt64, rounds: Int,
                                random: inout SplitMix64) {
        for contender in contenders {
            contender.exchangeMessages(for: warmUp, counted: false)
        }
        for _ in 0..<rounds {
            for contender in contenders.shuffled(using: &random) {
                contender.exchangeMessages(for: turn, counted: true)
            }
        }
        for contender in contenders { contender.stop() }
    }

    /// LoopKit's server and the Dispatch one, each with one active connection and `idle` idle ones.
    private static func startContenders(idle: Int) -> [EchoContender] {
        let bench = System.executablePath
        let demo = (((bench as NSString).deletingLastPathComponent) as NSString).appendingPathComponent("loop-demo")
        let loopKit = Self.implementation(Self.loopKit, idle: idle)
        var contenders: [EchoContender] = []
        if FileManager.default.isExecutableFile(atPath: demo) {
            contenders.append(EchoContender(name: loopKit, path: demo,
                                            arguments: ["echo", "--port", "0", "--loops", "1"],
                                            connections: 1, idleConnections: idle))
        } else {
            contenders.append(EchoContender(name: loopKit, command: "loop-demo echo --port 0 --loops 1",
                                            notRun: "loop-demo is not built beside loop-bench; run `swift build -c "
                                                + "release` first"))
        }
        contenders.append(EchoContender(name: Self.implementation(Self.dispatch, idle: idle), path: bench,
                                        arguments: DispatchEchoServer.arguments(queues: 1), connections: 1,
                                        idleConnections: idle))
        return contenders
    }

    /// A row per server and n: the round trips, the server's CPU per round trip, and the ratios against the same
    /// server with no idle connection and against Dispatch at the same n.
    private static func results(_ measured: [(idle: Int, contenders: [EchoContender])]) -> [ImplementationResult] {
        func cpuPerRoundTrip(_ contender: EchoContender) -> Double? {
            contender.roundTrips > 0
                ? Double(contender.serverCPUNanoseconds) / 1e3 / Double(contender.roundTrips) : nil
        }
        let baseline = measured.first { $0.idle == 0 }?.contenders ?? []
        var results: [ImplementationResult] = []
        for (_, contenders) in measured {
            for (index, contender) in contenders.enumerated() {
                guard contender.isRunning else {
                    results.append(contender.notRunResult)
                    continue
                }
                let distribution = Distribution(nanoseconds: contender.roundTripTimes)
                var result = ImplementationResult(implementation: contender.name, distribution: distribution)
                let cpu = cpuPerRoundTrip(contender)
                if let cpu {
                    result.figures.append(Figure(name: "server CPU µs/rt", value: cpu))
                }
                if index < baseline.count, baseline[index].isRunning {
                    let zero = Distribution(nanoseconds: baseline[index].roundTripTimes)
                    result.figures.append(Figure(name: "vs 0 idle", value: distribution.p50 / zero.p50))
                    if let cpu, let zeroCPU = cpuPerRoundTrip(baseline[index]) {
                        result.figures.append(Figure(name: "CPU vs 0 idle", value: cpu / zeroCPU))
                    }
                }
                if index == 0, contenders.count > 1, contenders[1].isRunning {
                    let peer = Distribution(nanoseconds: contenders[1].roundTripTimes)
                    result.figures.append(Figure(name: "vs Dispatch", value: distribution.p50 / peer.p50))
                }
                results.append(result)
            }
        }
        return results
    }
}
