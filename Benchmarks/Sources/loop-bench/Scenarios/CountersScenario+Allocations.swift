import CLoopBench
import CoreFoundation
import Foundation
import LoopKit

extension CountersScenario {
    // MARK: Heap allocations per idle pass and per timer fire

    func allocations(_ context: BenchContext) -> ScenarioReport {
        var report = ScenarioReport(name: "counters/allocations", title: "heap allocations on the loop's thread",
                                    unit: .figures)
        guard System.allocationHookIsActive else {
            report.notes = ["Not measured: the counting malloc of CLoopBench did not take effect in this build."]
            return report
        }
        let passes = context.samples(5_000)
        let fires = context.samples(1_000)

        // LoopKit: a LoopThread with one far timer, woken with nothing to do; then a 1 ms repeating timer.
        let loopThread = try! LoopThread(name: "bench-alloc-lk")
        let loopIdentity = loopThread.identity()
        let far = LoopTimer(interval: .seconds(3600)) { _ in }
        loopThread.loop.add(far, forMode: .default)
        System.sleep(nanoseconds: 10_000_000)
        let waits = { loopThread.loop.counters.waits }
        _ = Self.idlePasses(count: passes / 10, identity: loopIdentity, passesSeen: waits) {  // warm-up
            loopThread.loop.wakeUp()
        }
        let loopIdle = Self.idlePasses(count: passes, identity: loopIdentity, passesSeen: waits) {
            loopThread.loop.wakeUp()
        }
        let loopFire = Self.timerFires(count: fires, identity: loopIdentity) { fired in
            let timer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in fired.hit() }
            loopThread.loop.add(timer, forMode: .default)
            return { timer.invalidate() }
        }
        let loopFrame = Self.timerFires(count: max(10, fires / 8), identity: loopIdentity) { fired in
            let link = LoopDisplayLink(preferredRate: 120) { _, _ in fired.hit() }
            loopThread.loop.add(link, forMode: .default)
            return { link.invalidate() }
        }
        let loopCallout = Self.descriptorCallouts(count: fires, identity: loopIdentity, loop: loopThread.loop)
        far.invalidate()
        loopThread.shutdownAndJoin()

        // Foundation: the same on a RunLoop thread, woken with CFRunLoopWakeUp.
        let foundationThread = FoundationLoopThread(name: "bench-alloc-fdn")
        let wake: () -> Void = { CFRunLoopWakeUp(foundationThread.cfRunLoop) }
        System.sleep(nanoseconds: 10_000_000)
        _ = Self.idlePasses(count: passes / 10, identity: foundationThread.identity, wake: wake)
        let foundationIdle = Self.idlePasses(count: passes, identity: foundationThread.identity, wake: wake)
        let foundationFire = Self.timerFires(count: fires, identity: foundationThread.identity) { fired in
            let timer = Timer(timeInterval: 0.001, repeats: true) { _ in fired.hit() }
            foundationThread.add(timer)
            return { timer.invalidate() }
        }
        foundationThread.shutdown()

        report.results = [
            ImplementationResult(implementation: "LoopKit LoopThread", distribution: nil, figures: [
                Figure(name: "per idle pass", value: loopIdle), Figure(name: "per timer fire", value: loopFire),
                Figure(name: "per display-link frame", value: loopFrame),
                Figure(name: "per descriptor callout", value: loopCallout),
            ]),
            ImplementationResult(implementation: "Foundation RunLoop thread", distribution: nil, figures: [
                Figure(name: "per idle pass", value: foundationIdle),
                Figure(name: "per timer fire", value: foundationFire),
            ]),
        ]
        report.notes = [
            "Counted, not estimated: loop-bench defines malloc, calloc, realloc, memalign, posix_memalign, "
                + "aligned_alloc and valloc itself (Benchmarks/Sources/CLoopBench/alloc_hook.c); the dynamic linker "
                + "binds every caller in the process to them, and each call bumps a per-thread counter, then "
                + "forwards to glibc's __libc_malloc family. Only the loop thread's counter is read.",
            "Idle pass: \(passes) wake-ups with nothing to do (wakeUp() / CFRunLoopWakeUp, 100–300 µs apart) of a "
                + "loop whose only item is a timer an hour away; allocations ÷ passes (LoopKit: the loop's count of "
                + "its waits, which must be at least half the wake-ups; Foundation: ÷ wake-ups). Timer fire: a 1 ms "
                + "repeating timer, \(fires) fires; allocations ÷ fires (the pass that fires it included).",
            "LoopKit only: a 120 Hz LoopDisplayLink, \(max(10, fires / 8)) frames; and a LoopDescriptorSource on a "
                + "pipe, whose handler reads one byte (the one that woke it), \(fires) times 100–300 µs apart; allocations ÷ "
                + "frames or callouts (their passes included). Foundation has neither on Linux.",
        ]
        return report
    }

    /// Wakes an idle loop `count` times, 100–300 µs apart so that it is asleep each time, and returns the
    /// allocations its thread made per pass: per wake-up, or, given `passesSeen` (a count the loop keeps of its
    /// waits, one per pass), per pass it made, which must be most of the wake-ups. Infinite when it made too few: a
    /// wake-up that brings no pass measures nothing, and must not pass for one that allocates nothing.
    static func idlePasses(count: Int, identity: ThreadIdentity, passesSeen: (() -> UInt64)? = nil,
                           wake: () -> Void) -> Double {
        var random = SplitMix64(seed: 11)
        let before = identity.allocations
        let passesBefore = passesSeen?()
        for _ in 0..<count {
            wake()
            System.sleep(nanoseconds: UInt64.random(in: WakeupHarness.gapNanoseconds, using: &random))
        }
        System.sleep(nanoseconds: 2_000_000)
        let allocations = Double(identity.allocations - before)
        guard let passesSeen, let passesBefore else { return allocations / Double(count) }
        let passes = passesSeen() - passesBefore
        return passes * 2 < UInt64(count) ? .infinity : allocations / Double(passes)
    }

    /// Writes a byte to a pipe `count` times, 100–300 µs apart, for a descriptor source of `loop` whose handler reads
    /// it; returns the loop thread's allocations per callout.
    static func descriptorCallouts(count: Int, identity: ThreadIdentity, loop: Loop) -> Double {
        var ends: [CInt] = [-1, -1]
        precondition(cbench_pipe(&ends) == 0, "pipe2 failed")
        defer { ends.forEach { _ = cbench_close($0) } }
        let fired = FireCounter(target: count, identity: identity)
        // One byte per callout: a loop held up past a gap finds two bytes, and must call out once for each (the
        // source stays readable), or the count would never be reached.
        let source = LoopDescriptorSource(descriptor: ends[0], events: .readable) { [readEnd = ends[0]] _, _ in
            _ = cbench_read_byte(readEnd)
            fired.hit()
        }
        loop.add(source, forMode: .default)
        var random = SplitMix64(seed: 13)
        for _ in 0..<count {
            _ = cbench_write_byte(ends[1])
            System.sleep(nanoseconds: UInt64.random(in: WakeupHarness.gapNanoseconds, using: &random))
        }
        fired.done.wait()
        source.invalidate()
        return fired.allocationsPerFire
    }

    /// Runs a repeating timer until it has fired `count` times; returns the thread's allocations per fire.
    static func timerFires(count: Int, identity: ThreadIdentity,
                           start: (FireCounter) -> () -> Void) -> Double {
        let fired = FireCounter(target: count, identity: identity)
        let stop = start(fired)
        fired.done.wait()
        stop()
        return fired.allocationsPerFire
    }
}

/// Counts a timer's fires on the loop's thread and reads the thread's allocation counter at the first and at the
/// `target`-th, so that exactly the fires in between (and their passes) are measured.
// @unchecked Sendable: the `var`s are touched only on the loop's thread, by the timer's callback, and read after
// `done` is signalled.
final class FireCounter: @unchecked Sendable {
    private var count = 0
    private let target: Int
    private let identity: ThreadIdentity
    private var first: UInt64 = 0
    private var last: UInt64 = 0
    let done = DispatchSemaphore(value: 0)

    init(target: Int, identity: ThreadIdentity) {
        self.target = target
        self.identity = identity
    }

    func hit() {
        self.count += 1
        if self.count == 1 { self.first = self.identity.allocations }
        if self.count == self.target {
            self.last = self.identity.allocations
            self.done.signal()
        }
    }

    var allocationsPerFire: Double {
        Double(self.last - self.first) / Double(max(1, self.target - 1))
    }
}
