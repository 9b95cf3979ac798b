import Synchronization

/// A callback at chosen moments of a loop's run (its activities), while the loop runs a mode the observer is in.
///
/// Observers do not keep a mode alive. Lower `order` is called first; an observer is never re-entered (a nested run
/// inside its callback does not call it). A one-shot observer (`repeats: false`) is invalidated after its first call.
///
/// An observer may be created on any thread. `invalidate()` and `isValid` are safe from any thread; the callback runs
/// on the loop's thread. An observer belongs to one loop.
// @unchecked Sendable: the `// MARK: Loop thread only` state is touched only on the loop's thread; cross-thread state
// is atomic or under `shared`'s lock.
public final class LoopObserver: @unchecked Sendable {
    /// The activities the observer is called for.
    public let activities: LoopActivity
    /// Whether the observer stays valid after its first call.
    public let repeats: Bool
    /// Sorts observers: lower first.
    public let order: Int

    private let valid = Atomic<Bool>(true)
    /// The loop the item belongs to (`LoopItem.withTie`), and the callback, let go of at `invalidate()`.
    private let shared: LoopLock<TiedCallbacks<Callback>>

    /// The callback, in a struct: see `TiedCallbacks`.
    private struct Callback {
        let call: (LoopObserver, LoopActivity) -> Void
    }

    // MARK: Loop thread only
    var modes: ModeSet = []
    var sequence: UInt64 = 0
    private var isCalling = false
    /// Set for the observers of LoopKit's own instruments (tracer, hitch monitor), which the tracer does not trace.
    var isInstrumentation = false

    /// An observer of `activities`.
    ///
    /// - Parameters:
    ///   - activities: Any set of activities, e.g. `[.beforeWaiting, .afterWaiting]` or `.allActivities`.
    ///   - repeats: `false` to be called once and then invalidated.
    ///   - order: Sorts observers: lower first.
    ///   - callback: Called on the loop's thread with the activity.
    public init(
        activities: LoopActivity,
        repeats: Bool = true,
        order: Int = 0,
        _ callback: @escaping @Sendable (LoopObserver, LoopActivity) -> Void
    ) {
        self.activities = activities
        self.repeats = repeats
        self.order = order
        self.shared = LoopLock(TiedCallbacks(callbacks: Callback(call: callback)))
    }

    /// Whether the observer can still be called. Any thread.
    public var isValid: Bool {
        self.valid.load(ordering: .acquiring)
    }

    /// Removes the observer from every mode for good, and lets go of its callback before returning. Any thread, its
    /// own callback included; twice does nothing.
    public func invalidate() {
        guard self.valid.exchange(false, ordering: .acquiringAndReleasing) else { return }
        _ = self.shared.takeCallbacks()  // let go of here, after the lock
        self.boundLoop?.detachEverywhere(self)
    }

    // MARK: Used by the loop (loop thread)

    /// Calls the observer for `activity` unless it is already running (no re-entry).
    func notify(_ activity: LoopActivity) {
        guard !self.isCalling, let callback = self.shared.callbacks() else { return }
        self.isCalling = true
        callback.call(self, activity)
        self.isCalling = false
        if !self.repeats {
            self.invalidate()
        }
    }
}

extension LoopObserver: LoopItem {
    static var kind: String { "LoopObserver" }

    func withTie<Result>(_ body: (inout LoopTie) -> Result) -> Result {
        self.shared.withLock { body(&$0.tie) }
    }

    func attach(to items: ModeItems, loop: Loop) {
        ModeItems.insertSorted(self, into: &items.observers) { ($0.order, $0.sequence) }
    }

    func detach(from items: ModeItems, loop: Loop) {
        ModeItems.removeSorted(self, from: &items.observers) { ($0.order, $0.sequence) }
    }
}
