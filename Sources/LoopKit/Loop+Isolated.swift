/// The loop's API for code on its own thread, which takes closures that are not `@Sendable`.
///
/// Everywhere else, a closure handed to a loop is `@Sendable`: items and blocks may be created, added and signalled
/// from any thread, so the compiler checks what their closures capture. Code that already runs on the loop's thread
/// (a callback, a block, the thread that runs the loop) can use `loop.assumeIsolated()` instead, and give the view to
/// an item's initializer (`on:`): the closure may then capture non-`Sendable` state, and the initializer and each call
/// check at run time that they happen on that loop's thread (a trap naming the call otherwise, in every build) — an
/// item made this way and added to another loop traps at its first callout instead of racing.
///
/// Such a closure is let go of on the loop's thread too, so that what it captures is freed where it lived. An item's
/// `invalidate()` (or its last release) on another thread therefore does not free the closure before it returns, as it
/// does for a `@Sendable` one: it hands the closure to the loop, which lets go of it at its next pass; if the loop has
/// ended, it is let go of at once, where the call is made.
extension Loop {
    /// A view of the loop for code on its thread: it takes closures that are not `@Sendable`, since they never leave
    /// the thread (SwiftNIO's `assumeIsolated()`). Not `Sendable`: it cannot be handed to another thread.
    public struct Isolated {
        /// The loop. Any thread.
        public let loop: Loop

        fileprivate init(_ loop: Loop) {
            self.loop = loop
        }

        /// The loop, for `call` (an initializer that takes the view): traps unless on the loop's thread. The view is
        /// not `Sendable`, but Swift's region checks let one that is used no more move into a `Task`; an item made
        /// there with closures that capture that task's state would race with the loop.
        func loop(checkingFor call: StaticString) -> Loop {
            self.loop.preconditionIsCurrent(call)
            return self.loop
        }

        /// Queues `block` to run on the loop's thread at the next drain point of one of `modes`, as
        /// `Loop.perform(inModes:_:)`; `block` may capture non-`Sendable` state. Loop thread.
        public func perform(inModes modes: [LoopMode] = [.default], _ block: @escaping () -> Void) {
            self.loop.preconditionIsCurrent("Loop.Isolated.perform(inModes:_:)")
            let bound = LoopBound(block, loop: self.loop)
            self.loop.perform(inModes: modes, call: "Loop.Isolated.perform(inModes:_:)") { bound.value() }
        }

        /// Runs `task` once on the loop's thread after `delay`, as `Loop.schedule(after:inModes:_:)`; `task` may
        /// capture non-`Sendable` state. Loop thread.
        @discardableResult
        public func schedule(
            after delay: Duration,
            inModes modes: [LoopMode] = [.common],
            _ task: @escaping () -> Void
        ) -> LoopScheduledTask {
            let call: StaticString = "Loop.Isolated.schedule(after:inModes:_:)"
            self.loop.preconditionIsCurrent(call)
            let bound = LoopConfinedCallback(task, loop: self.loop,
                                             accessor: "Loop.Isolated.schedule(after:inModes:_:) task")
            return self.loop.schedule(at: self.loop.now + max(delay, .zero), inModes: modes, call: call) {
                bound.value()
            }
        }
    }

    /// This loop, for code that runs on its thread and hands it closures that are not `@Sendable`.
    ///
    /// - Precondition: Called on the loop's thread (checked at run time, in every build).
    @available(*, noasync)
    public func assumeIsolated() -> Isolated {
        self.preconditionIsCurrent("Loop.assumeIsolated()")
        return Isolated(self)
    }
}

@available(*, unavailable, message: "Loop.Isolated is confined to its loop's thread")
extension Loop.Isolated: Sendable {}

extension LoopTimer {
    /// As `init(interval:repeats:tolerance:_:)`, for code on `isolated`'s loop thread: `callback` may capture
    /// non-`Sendable` state and runs only on that thread.
    ///
    /// - Precondition: As `init(interval:repeats:tolerance:_:)`; the timer is added to `isolated.loop` only.
    public convenience init(
        interval: Duration,
        repeats: Bool = false,
        tolerance: Duration = .zero,
        on isolated: Loop.Isolated,
        _ callback: @escaping (LoopTimer) -> Void
    ) {
        let loop = isolated.loop(checkingFor: "LoopTimer(interval:repeats:tolerance:on:_:)")
        let bound = LoopConfinedCallback(callback, loop: loop,
                                         accessor: "LoopTimer(…, on:) callback, added to another loop")
        self.init(interval: interval, repeats: repeats, tolerance: tolerance) { bound.value($0) }
    }

    /// As `init(fireAt:interval:repeats:tolerance:_:)`, for code on `isolated`'s loop thread: `callback` may capture
    /// non-`Sendable` state and runs only on that thread.
    ///
    /// - Precondition: As `init(fireAt:interval:repeats:tolerance:_:)`; the timer is added to `isolated.loop` only.
    public convenience init(
        fireAt fireDate: LoopInstant,
        interval: Duration = .zero,
        repeats: Bool = false,
        tolerance: Duration = .zero,
        on isolated: Loop.Isolated,
        _ callback: @escaping (LoopTimer) -> Void
    ) {
        let loop = isolated.loop(checkingFor: "LoopTimer(fireAt:interval:repeats:tolerance:on:_:)")
        let bound = LoopConfinedCallback(callback, loop: loop,
                                         accessor: "LoopTimer(…, on:) callback, added to another loop")
        self.init(fireAt: fireDate, interval: interval, repeats: repeats, tolerance: tolerance) { bound.value($0) }
    }
}

extension LoopDescriptorSource {
    /// As `init(descriptor:events:order:_:)`, for code on `isolated`'s loop thread: `handler` may capture
    /// non-`Sendable` state and runs only on that thread.
    ///
    /// - Precondition: As `init(descriptor:events:order:_:)`; the source is added to `isolated.loop` only.
    public convenience init(
        descriptor: CInt,
        events: DescriptorEvents,
        order: Int = 0,
        on isolated: Loop.Isolated,
        _ handler: @escaping (LoopDescriptorSource, DescriptorEvents) -> Void
    ) {
        let loop = isolated.loop(checkingFor: "LoopDescriptorSource(descriptor:events:order:on:_:)")
        let bound = LoopConfinedCallback(handler, loop: loop,
                                         accessor: "LoopDescriptorSource(…, on:) handler, added to another loop")
        self.init(descriptor: descriptor, events: events, order: order) { bound.value($0, $1) }
    }
}

extension LoopObserver {
    /// As `init(activities:repeats:order:_:)`, for code on `isolated`'s loop thread: `callback` may capture
    /// non-`Sendable` state and runs only on that thread.
    public convenience init(
        activities: LoopActivity,
        repeats: Bool = true,
        order: Int = 0,
        on isolated: Loop.Isolated,
        _ callback: @escaping (LoopObserver, LoopActivity) -> Void
    ) {
        let loop = isolated.loop(checkingFor: "LoopObserver(activities:repeats:order:on:_:)")
        let bound = LoopConfinedCallback(callback, loop: loop,
                                         accessor: "LoopObserver(…, on:) callback, added to another loop")
        self.init(activities: activities, repeats: repeats, order: order) { bound.value($0, $1) }
    }
}

extension LoopSource {
    /// As `init(order:onSchedule:onUnschedule:_:)`, for code on `isolated`'s loop thread: the callbacks may capture
    /// non-`Sendable` state and run only on that thread (`signal()` stays safe from any thread).
    public convenience init(
        order: Int = 0,
        on isolated: Loop.Isolated,
        onSchedule: ((LoopSource, LoopMode) -> Void)? = nil,
        onUnschedule: ((LoopSource, LoopMode) -> Void)? = nil,
        _ perform: @escaping (LoopSource) -> Void
    ) {
        let loop = isolated.loop(checkingFor: "LoopSource(order:on:onSchedule:onUnschedule:_:)")
        var scheduled: (@Sendable (LoopSource, LoopMode) -> Void)?
        if let onSchedule {
            let bound = LoopConfinedCallback(onSchedule, loop: loop,
                                             accessor: "LoopSource(…, on:) callback, added to another loop")
            scheduled = { bound.value($0, $1) }
        }
        var unscheduled: (@Sendable (LoopSource, LoopMode) -> Void)?
        if let onUnschedule {
            let bound = LoopConfinedCallback(onUnschedule, loop: loop,
                                             accessor: "LoopSource(…, on:) callback, added to another loop")
            unscheduled = { bound.value($0, $1) }
        }
        let bound = LoopConfinedCallback(perform, loop: loop,
                                         accessor: "LoopSource(…, on:) callback, added to another loop")
        self.init(order: order, onSchedule: scheduled, onUnschedule: unscheduled) { bound.value($0) }
    }
}

extension LoopSignalSource {
    /// As `init(signal:loop:modes:_:)` on `isolated`'s loop, for code on its thread: `handler` may capture
    /// non-`Sendable` state and runs only on that thread.
    ///
    /// - Throws: As `init(signal:loop:modes:_:)`.
    public convenience init(
        signal: CInt,
        on isolated: Loop.Isolated,
        modes: [LoopMode] = [.common],
        _ handler: @escaping (Int) -> Void
    ) throws(SystemCallError) {
        let loop = isolated.loop(checkingFor: "LoopSignalSource(signal:on:modes:_:)")
        loopPrecondition(!modes.isEmpty, "LoopSignalSource(signal:on:modes:_:): the list of modes is empty")
        let bound = LoopConfinedCallback(handler, loop: loop,
                                         accessor: "LoopSignalSource(…, on:) handler, added to another loop")
        try self.init(signal: signal, loop: loop, modes: modes) { bound.value($0) }
    }
}

extension LoopDisplayLink {
    /// As `init(display:preferredRate:_:)`, for code on `isolated`'s loop thread: `callback` may capture
    /// non-`Sendable` state and runs only on that thread.
    public convenience init(
        display: LoopDisplay = .default,
        preferredRate: Double = 0,
        on isolated: Loop.Isolated,
        _ callback: @escaping (LoopDisplayLink, DisplayFrame) -> Void
    ) {
        let loop = isolated.loop(checkingFor: "LoopDisplayLink(display:preferredRate:on:_:)")
        let bound = LoopConfinedCallback(callback, loop: loop,
                                         accessor: "LoopDisplayLink(…, on:) callback, added to another loop")
        self.init(display: display, preferredRate: preferredRate) { bound.value($0, $1) }
    }
}
