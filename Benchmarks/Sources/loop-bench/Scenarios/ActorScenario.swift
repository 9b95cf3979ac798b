import LoopKit

/// `actor`: what one actor pays to call another and have its answer, by where the two actors run.
struct ActorScenario: Scenario {
    static let name = "actor"
    var name: String { Self.name }
    let summary = "ns per actor-to-actor call: default actors, two actors on one loop, one DispatchQueue executor"

    static let defaultActors = "two default actors"
    static let sameLoop = "two actors on one loop (loop.executor each)"
    static let sameLoopPreferred = "the same, task prefers the loop as executor"
    static let sameQueue = "two actors on one DispatchQueue executor"

    /// One row: how to make `calls` calls from one actor to the other, returning the nanoseconds they took.
    private struct Row {
        let name: String
        let measure: (_ calls: Int) -> UInt64
    }

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let calls = context.isQuick ? 2_000 : 20_000
        let samples = context.samples(15, minimum: 5)
        let thread = try! LoopThread(name: "bench-actor")
        let loopExecutor = thread.loop.executor
        let queueExecutor = DispatchQueueExecutor(label: "bench.actor.queue")
        let (defaultCaller, defaultCallee) = (DefaultCountingActor(), DefaultCountingActor())
        let (loopCaller, loopCallee) = (LoopCountingActor(loop: thread.loop), LoopCountingActor(loop: thread.loop))
        let (queueCaller, queueCallee) = (QueueCountingActor(executor: queueExecutor),
                                          QueueCountingActor(executor: queueExecutor))
        let rows = [
            Row(name: Self.defaultActors) { calls in
                Self.wait { await defaultCaller.call(defaultCallee, times: calls) }
            },
            Row(name: Self.sameLoop) { calls in Self.wait { await loopCaller.call(loopCallee, times: calls) } },
            Row(name: Self.sameLoopPreferred) { calls in
                Self.wait {
                    await withTaskExecutorPreference(loopExecutor) { await loopCaller.call(loopCallee, times: calls) }
                }
            },
            Row(name: Self.sameQueue) { calls in Self.wait { await queueCaller.call(queueCallee, times: calls) } },
        ]
        for row in rows {
            _ = row.measure(calls)  // warm-up, discarded
        }
        // In rotation, so that a slow stretch of a shared machine falls on every row alike.
        var nanoseconds = Array(repeating: [Double](), count: rows.count)
        for _ in 0..<samples {
            for (index, row) in rows.enumerated() {
                nanoseconds[index].append(Double(row.measure(calls)) / Double(calls))
            }
        }
        thread.shutdownAndJoin()

        var report = ScenarioReport(name: Self.name, title: "one actor awaiting another's method, per call",
                                    unit: .nanosecondsPerOperation)
        let baseline = Distribution(nanoseconds[0]).p50
        report.results = zip(rows, nanoseconds).map { row, samples in
            let distribution = Distribution(samples)
            return ImplementationResult(implementation: row.name, distribution: distribution,
                                        figures: [Figure(name: "vs default actors", value: distribution.p50 / baseline)])
        }
        report.notes = [
            "Each sample: actor A awaits `b.work()` (bump a counter, return it) \(calls) times in a loop, from a task "
                + "started for the sample; ns per call = the loop's time ÷ \(calls). \(samples) samples per row, "
                + "the rows in rotation, after a warm-up sample each; p50 is the median sample.",
            "Loop rows: both actors' `unownedExecutor` is `executor.asUnownedSerialExecutor()` with `let executor = "
                + "loop.executor`, each actor asking for its own, on one LoopThread; the second row runs the task "
                + "inside `withTaskExecutorPreference(loop.executor)`. A hop between executors the runtime does not "
                + "know to be the same is a job enqueued on the callee's, and another back.",
            "Queue row: Dispatch on Linux has no DispatchSerialQueue (its queues are not executors here), so both "
                + "actors share one small SerialExecutor that runs jobs with `async` on a serial DispatchQueue "
                + "(DispatchQueueExecutor): one executor, as one DispatchSerialQueue would be.",
        ]
        return [report]
    }

    /// Runs `operation` in a task and blocks this (non-pool) thread until it returns.
    private static func wait<T: Sendable>(_ operation: @escaping @Sendable () async -> T) -> T {
        let result = Handoff<T>()
        Task { result.put(await operation()) }
        return result.take()
    }
}
