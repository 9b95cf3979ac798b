import CLoopBench
import CLoopKitSystem
import Foundation
import Synchronization

/// The operating system as the benchmark sees it: clocks, sleeps, thread identities, descriptors, counters.
///
/// Every call goes through the `CLoopBench` C target (the benchmark's `Platform/`), so the scenarios read as Swift.
enum System {
    /// CLOCK_MONOTONIC in nanoseconds: the clock LoopKit, Dispatch's uptime and the kernel's timers use.
    @inline(__always)
    static var now: UInt64 { cbench_now_ns() }

    /// Sleeps until the monotonic instant `deadline` (clock_nanosleep with TIMER_ABSTIME).
    static func sleep(until deadline: UInt64) {
        cbench_sleep_until_ns(deadline)
    }

    /// Sleeps for `nanoseconds`.
    static func sleep(nanoseconds: UInt64) {
        cbench_sleep_until_ns(cbench_now_ns() &+ nanoseconds)
    }

    /// Lowers the calling thread's timer slack, as `LoopThread` does for its threads (prctl PR_SET_TIMERSLACK).
    static func setTimerSlack(nanoseconds: UInt) {
        _ = cbench_set_timer_slack_ns(nanoseconds)
    }

    /// Tunes the calling thread as `LoopThread` tunes its own: 1 µs of timer slack and a 500 µs scheduler slice
    /// (EEVDF's custom slice; see `cloopkit_set_scheduler_slice`). Floors get it too, so that they stay floors.
    static func tuneLikeALoopThread() {
        _ = cloopkit_set_timer_slack(1_000)
        _ = cloopkit_set_scheduler_slice(500_000)
    }

    /// Gives the memory the allocator holds free back to the system (malloc_trim(3)), so that what is allocated next
    /// starts on fresh pages.
    static func releaseFreeMemory() {
        _ = cbench_release_free_memory()
    }

    /// Moves the calling thread to the real-time class (SCHED_FIFO); `false` where that is not permitted.
    static func setRealtimePriority() -> Bool {
        cbench_set_realtime(10) == 0
    }

    /// Keeps the calling thread on the highest-numbered processor it may use, so that threads compared with one another
    /// share a processor; `false` where the affinity cannot be set.
    @discardableResult
    static func pinToLastProcessor() -> Bool {
        cbench_pin_to_last_processor() >= 0
    }

    /// Whether threads can be pinned to one processor (checked on a throwaway thread).
    static let canPinToOneProcessor = succeedsOnAThrowawayThread(named: "bench-pin-check", System.pinToLastProcessor)

    /// Runs `check` on a thread made for it (so that what it changes about its thread goes with it) and returns
    /// its answer.
    private static func succeedsOnAThrowawayThread(
        named name: String, _ check: @escaping @Sendable () -> Bool
    ) -> Bool {
        let result = Handoff<Bool>()
        let thread = BenchThread(name: name) { ready in
            ready()
            result.put(check())
        }
        thread.join()
        return result.take()
    }

    /// The processor's model, as /proc/cpuinfo names it ("unknown" where it does not, as on most aarch64 systems).
    static let processorModel: String = {
        let info = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let line = info.split(separator: "\n").first { $0.hasPrefix("model name") }
        return line?.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
            ?? "unknown"
    }()

    /// The kernel's DAMON monitors that are running (`/sys/kernel/mm/damon/admin/kdamonds/N/state` reads "on"), by
    /// number. On the VMs these figures come from, one samples physical memory to page out cold file pages, and each
    /// sampling holds a processor for up to about 5 ms in a kernel built without preemption, where a woken thread
    /// waits it out: a timer whose thread wakes there is late by that much (RESULTS.md, 2026-12-07, "Why the 1 ms
    /// timers miss slots here").
    static var runningMemoryMonitors: [Int] {
        let directory = "/sys/kernel/mm/damon/admin/kdamonds"
        let read = { (name: String) in
            (try? String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let count = read("nr_kdamonds").flatMap { Int($0) } ?? 0
        return (0..<max(count, 0)).filter { read("\($0)/state") == "on" }
    }

    /// Whether this process may use the real-time class (checked on a throwaway thread).
    static let canUseRealtime = succeedsOnAThrowawayThread(named: "bench-rt-check", System.setRealtimePriority)

    /// The kernel release (uname -r).
    static var kernelRelease: String {
        var buffer = [CChar](repeating: 0, count: 256)
        cbench_kernel_release(&buffer, UInt(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether the counting malloc in `CLoopBench` is the process's allocator.
    static var allocationHookIsActive: Bool { cbench_alloc_hook_active() }

    /// Allocations made so far by the whole process.
    static var processAllocations: UInt64 { cbench_alloc_count_process() }

    /// The running executable's absolute path (the target of /proc/self/exe); the programs built beside it are found
    /// in its directory.
    static var executablePath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// Raises the descriptor limit so that the descriptor scenario can open a thousand eventfds.
    @discardableResult
    static func raiseDescriptorLimit(to wanted: Int) -> Int {
        Int(cbench_raise_descriptor_limit(wanted))
    }
}

/// A measured thread: its kernel id (for CPU time, context switches and system-call counters) and its allocation
/// counter. Captured on the thread itself (`current`), read from any thread while that thread lives.
struct ThreadIdentity: Sendable, Hashable {
    let tid: pid_t
    /// The address of the thread's counter in `CLoopBench`'s thread-local storage.
    private let allocationCounter: UInt

    /// The calling thread.
    static var current: ThreadIdentity {
        ThreadIdentity(tid: cbench_gettid(),
                       allocationCounter: UInt(bitPattern: cbench_alloc_counter_of_current_thread()))
    }

    /// Heap allocations the thread has made so far.
    var allocations: UInt64 {
        cbench_alloc_count_read(UnsafePointer(bitPattern: self.allocationCounter))
    }

    /// CPU time the thread has used so far, in nanoseconds.
    var cpuNanoseconds: UInt64 {
        UInt64(max(0, cbench_thread_cpu_ns(self.tid)))
    }

    /// How many times the thread has blocked (each sleep is one switch), from /proc: a count of wake-ups that works
    /// for any implementation, Foundation's and Dispatch's included.
    var voluntarySwitches: Int {
        guard let status = try? String(contentsOfFile: "/proc/self/task/\(self.tid)/status", encoding: .utf8) else {
            return -1
        }
        for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
            return Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? -1
        }
        return -1
    }
}

/// Counts one thread's entries into a kernel tracepoint (all system calls, or one call such as write), through
/// perf_event_open(2). Exact and independent of load; `nil` where the kernel or tracefs refuses.
final class SyscallCounter {
    private let descriptor: CInt

    /// - Parameters:
    ///   - thread: The thread to count.
    ///   - tracepoint: "raw_syscalls/sys_enter" for every call, "syscalls/sys_enter_write" for one.
    init?(thread: ThreadIdentity, tracepoint: String = "raw_syscalls/sys_enter") {
        let descriptor = cbench_tracepoint_counter_open(thread.tid, tracepoint)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit {
        _ = cbench_close(self.descriptor)
    }

    /// The count so far. Reading is itself a read(2); on the counted thread, subtract one per read.
    var value: Int64 {
        cbench_counter_read(self.descriptor)
    }

    /// Whether system calls can be counted here.
    static let isAvailable: Bool = SyscallCounter(thread: .current) != nil
}

/// A fixed-capacity buffer of samples written by one thread at a time and read after it is done; recording is a
/// store and an atomic increment, so it allocates nothing and costs nanoseconds.
// @unchecked Sendable: each slot is written once, before the releasing increment of `count` that publishes it, and
// read only after an acquiring load of `count` has seen it.
final class SampleBuffer: @unchecked Sendable {
    private let storage: UnsafeMutableBufferPointer<UInt64>
    private let written = Atomic<Int>(0)

    init(capacity: Int) {
        self.storage = .allocate(capacity: max(capacity, 1))
        self.storage.initialize(repeating: 0)
    }

    deinit {
        self.storage.deallocate()
    }

    var capacity: Int { self.storage.count }
    var count: Int { min(self.written.load(ordering: .acquiring), self.storage.count) }

    /// Appends `value`; past the capacity, the value is counted but dropped.
    @inline(__always)
    func record(_ value: UInt64) {
        let index = self.written.load(ordering: .relaxed)
        if index < self.storage.count {
            self.storage[index] = value
        }
        self.written.store(index + 1, ordering: .releasing)
    }

    /// How many values were recorded, dropped ones included.
    var recorded: Int { self.written.load(ordering: .acquiring) }

    var values: [UInt64] { Array(self.storage.prefix(self.count)) }

    func reset() {
        self.written.store(0, ordering: .releasing)
    }
}

/// A small, seeded pseudo-random generator (SplitMix64), so that every implementation sees the same gaps and
/// fire dates, run after run.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
