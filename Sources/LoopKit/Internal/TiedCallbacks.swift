/// An item's state that other threads reach: its tie to its loop and its user callbacks, under the item's one lock.
///
/// `invalidate()` takes the callbacks out on whatever thread calls it and lets go of them after the lock, so nothing
/// they capture outlives the invalidation, even while the loop's thread is busy or not running at all (the item
/// itself leaves its modes at the loop's next pass, which the invalidation wakes). CF lets go of a source's,
/// observer's or timer's context in its invalidate the same way. The loop takes a reference of its own for each call:
/// a callback that is running when another thread invalidates its item finishes with what it captured.
///
/// The one exception is a callback made on the isolated view (`on:`), wrapped in a `LoopConfinedCallback`: letting
/// go of the wrapper on another thread hands the callback to the loop, which lets go of it at its next pass, so its
/// captures, which may not be `Sendable`, are freed on the loop's thread.
///
/// `Callbacks` is a struct of the item's closures, never a bare function type: a function stored in a generic is kept
/// in its most general form, and each read converts it back through a thunk whose context is allocated (one `malloc`
/// per callout on the loop's thread).
struct TiedCallbacks<Callbacks> {
    var tie = LoopTie()
    /// `nil` once the item is invalidated.
    var callbacks: Callbacks?
}

extension LoopLock {
    /// The item's callbacks, with a reference of the caller's own; `nil` once taken. Any thread.
    @inline(__always)
    func callbacks<Callbacks>() -> Callbacks? where Value == TiedCallbacks<Callbacks> {
        self.withLock { $0.callbacks }
    }

    /// Takes the item's callbacks out, for the caller to let go of after the lock (a capture's deinit is user code).
    /// Any thread.
    func takeCallbacks<Callbacks>() -> Callbacks? where Value == TiedCallbacks<Callbacks> {
        self.withLock { state in
            defer { state.callbacks = nil }
            return state.callbacks
        }
    }
}
