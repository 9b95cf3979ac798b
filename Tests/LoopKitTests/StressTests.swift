#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

/// Many threads doing random cross-thread operations on a few running loops, then checking that nothing was lost
/// (`StressHarness`). Seeded: a failure prints its seed, and `LOOPKIT_STRESS_SEED=<seed>` replays it (the threads'
/// interleaving differs from run to run, so a replay retries the same operations, not the same schedule).
/// `LOOPKIT_STRESS_SECONDS` sets how long the workers run (`defaultSeconds` unless set; CI's sanitizer runs shorten
/// it).
@Suite("Stress", .serialized)
struct StressTests {
    /// 5 s in a debug build; 15 s in an optimized one, the only build in which the optimizer's own reorderings can
    /// show: it once moved a retain past a lock's release, a use-after-free that 15 s of this stress found in about
    /// half the runs and 5 s in few.
    #if DEBUG
    static let defaultSeconds = 5.0
    #else
    static let defaultSeconds = 15.0
    #endif

    private static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    @Test func eightThreadsOnThreeLoopsLoseNoBlockSignalTimerFireStopOrShutdown() throws {
        let seed = Self.environment("LOOPKIT_STRESS_SEED").flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        let seconds = Self.environment("LOOPKIT_STRESS_SECONDS").flatMap { Double($0) } ?? Self.defaultSeconds
        let harness = try StressHarness(seed: seed, duration: .milliseconds(Int64(seconds * 1000)), loops: 3,
                                        workers: 8)
        let report = harness.run()
        print(report)
        #expect(report.operations > 0)
        for failure in report.failures.prefix(20) {
            Issue.record("\(failure) (replay: LOOPKIT_STRESS_SEED=\(seed))")
        }
    }
}
