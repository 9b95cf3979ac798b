/// A clock that moves only when told to: virtual time for tests of timer semantics.
///
/// A loop on a manual clock never sleeps in real time while it waits for a time: when its next timer or its run
/// deadline is the only thing left to wait for, it checks its descriptors without blocking and then advances this
/// clock to that instant, as if it had slept. A test therefore runs hours of timers in microseconds, and a callback
/// that "works for 20 ms" advances the clock by 20 ms. With no timer and no deadline, the loop waits in real time
/// for a wake-up, as any loop does. `run(mode:before: clock.now)` makes exactly one non-blocking pass.
///
/// Several loops may share one manual clock; then each advances it for all of them. Any thread may read or
/// advance the clock.
public final class ManualLoopClock: VirtualLoopClock {
    private let instant: LoopLock<LoopInstant>

    /// A clock that starts at `start` (by default one second after the origin, so that `start - 1 s` exists).
    public init(start: LoopInstant = LoopInstant(nanoseconds: 1_000_000_000)) {
        self.instant = LoopLock(start)
    }

    public var now: LoopInstant {
        self.instant.withLock { $0 }
    }

    /// Moves the clock forward by `duration`.
    ///
    /// - Precondition: `duration` is not negative.
    public func advance(by duration: Duration) {
        loopPrecondition(duration >= .zero, "ManualLoopClock.advance(by:): the clock cannot go backwards (\(duration))")
        self.instant.withLock { $0 = $0 + duration }
    }

    /// Moves the clock forward to `instant`; an instant in the past leaves it unchanged.
    public func advance(to instant: LoopInstant) {
        self.instant.withLock { $0 = max($0, instant) }
    }
}
