import LoopKit

/// An actor that the `actor` scenario calls: `work()` is the call measured, and `call(_:times:)` makes it from this
/// actor to another.
protocol CountingActor: Actor {
    /// What `work()` bumps.
    var count: Int { get set }
}

extension CountingActor {
    /// Bumps and returns the count: a call whose answer the caller must wait for, and that cannot be optimized away.
    func work() -> Int {
        self.count &+= 1
        return self.count
    }

    /// Awaits `callee.work()` `times` times from this actor, one call after the other; returns the nanoseconds taken.
    func call(_ callee: some CountingActor, times: Int) async -> UInt64 {
        let start = System.now
        var total = 0
        for _ in 0..<times {
            total &+= await callee.work()
        }
        let elapsed = System.now - start
        precondition(total != 0, "the calls were not made")
        return elapsed
    }
}

/// A default actor: it runs on the global concurrent executor, and a call from another default actor can switch
/// to it on the same thread.
actor DefaultCountingActor: CountingActor {
    var count = 0
}

/// An actor on a loop, as a user puts one there: its executor is `loop.executor`, asked for by each actor.
actor LoopCountingActor: CountingActor {
    let executor: LoopExecutor
    var count = 0

    init(loop: Loop) {
        self.executor = loop.executor
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
}

/// An actor whose executor is a serial DispatchQueue's, shared with the other actors given the same one.
actor QueueCountingActor: CountingActor {
    let executor: DispatchQueueExecutor
    var count = 0

    init(executor: DispatchQueueExecutor) {
        self.executor = executor
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
}
