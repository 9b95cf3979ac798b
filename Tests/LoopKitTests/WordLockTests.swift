import Testing
@testable import LoopKit

/// The timer's inline lock: exclusive under more threads than cores.
@Suite("Word lock")
struct WordLockTests {
    /// A counter that the lock alone keeps exact.
    // @unchecked Sendable: `count` is touched only under `lock`.
    private final class Counter: @unchecked Sendable {
        let lock = WordLock()
        var count = 0
    }

    @Test func eightThreadsOnTwoCoresCountEveryIncrement() {
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
}
