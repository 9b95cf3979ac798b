/// A value that only its loop's thread may touch, which can itself be handed to any thread (SwiftNIO's
/// `NIOLoopBound`).
///
/// Wrap non-`Sendable` state that a loop's callbacks share, create the wrapper on the loop's thread, and capture the
/// wrapper in the `@Sendable` closures you hand to the loop from elsewhere: the compiler accepts it, and every access
/// checks at run time that it happens on the loop's thread (a trap naming the call otherwise, in every build).
///
/// ```swift
/// loop.perform {
///     let buffer = LoopBound(Buffer(), loop: loop)     // on the loop's thread
///     otherThread.async { loop.perform { buffer.value.append(1) } }
/// }
/// ```
// @unchecked Sendable: `storage` is only read or written on `loop`'s thread, which every accessor checks first.
public struct LoopBound<Value>: @unchecked Sendable {
    /// The loop whose thread may touch the value. Any thread.
    public let loop: Loop
    private var storage: Value

    /// Binds `value` to `loop`.
    ///
    /// - Precondition: Called on `loop`'s thread.
    public init(_ value: Value, loop: Loop) {
        loop.preconditionIsCurrent("LoopBound(_:loop:)")
        self.loop = loop
        self.storage = value
    }

    /// The value. Loop thread only.
    ///
    /// - Precondition: Called on `loop`'s thread.
    public var value: Value {
        get {
            self.loop.preconditionIsCurrent("LoopBound.value")
            return self.storage
        }
        set {
            self.loop.preconditionIsCurrent("LoopBound.value")
            self.storage = newValue
        }
    }
}

/// A reference to a value that only its loop's thread may touch: `LoopBound` with reference semantics, so that
/// several closures share one mutable value.
// @unchecked Sendable: `storage` is only read or written on `loop`'s thread, which every accessor checks first.
public final class LoopBoundBox<Value>: @unchecked Sendable {
    /// The loop whose thread may touch the value. Any thread.
    public let loop: Loop
    private var storage: Value

    /// Binds `value` to `loop`.
    ///
    /// - Precondition: Called on `loop`'s thread.
    public init(_ value: Value, loop: Loop) {
        loop.preconditionIsCurrent("LoopBoundBox(_:loop:)")
        self.loop = loop
        self.storage = value
    }

    /// The value. Loop thread only.
    ///
    /// - Precondition: Called on `loop`'s thread.
    public var value: Value {
        get {
            self.loop.preconditionIsCurrent("LoopBoundBox.value")
            return self.storage
        }
        set {
            self.loop.preconditionIsCurrent("LoopBoundBox.value")
            self.storage = newValue
        }
    }
}

extension Loop {
    /// A view of the loop for code on its thread: it takes closures that are not `@Sendable`, since they never leave
    /// the thread (SwiftNIO's `assumeIsolated()`). Not `Sendable`: it cannot be handed to another thread.
    public struct Isolated {
        /// The loop. Any thread.
        public let loop: Loop

        fileprivate init(_ loop: Loop) {
            self.loop = loop
        }

        /// Queues `block` to run on the loop's thread at the next drain point of one of `modes`, as
        /// `Loop.perform(inModes:_:)`; `block` may capture non-`Sendable` state. Loop thread.
        public func perform(inModes modes: [LoopMode] = [.default], _ block: @escaping () -> Void) {
            self.loop.preconditionIsCurrent("Loop.Isolated.perform(inModes:_:)")
            let bound = LoopBound(block, loop: self.loop)
            self.loop.perform(inModes: modes) { bound.value() }
        }

        /// Runs `task` once on the loop's thread after `delay`, as `Loop.schedule(after:inModes:_:)`; `task` may
        /// capture non-`Sendable` state. Loop thread.
        @discardableResult
        public func schedule(
            after delay: Duration,
            inModes modes: [LoopMode] = [.common],
            _ task: @escaping () -> Void
        ) -> LoopScheduledTask {
            self.loop.preconditionIsCurrent("Loop.Isolated.schedule(after:inModes:_:)")
            let bound = LoopBound(task, loop: self.loop)
            return self.loop.schedule(after: delay, inModes: modes) { bound.value() }
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
