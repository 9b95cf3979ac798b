#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem
import Synchronization
import Testing
@testable import LoopKit

/// Loops and loop threads by the ten thousand give back every descriptor and every byte of heap, and a million
/// passes keep resident memory flat. Each test runs in a process of its own, so that nothing else opens descriptors
/// or allocates meanwhile; the child prints its figures, and the test passes them on. `LOOPKIT_RESOURCE_SCALE` (a
/// fraction, 1 by default) shrinks the counts for CI's sanitizer runs, where each thread and pass costs far more.
@Suite("Resources", .serialized)
struct ResourceTests {
    /// `count` scaled by `LOOPKIT_RESOURCE_SCALE` (the echo server's bulk test uses it too).
    static func scaled(_ count: Int) -> Int {
        let scale = getenv("LOOPKIT_RESOURCE_SCALE").flatMap { Double(String(cString: $0)) } ?? 1
        return max(1, Int(Double(count) * min(max(scale, 0), 1)))
    }

    /// The process's heap in use, in bytes (glibc's `mallinfo2`), or `nil` where the allocator does not keep it: under
    /// AddressSanitizer, whose LeakSanitizer checks the heap its own way, and whose quarantine of freed blocks makes
    /// resident memory grow whatever the program does.
    static func heapInUse() -> Int? {
        let bytes = Int(cloopkit_heap_in_use())
        return bytes > 0 ? bytes : nil
    }

    /// How much the heap grew since `before` (0 where it is not kept).
    static func heapGrowth(since before: Int?) -> Int {
        guard let before, let now = Self.heapInUse() else { return 0 }
        return now - before
    }

    /// Writes `line` to standard error, where the parent test reads it.
    static func tell(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = write(2, &bytes, bytes.count)
    }

    /// The process's resident memory, in bytes (the second field of /proc/self/statm, in pages).
    static func residentBytes() -> Int {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        guard fgets(&line, Int32(line.count), file) != nil else { return 0 }
        let fields = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: " ")
        guard fields.count >= 2, let pages = Int(fields[1]) else { return 0 }
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }

    /// Runs `body` `count` times, `width` at a time, each on a thread of its own that ends with it.
    static func onShortLivedThreads(_ count: Int, width: Int = 8, _ body: @escaping @Sendable () -> Void) {
        var started = 0
        while started < count {
            let batch = min(width, count - started)
            let threads = (0..<batch).map { _ in startThread(body) }
            for thread in threads { thread.join() }
            started += batch
        }
    }

    /// What a child reports on standard error, for the test log.
    private static func report(_ result: ExitTest.Result?) {
        if let result {
            print(String(decoding: result.standardErrorContent, as: UTF8.self), terminator: "")
        }
    }

    @Test func tenThousandThreadLoopsGiveBackTheirDescriptorsAndHeap() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            /// A thread's loop, used and torn down with its thread.
            @Sendable func useTheThreadsLoop() {
                let loop = Loop.current
                let fired = Atomic<Bool>(false)
                loop.add(LoopTimer(interval: .zero) { _ in fired.store(true, ordering: .relaxed) }, forMode: .default)
                loop.perform {}
                _ = loop.run(mode: .default, before: loop.now + .seconds(10))
                precondition(fired.load(ordering: .relaxed), "the timer did not fire")
            }
            exit(ResourceTests.givesBackDescriptorsAndHeap("thread loops") { count in
                ResourceTests.onShortLivedThreads(count, useTheThreadsLoop)
            } ? 0 : 1)
        }
        Self.report(result)
    }

    @Test func tenThousandLoopThreadsGiveBackTheirDescriptorsAndHeap() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            @Sendable func startAndShutDown(_ count: Int) throws {
                for index in 0..<count {
                    let thread = try LoopThread(name: "resource-\(index % 10)")
                    let ran = Atomic<Bool>(false)
                    thread.perform { ran.store(true, ordering: .relaxed) }
                    thread.shutdownAndJoin()
                    precondition(ran.load(ordering: .relaxed), "a queued block did not run before the thread ended")
                }
            }
            exit(try ResourceTests.givesBackDescriptorsAndHeap("loop threads", startAndShutDown) ? 0 : 1)
        }
        Self.report(result)
    }

    @Test func aMillionPassesKeepResidentMemoryFlat() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            exit(try ResourceTests.passAMillionTimes() ? 0 : 1)
        }
        Self.report(result)
    }

    /// Runs `body` for 200 items (what the process sets up once is not counted), then for 10,000 (scaled), and says
    /// whether the process's descriptors and heap came back to where they were in between. A loop that kept one
    /// descriptor or 32 bytes would show 10,000 or 320,000.
    static func givesBackDescriptorsAndHeap(_ what: String, _ body: (Int) throws -> Void) rethrows -> Bool {
        try body(200)
        let descriptors = ReleaseTests.openDescriptorCount()
        let heap = Self.heapInUse()
        let count = Self.scaled(10_000)
        try body(count)
        let descriptorGrowth = ReleaseTests.openDescriptorCount() - descriptors
        let heapGrowth = Self.heapGrowth(since: heap)
        Self.tell("\(count) \(what): descriptors \(descriptorGrowth), heap \(heapGrowth) bytes")
        return descriptorGrowth <= 0 && heapGrowth < 320_000
    }

    /// Runs a loop through a million passes, each with a signalled source, a block and a due timer, and says whether
    /// resident memory and the heap stayed flat (one byte kept per pass would be a megabyte). The source signals itself
    /// again from its callback, so that one run makes every pass and none sleeps.
    static func passAMillionTimes() throws -> Bool {
        let loop = try Loop()
        defer { loop.invalidate() }
        let remaining = AtomicCounter()
        let source = LoopSource { source in
            remaining.add(-1)
            if remaining.current > 0 {
                source.signal()
                loop.perform {}
            } else {
                loop.stop()
            }
        }
        loop.add(source, forMode: .default)
        let timer = LoopTimer(fireAt: loop.now, interval: .nanoseconds(1), repeats: true) { _ in }
        loop.add(timer, forMode: .default)
        defer { timer.invalidate() }
        func pass(_ count: Int) {
            remaining.store(count)
            source.signal()
            _ = loop.run(mode: .default, before: .distantFuture)
        }
        pass(100_000)
        let resident = Self.residentBytes()
        let heap = Self.heapInUse()
        let clock = ContinuousClock()
        let began = clock.now
        let count = Self.scaled(1_000_000)
        pass(count)
        let elapsed = clock.now - began
        let residentGrowth = Self.residentBytes() - resident
        let heapGrowth = Self.heapGrowth(since: heap)
        Self.tell("\(count) passes in \(elapsed): resident \(residentGrowth) bytes, heap \(heapGrowth) bytes")
        // Resident memory says something only where the heap is malloc's own (see `heapInUse()`).
        return (heap == nil || residentGrowth < 1_000_000) && heapGrowth < 100_000
    }
}
