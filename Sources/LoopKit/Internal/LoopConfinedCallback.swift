/// A callback handed to an item through the isolated view (`Loop.Isolated`), which may capture non-`Sendable` state:
/// it is called on its loop's thread only, and let go of there too.
///
/// An item lets go of its callbacks wherever `invalidate()` is called, or wherever its last reference is dropped; for
/// this callback, that release is handed to the loop, which lets go of it at its next pass (the hand-over wakes it),
/// so that a capture's deinit never runs on another thread. Once the loop has ended, nothing runs on its thread any
/// more, and the callback is let go of where it is.
// @unchecked Sendable: `bound` touches its value on its loop's thread only (each access checks), and this type never
// touches it elsewhere: its deinit only moves it to the loop.
final class LoopConfinedCallback<Callback>: @unchecked Sendable {
    private let bound: LoopBound<Callback>

    /// Binds `callback` to `loop`; `accessor` names the call in the message of a call from another thread.
    init(_ callback: Callback, loop: Loop, accessor: StaticString) {
        self.bound = LoopBound(callback, loop: loop, accessor: accessor)
    }

    /// The callback. Loop thread only (a trap naming the accessor otherwise).
    var value: Callback {
        self.bound.value
    }

    deinit {
        let loop = self.bound.loop
        guard !loop.isCurrent else { return }
        let bound = self.bound
        loop.post { _ in withExtendedLifetime(bound) {} }
    }
}
