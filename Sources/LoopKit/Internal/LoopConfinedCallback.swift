/// A callback handed to an item through the isolated view (`Loop.Isolated`), which may capture non-`Sendable` state:
/// it is called on its loop's thread only, and let go of there too.
///
/// An item lets go of its callbacks wherever `invalidate()` is called, or wherever its last reference is dropped; for
/// this callback, that release is handed to the loop, which lets go of it at its next pass (the hand-over wakes it),
/// so that a capture's deinit never runs on another thread. Once the loop has ended, or is gone, nothing runs on its
/// thread any more, and the callback is let go of where it is. The loop is held weakly: a loop holds its items, and an
/// item made on the isolated view must not keep its loop alive (as `LoopBound` would).
// @unchecked Sendable: `callback` is touched on its loop's thread only (each access checks), and never elsewhere: the
// deinit only moves it to the loop.
final class LoopConfinedCallback<Callback>: @unchecked Sendable {
    private weak var loop: Loop?
    private let callback: Callback
    /// What a call from another thread names in its trap.
    private let accessor: StaticString

    /// Binds `callback` to `loop`. On `loop`'s thread (where alone its isolated view exists).
    init(_ callback: Callback, loop: Loop, accessor: StaticString) {
        self.loop = loop
        self.callback = callback
        self.accessor = accessor
    }

    /// The callback. Loop thread only (a trap naming the accessor otherwise).
    var value: Callback {
        loopPrecondition(self.loop?.isCurrent == true, "\(self.accessor) must be called on the loop's own thread")
        return self.callback
    }

    deinit {
        self.loop?.letGoOnItsThread(self.callback)
    }
}
