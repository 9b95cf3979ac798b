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
///
/// The value is a value: it is let go of wherever its last copy is dropped, which may be another thread. State whose
/// deinit must run on the loop's thread belongs in a `LoopBoundBox`, which hands its value to the loop to let go of.
// @unchecked Sendable: `storage` is only read or written on `loop`'s thread, which every accessor checks first.
public struct LoopBound<Value>: @unchecked Sendable {
    /// The loop whose thread may touch the value. Any thread.
    public let loop: Loop
    private var storage: Value
    /// What a trap names: `LoopBound.value`, or the item callback that LoopKit keeps in a bound value.
    private let accessor: StaticString

    /// Binds `value` to `loop`.
    ///
    /// - Precondition: Called on `loop`'s thread.
    public init(_ value: Value, loop: Loop) {
        self.init(value, loop: loop, accessor: "LoopBound.value")
    }

    /// Binds `value` to `loop`; a touch off the loop's thread traps naming `accessor`.
    init(_ value: Value, loop: Loop, accessor: StaticString) {
        loop.preconditionIsCurrent("LoopBound(_:loop:)")
        self.loop = loop
        self.storage = value
        self.accessor = accessor
    }

    /// The value. Loop thread only. A change through it happens in place (`bound.value.append(x)` does not copy an
    /// array's storage).
    ///
    /// - Precondition: Called on `loop`'s thread.
    public var value: Value {
        get {
            self.loop.preconditionIsCurrent(self.accessor)
            return self.storage
        }
        _modify {
            self.loop.preconditionIsCurrent(self.accessor)
            yield &self.storage
        }
    }
}

/// A reference to a value that only its loop's thread may touch: `LoopBound` with reference semantics, so that
/// several closures share one mutable value.
///
/// The value is let go of on the loop's thread too: a box freed elsewhere hands its value to the loop, which lets go
/// of it at its next pass, so that a deinit that touches loop-confined state runs where that state lives. Once the
/// loop has ended, it takes nothing more, and the value is let go of where the box is freed. A loop that never makes
/// another pass (and is never invalidated) keeps what it was handed: should the value hold the loop, neither is
/// freed.
// @unchecked Sendable: `storage` is only read or written on `loop`'s thread, which every accessor checks first; the
// deinit only moves it to the loop.
public final class LoopBoundBox<Value>: @unchecked Sendable {
    /// The loop whose thread may touch the value. Any thread.
    public let loop: Loop
    private var storage: Value
    /// A change through `value` is under way: the value is lent out in place, and must not be read meanwhile.
    private var isBeingChanged = false

    /// Binds `value` to `loop`.
    ///
    /// - Precondition: Called on `loop`'s thread.
    public init(_ value: Value, loop: Loop) {
        loop.preconditionIsCurrent("LoopBoundBox(_:loop:)")
        self.loop = loop
        self.storage = value
    }

    /// The value. Loop thread only. A change through it happens in place, as `LoopBound.value`'s, so the box may not
    /// be read while the change is under way (`box.value.removeAll { $0 == box.value.first }` reads it inside one).
    ///
    /// - Precondition: Called on `loop`'s thread, and not from inside a change through `value`.
    public var value: Value {
        get {
            self.loop.preconditionIsCurrent("LoopBoundBox.value")
            loopPrecondition(!self.isBeingChanged, Self.readWhileChanged)
            return self.storage
        }
        _modify {
            self.loop.preconditionIsCurrent("LoopBoundBox.value")
            loopPrecondition(!self.isBeingChanged, Self.readWhileChanged)
            self.isBeingChanged = true
            defer { self.isBeingChanged = false }
            yield &self.storage
        }
    }

    deinit {
        self.loop.letGoOnItsThread(self.storage)
    }

    private static var readWhileChanged: String {
        "LoopBoundBox.value: used while a change through it is under way (the value is changed in place; read it first)"
    }
}
