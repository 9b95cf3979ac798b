import CLoopBench
import Synchronization

/// Measures one-way wake-up latency: a producer stamps the time and hands work to a sleeping thread; the callback,
/// when it starts, records how long that took.
///
/// All targets of a scenario are measured in one interleaved sequence of rounds (each target once per round, in an
/// order shuffled every round), so that a burst of noise from the machine's other tenants, and whatever ran just before
/// a wake-up, lands on every implementation alike: a fixed rotation gives each target the same predecessor every time.
/// Only one hand-over is in flight at a time, and before each one the producer sleeps a random 100–300 µs after the
/// previous callback has run, so the receiving thread is asleep every time. The gaps come from a seeded generator:
/// every run sees the same ones.
final class WakeupProbe: Sendable {
    private let sentAt = Atomic<UInt64>(0)
    private let arrivals = Atomic<Int>(0)
    private let senderCPU = Atomic<Int>(-1)
    private let arrivalsOnSenderCPU = Atomic<Int>(0)
    let latencies: SampleBuffer

    init(capacity: Int) {
        self.latencies = SampleBuffer(capacity: capacity)
    }

    /// Stamps the hand-over; call right before handing over the work.
    @inline(__always)
    func stampSend() {
        self.senderCPU.store(Int(cbench_current_cpu()), ordering: .relaxed)
        self.sentAt.store(System.now, ordering: .releasing)
    }

    /// Records the latency; call first thing in the callback.
    @inline(__always)
    func arrive() {
        let now = System.now
        let sent = self.sentAt.load(ordering: .acquiring)
        self.latencies.record(now &- sent)
        if Int(cbench_current_cpu()) == self.senderCPU.load(ordering: .relaxed) {
            self.arrivalsOnSenderCPU.wrappingAdd(1, ordering: .relaxed)
        }
        self.arrivals.wrappingAdd(1, ordering: .releasing)
    }

    var arrived: Int { self.arrivals.load(ordering: .acquiring) }

    /// The share of arrivals whose callback ran on the CPU the producer sent from, in percent. On a VM whose kernel
    /// packs woken threads onto busy virtual CPUs, this is near 100: every wake-up then waits for the producer to
    /// leave the CPU.
    var percentOnSenderCPU: Double {
        let arrived = self.arrived
        return arrived == 0 ? 0 : Double(self.arrivalsOnSenderCPU.load(ordering: .relaxed)) * 100 / Double(arrived)
    }

    func reset() {
        self.latencies.reset()
        self.arrivals.store(0, ordering: .releasing)
        self.arrivalsOnSenderCPU.store(0, ordering: .releasing)
    }
}

/// One implementation under a wake-up test.
struct WakeupTarget {
    let name: String
    let probe: WakeupProbe
    /// The thread the callback runs on; `nil` for Dispatch's pool, where it varies.
    let consumer: ThreadIdentity?
    /// Hands work to the sleeping thread; the work calls `probe.arrive()` first thing.
    let send: () -> Void
    /// Stops the thread and releases what the target holds.
    let shutdown: () -> Void
}

enum WakeupHarness {
    /// The gap before each hand-over, after the previous callback ran.
    static let gapNanoseconds: ClosedRange<UInt64> = 100_000...300_000

    /// Sends `rounds` samples to every target, interleaved, and returns the latencies in nanoseconds per target.
    ///
    /// A first round of `warmUpRounds` per target is measured the same way and discarded (caches, lazily created
    /// threads, page faults).
    static func measure(_ targets: [WakeupTarget], rounds: Int, warmUpRounds: Int, seed: UInt64 = 42)
        -> [[UInt64]] {
        var random = SplitMix64(seed: seed)
        for pass in [warmUpRounds, rounds] {
            for target in targets { target.probe.reset() }
            var order = Array(targets.indices)
            for _ in 0..<pass {
                order.shuffle(using: &random)  // a fixed rotation would give each target the same predecessor
                for target in order.map({ targets[$0] }) {
                    let expected = target.probe.arrived + 1
                    System.sleep(nanoseconds: UInt64.random(in: gapNanoseconds, using: &random))
                    target.probe.stampSend()
                    target.send()
                    waitForArrival(of: target.probe, count: expected)
                }
            }
        }
        return targets.map { $0.probe.latencies.values }
    }

    /// Waits until `probe` has seen `count` arrivals, polling a few times and then sleeping in 10 µs steps, so that
    /// the producer leaves the CPU to the woken thread (the machine may have only two cores).
    private static func waitForArrival(of probe: WakeupProbe, count: Int) {
        var polls = 0
        while probe.arrived < count {
            polls += 1
            if polls > 20 {
                System.sleep(nanoseconds: 10_000)
            }
        }
    }
}
