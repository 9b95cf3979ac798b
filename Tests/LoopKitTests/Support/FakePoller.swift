@testable import LoopKit

/// A clock that a `FakePoller` moves when the loop "sleeps": an ordinary (not manual) clock to the loop, so the
/// loop computes real timeouts and hands them to the poller.
final class SteppingClock: LoopClock {
    private let instant = LoopLock(LoopInstant(nanoseconds: 1_000_000_000))

    var now: LoopInstant { self.instant.withLock { $0 } }

    func advance(by nanoseconds: Int64) {
        self.instant.withLock { $0 = $0 + .nanoseconds(nanoseconds) }
    }
}

/// A poller that records the timeouts the loop asks for and "sleeps" by advancing a `SteppingClock`; scripted
/// waits can be interrupted (`EINTR`) after part of their time. Loop thread only.
final class FakePoller: Poller {
    /// A scripted wait: how much time passes, and what the wait returns (-1 for `EINTR`).
    struct Step {
        var elapsed: Int64
        var result: Int
    }

    let clock: SteppingClock
    private(set) var timeouts: [Int64] = []
    /// How many descriptors each wait was given.
    private(set) var descriptorCounts: [Int] = []
    var script: [Step] = []
    private var descriptors: [CInt] = []

    init(clock: SteppingClock) {
        self.clock = clock
    }

    var count: Int { self.descriptors.count }

    func reset() {
        self.descriptors.removeAll()
    }

    func append(_ descriptor: CInt, events: DescriptorEvents) {
        self.descriptors.append(descriptor)
    }

    func waitForEvents(timeoutNanoseconds: Int64) -> Int {
        self.timeouts.append(timeoutNanoseconds)
        self.descriptorCounts.append(self.descriptors.count)
        if !self.script.isEmpty {
            let step = self.script.removeFirst()
            self.clock.advance(by: step.elapsed)
            return step.result
        }
        precondition(timeoutNanoseconds >= 0, "FakePoller: the loop would sleep for ever")
        self.clock.advance(by: timeoutNanoseconds)
        return 0
    }

    func events(at index: Int) -> DescriptorEvents {
        []
    }
}
