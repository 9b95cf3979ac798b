import Foundation
import LoopKit

/// `idle`: a loop with one far timer, left alone: CPU time and wake-ups (LoopKit must make none).
struct IdleScenario: Scenario {
    let name = "idle"
    let summary = "a loop with one far timer, idle 5 s: CPU time and wake-ups, LoopKit beside Foundation"

    static let loopKit = "LoopKit LoopThread"
    static let foundation = "Foundation RunLoop thread"

    func run(_ context: BenchContext) -> [ScenarioReport] {
        let duration = context.duration(seconds: 5)
        let loopThread = try! LoopThread(name: "bench-idle-lk")
        let loopIdentity = loopThread.identity()
        let loopTimer = LoopTimer(interval: .seconds(3600)) { _ in }
        loopThread.loop.add(loopTimer, forMode: .default)

        let foundationThread = FoundationLoopThread(name: "bench-idle-fdn")
        let foundationTimer = Timer(timeInterval: 3600, repeats: false) { _ in }
        foundationThread.add(foundationTimer)

        System.sleep(nanoseconds: 100_000_000)  // let both loops apply the additions and fall asleep
        let identities = [loopIdentity, foundationThread.identity]
        let cpuBefore = identities.map(\.cpuNanoseconds)
        let switchesBefore = identities.map(\.voluntarySwitches)
        let countersBefore = loopThread.loop.counters
        System.sleep(nanoseconds: duration)
        let cpu = zip(identities, cpuBefore).map { Double($0.cpuNanoseconds &- $1) / 1e6 }
        let switches = zip(identities, switchesBefore).map { Double($0.voluntarySwitches - $1) }
        let counters = loopThread.loop.counters.since(countersBefore)

        loopTimer.invalidate()
        loopThread.shutdownAndJoin()
        foundationTimer.invalidate()
        foundationThread.shutdown()

        var report = ScenarioReport(name: "idle", title: "an idle loop with one timer an hour away",
                                    unit: .figures)
        report.results = [
            ImplementationResult(implementation: Self.loopKit, distribution: nil, figures: [
                Figure(name: "seconds", value: Double(duration) / 1e9),
                Figure(name: "CPU ms", value: cpu[0]),
                Figure(name: "wake-ups", value: switches[0]),
                Figure(name: "loop waits", value: Double(counters.waits)),
            ]),
            ImplementationResult(implementation: Self.foundation, distribution: nil, figures: [
                Figure(name: "seconds", value: Double(duration) / 1e9),
                Figure(name: "CPU ms", value: cpu[1]),
                Figure(name: "wake-ups", value: switches[1]),
            ]),
        ]
        report.notes = [
            "'wake-ups': the thread's voluntary context switches over the window (/proc/self/task/TID/status), so "
                + "any periodic wake of any implementation shows; 'loop waits': LoopKit's own count of ppoll calls "
                + "(Loop.counters). CPU: the thread's kernel CPU clock.",
        ]
        return [report]
    }
}
