import CLoopKitSystem
import Testing
@testable import LoopKit

/// The timer's inline lock: exclusive under more threads than cores, and inside the timer's one heap block.
@Suite("Word lock", .serialized, .timeLimit(.minutes(1)))
struct WordLockTests {
    /// A counter that the lock alone keeps exact.
    // @unchecked Sendable: `count` is touched only under `lock`.
    private final class Counter: @unchecked Sendable {
        let lock = WordLock()
        var count = 0
    }

    @Test func eightThreadsCountEveryIncrement() {
        let counter = Counter()
        let threads = (0..<8).map { _ in
            startThread {
                for _ in 0..<20_000 {
                    counter.lock.withLock { counter.count += 1 }
                }
            }
        }
        for thread in threads { thread.join() }
        #expect(counter.lock.withLock { counter.count } == 8 * 20_000)
    }

    @Test func aTimerIsOneHeapBlockNoLargerThanTheFireLoopPrefetches() {
        // The smallest of several: glibc may hand one allocation a free block a little larger than asked for (a
        // remainder too small to split off), depending on what the tests running beside this one freed.
        let timers = (0..<16).map { _ in LoopTimer(interval: .seconds(1)) { _ in } }
        let bytes = timers.map { cloopkit_allocation_size(Unmanaged.passUnretained($0).toOpaque()) }.min()!
        guard bytes >= 0 else { return }  // a C library without malloc_usable_size: nothing to check
        #expect(bytes <= LoopTimer.instanceBytes,
                "a LoopTimer takes \(bytes) bytes: raise LoopTimer.instanceBytes, which the fire loop prefetches")
    }
}
