import Foundation

/// `echo`: a TCP echo server under one closed-loop client: LoopKit's (`loop-demo echo`) beside one written with
/// Dispatch read and write sources, each with one and two server threads, each in a child process.
struct EchoScenario: Scenario {
    let name = "echo"
    let summary = "TCP echo, 50 connections × one 64-byte message in flight, and 1 MiB bulk: loop-demo vs Dispatch"

    static let threadCounts = [1, 2]
    static let messagesReport = "echo/messages"
    static let bulkReport = "echo/bulk"
    static let bulkBytes = 1 << 20
    static func loopKit(_ loops: Int) -> String { "LoopKit loop-demo echo, \(loops) loop\(loops == 1 ? "" : "s")" }
    static func dispatch(_ queues: Int) -> String { "Dispatch sources, \(queues) queue\(queues == 1 ? "" : "s")" }

    func run(_ context: BenchContext) -> [ScenarioReport] {
        // 2.4 s per server in short turns, so that a slow stretch of a shared machine falls on every server alike.
        let warmUp = context.duration(seconds: 0.4)
        let turn = context.duration(seconds: 0.4)
        let rounds = 6
        let bulkTransfers = context.samples(16, minimum: 4)
        let contenders = Self.startContenders()
        Self.reportProblems(of: contenders, context)
        let startProblems = contenders.map(\.problem)
        let payload = Self.bulkPayload()
        defer { payload.deallocate() }

        for contender in contenders {  // warm-up, discarded
            contender.exchangeMessages(for: warmUp, counted: false)
            for _ in 0..<2 { contender.transferBulk(UnsafeRawBufferPointer(payload), counted: false) }
        }
        // Turns in an order shuffled every round: a fixed rotation would give each server the same predecessor.
        var random = SplitMix64(seed: 64)
        for _ in 0..<rounds {
            for contender in contenders.shuffled(using: &random) {
                contender.exchangeMessages(for: turn, counted: true)
            }
        }
        for contender in contenders { contender.countServerThreads() }
        for _ in 0..<bulkTransfers {
            for contender in contenders.shuffled(using: &random) {
                contender.transferBulk(UnsafeRawBufferPointer(payload), counted: true)
            }
        }
        // Every server is stopped and reaped here, failed ones included (those were stopped when they failed).
        for contender in contenders { contender.stop() }
        let failedDuringRun = zip(contenders, startProblems).filter { contender, before in contender.problem != before }
        Self.reportProblems(of: failedDuringRun.map { contender, _ in contender }, context)
        return [Self.messages(contenders, warmUp: warmUp, turn: turn, rounds: rounds),
                Self.bulk(contenders, transfers: bulkTransfers)]
    }

    /// Starts the four servers: LoopKit's `loop-demo`, found beside loop-bench, and loop-bench itself as the Dispatch
    /// server, each with one and two threads.
    static func startContenders() -> [EchoContender] {
        let bench = System.executablePath
        let demo = (((bench as NSString).deletingLastPathComponent) as NSString).appendingPathComponent("loop-demo")
        let demoArguments = { (loops: Int) in ["echo", "--port", "0", "--loops", String(loops)] }
        var contenders: [EchoContender] = []
        if FileManager.default.isExecutableFile(atPath: demo) {
            contenders += threadCounts.map {
                EchoContender(name: loopKit($0), path: demo, arguments: demoArguments($0))
            }
        } else {
            let reason = "loop-demo is not built beside loop-bench (no \(demo)); run `swift build -c release` first"
            contenders += threadCounts.map {
                EchoContender(name: loopKit($0), command: (["loop-demo"] + demoArguments($0)).joined(separator: " "),
                              notRun: reason)
            }
        }
        contenders += threadCounts.map {
            EchoContender(name: dispatch($0), path: bench, arguments: DispatchEchoServer.arguments(queues: $0))
        }
        return contenders
    }

    /// Prints, on the progress stream, the servers of `contenders` that are not run, once per reason.
    private static func reportProblems(of contenders: [EchoContender], _ context: BenchContext) {
        var reasons: [String] = []
        for problem in contenders.compactMap(\.problem) where !reasons.contains(problem) {
            reasons.append(problem)
        }
        for reason in reasons {
            let names = contenders.filter { $0.problem == reason }.map(\.name)
            context.progress("      echo: not run (\(names.joined(separator: "; "))): \(reason)")
        }
    }

    /// The bulk transfer's bytes: seeded noise, so that no misplaced chunk can pass for the right one.
    static func bulkPayload() -> UnsafeMutableRawBufferPointer {
        let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: bulkBytes, alignment: 16)
        var random = SplitMix64(seed: 1_048_576)
        for offset in stride(from: 0, to: bulkBytes, by: 8) {
            payload.storeBytes(of: random.next(), toByteOffset: offset, as: UInt64.self)
        }
        return payload
    }

    /// The Dispatch server a LoopKit row is compared with: the one with as many threads.
    private static func peer(of implementation: String) -> String? {
        threadCounts.first { loopKit($0) == implementation }.map(dispatch)
    }

    /// The Dispatch server with as many threads as `contender` (a LoopKit server), if it ran.
    private static func runningPeer(of contender: EchoContender, in contenders: [EchoContender]) -> EchoContender? {
        guard let name = self.peer(of: contender.name) else { return nil }
        return contenders.first { $0.name == name && $0.isRunning }
    }

    // MARK: Reports

    private static func messages(_ contenders: [EchoContender], warmUp: UInt64, turn: UInt64, rounds: Int)
        -> ScenarioReport {
        var report = ScenarioReport(name: messagesReport, title: "round trip of a 64-byte message, 50 connections "
                                        + "with one in flight each (µs)", unit: .microseconds)
        report.plotsCDF = true
        for contender in contenders {
            guard contender.isRunning else {
                report.results.append(contender.notRunResult)
                continue
            }
            var result = ImplementationResult(implementation: contender.name,
                                              distribution: Distribution(nanoseconds: contender.roundTripTimes))
            result.figures.append(Figure(name: "msgs/s", value: contender.messagesPerSecond))
            if let peer = self.runningPeer(of: contender, in: contenders) {
                result.figures.append(Figure(name: "vs Dispatch",
                                             value: contender.messagesPerSecond / peer.messagesPerSecond))
            }
            if contender.roundTrips > 0 {
                result.figures.append(Figure(name: "server CPU µs/msg",
                                             value: Double(contender.serverCPUNanoseconds) / 1e3
                                                 / Double(contender.roundTrips)))
            }
            if let threads = contender.serverThreads {
                result.figures.append(Figure(name: "server threads", value: Double(threads)))
            }
            report.results.append(result)
        }
        let seconds = { (nanoseconds: UInt64) in Format.number(Double(nanoseconds) / 1e9) }
        report.notes = [
            "Client: loop-bench's main thread, one epoll set over \(EchoClient.connectionCount) connections to "
                + "127.0.0.1 (TCP_NODELAY), each keeping one \(EchoClient.messageSize)-byte message in flight: send "
                + "it, wait until all of it is back (compared with what was sent), record the round trip, send the "
                + "next. The same client code measures every server.",
            "Servers: child processes, all started together, each idle but in its turn. LoopKit: "
                + "`loop-demo echo --port 0 --loops K`. Dispatch: `loop-bench --echo-server-dispatch --queues K`, K "
                + "serial queues, a read and a write source per connection (one read per event, output queued while "
                + "the socket is full), connections dealt round-robin, accept on a read source on queue 0; "
                + "libdispatch waits in epoll on a manager thread of its own. 'server threads': every thread of the "
                + "process, idle ones included.",
            "Each server: a \(seconds(warmUp)) s warm-up turn (discarded), then \(rounds) turns of "
                + "\(seconds(turn)) s, the servers taking turns in an order shuffled every round; the messages in "
                + "flight at the end of a turn are awaited, not counted. 'msgs/s': round trips ÷ seconds measured. "
                + "'vs Dispatch': msgs/s ÷ the Dispatch server's with as many threads. 'server CPU µs/msg': the server "
                + "process's CPU time over its turns (user + system, all threads, in 10 ms ticks) ÷ round trips. "
                + "This machine has \(ProcessInfo.processInfo.activeProcessorCount) cores, shared by the client and "
                + "the server.",
        ]
        report.notes += self.problemNotes(contenders)
        return report
    }

    private static func bulk(_ contenders: [EchoContender], transfers: Int) -> ScenarioReport {
        var report = ScenarioReport(name: bulkReport, title: "1 MiB echoed on one connection (MB/s)",
                                    unit: .megabytesPerSecond)
        report.higherIsBetter = true
        for contender in contenders {
            guard contender.isRunning else {
                report.results.append(contender.notRunResult)
                continue
            }
            let rates = Distribution(contender.bulkRates)
            var result = ImplementationResult(implementation: contender.name, distribution: rates)
            if let peer = self.runningPeer(of: contender, in: contenders) {
                let peerRates = Distribution(peer.bulkRates)
                result.figures.append(Figure(name: "vs Dispatch", value: rates.p50 / peerRates.p50))
            }
            report.results.append(result)
        }
        report.notes = [
            "One more connection per server: the client sends 1 MiB (1,048,576 bytes) while reading the echo back "
                + "(the same epoll set) and compares every byte. Each sample is one transfer: 1 MiB ÷ (last byte "
                + "back − first send), in MB/s (10⁶ bytes a second). \(transfers) transfers per server after 2 "
                + "discarded, the servers taking turns in an order shuffled every round. The Dispatch server stops "
                + "reading while more than \(DispatchEchoConnection.pendingLimit / 1_024) KiB wait to be written. "
                + "'vs Dispatch': p50 ÷ the Dispatch server's p50 with as many threads.",
        ]
        return report
    }

    /// A note per server that was not run or failed, and how the servers that ran to the end exited after SIGTERM.
    static func problemNotes(_ contenders: [EchoContender]) -> [String] {
        var notes = contenders.compactMap { contender in
            contender.problem.map { "\(contender.name): \(contender.serverFailed ? "failed" : "not run"): \($0)." }
        }
        let finished = contenders.filter(\.isRunning)
        let failed = finished.filter { $0.ending != .exited(status: 0) }
        for contender in failed {
            notes.append("\(contender.name): `\(contender.command)` "
                         + "\(contender.ending.map(String.init(describing:)) ?? "was not stopped"); expected: exit 0 "
                         + "after SIGTERM.")
        }
        if failed.isEmpty, !finished.isEmpty {
            notes.append("Every server that ran exited 0 after SIGTERM.")
        }
        return notes
    }
}
