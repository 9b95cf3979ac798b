@testable import LoopKit

/// A capture that says when it is freed: captured by a callback, it tells when the callback (and what it captured)
/// was let go of.
final class DeinitProbe: Sendable {
    let onDeinit: @Sendable () -> Void

    init(_ onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit {
        self.onDeinit()
    }
}

/// A counter closures on any thread can share.
final class SharedCounter: Sendable {
    private let count = LoopLock(0)

    @discardableResult
    func increment() -> Int {
        self.count.withLock { $0 += 1; return $0 }
    }

    func decrement() {
        self.count.withLock { $0 -= 1 }
    }

    var value: Int {
        self.count.withLock { $0 }
    }
}

/// Whole milliseconds from `start` to `instant`.
func elapsedMilliseconds(_ instant: LoopInstant, since start: LoopInstant) -> Int {
    Int((instant - start) / .milliseconds(1))
}
