import Synchronization

/// A source that calls back on its loop's thread after someone signals it (CF's version-0 source).
///
/// `signal()` is safe from any thread and wakes the loop. Several signals before the callback runs coalesce into one
/// call; the signalled flag is cleared just before the callback, so the callback may signal the source again (it then
/// runs again on the next pass). Among signalled sources of a pass, lower `order` runs first, then the first
/// signalled. A signal is kept until the source runs: if its loop is running another mode, the callback runs when
/// the loop next runs a mode the source is in.
///
/// A source may be created on any thread. `signal()`, `isSignalled`, `invalidate()` and `isValid` are safe from any
/// thread; the callbacks run on the loop's thread. A source belongs to one loop.
// @unchecked Sendable: the `// MARK: Loop thread only` state is touched only on the loop's thread; cross-thread state
// is atomic or under `shared`'s lock.
public final class LoopSource: @unchecked Sendable {
    /// Sorts signalled sources within a pass: lower first.
    public let order: Int

    private let signalled = Atomic<Bool>(false)
    private let valid = Atomic<Bool>(true)
    /// The loop the item belongs to (`LoopItem.withTie`), and the callbacks: `invalidate()` lets go of `perform` at
    /// once, and the loop of the other two once the source has left every mode (`onSchedule` too, so that a source
    /// that joins a mode as another thread invalidates it gets both calls, paired).
    private let shared: LoopLock<TiedCallbacks<Callbacks>>

    private struct Callbacks {
        var perform: ((LoopSource) -> Void)?
        var schedule: ((LoopSource, LoopMode) -> Void)?
        var cancel: ((LoopSource, LoopMode) -> Void)?
    }

    // MARK: Loop thread only
    // `@exclusivity(unchecked)`: read by every pass that runs the source, on the loop's thread only, never across a
    // callout (see the note in `Loop`).
    @exclusivity(unchecked) var modes: ModeSet = []
    var sequence: UInt64 = 0
    /// The ticket of the source's entry in its loop's `signalledCandidates` (or of its parked signal), 0 for none.
    @exclusivity(unchecked) var candidateTicket: UInt64 = 0
    /// Its signal has a ticket but no list holds it: it was in no mode (see `Loop.takeSignalledSources`).
    @exclusivity(unchecked) var isParked = false

    /// A signalled source.
    ///
    /// - Parameters:
    ///   - order: Sorts signalled sources within a pass: lower first.
    ///   - onSchedule: Called on the loop's thread each time the source joins a mode (CF's `schedule`).
    ///   - onUnschedule: Called on the loop's thread each time the source leaves a mode, removed or invalidated (CF's
    ///     `cancel`).
    ///   - perform: Called on the loop's thread once per batch of signals.
    public init(
        order: Int = 0,
        onSchedule: (@Sendable (LoopSource, LoopMode) -> Void)? = nil,
        onUnschedule: (@Sendable (LoopSource, LoopMode) -> Void)? = nil,
        _ perform: @escaping @Sendable (LoopSource) -> Void
    ) {
        self.order = order
        self.shared = LoopLock(TiedCallbacks(callbacks: Callbacks(perform: perform, schedule: onSchedule,
                                                                  cancel: onUnschedule)))
    }

    /// Marks the source as signalled and wakes its loop. Any thread.
    ///
    /// Signalling an invalidated source does nothing.
    public func signal() {
        guard self.isValid else { return }
        guard !self.signalled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.boundLoop?.sourceWasSignalled(self)
    }

    /// Whether the source has been signalled and its callback has not run since. Any thread.
    public var isSignalled: Bool {
        self.signalled.load(ordering: .acquiring)
    }

    /// Whether the source can still be signalled and run. Any thread.
    public var isValid: Bool {
        self.valid.load(ordering: .acquiring)
    }

    /// Removes the source from every mode of its loop for good. Any thread; doing it twice does nothing.
    ///
    /// `perform` (and what it captures) is let go of before this returns; `onSchedule` and `onUnschedule` once the
    /// loop has called `onUnschedule` for each mode the source leaves (at once on the loop's thread, at its next pass
    /// from another), or at once if the source belongs to no loop, or its loop has ended (once the loop's teardown,
    /// which calls `onUnschedule`, has let go of its items: a wait of a few microseconds at most, with no user code).
    public func invalidate() {
        guard self.valid.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let released = self.shared.withLock { shared in
            defer { shared.callbacks?.perform = nil }
            return shared.callbacks?.perform
        }
        withExtendedLifetime(released) {}  // let go of here, after the lock
        guard let loop = self.boundLoop else {
            _ = self.shared.takeCallbacks()  // no loop will call `onUnschedule`
            return
        }
        loop.forgetSignal(of: self)
        if !loop.detachEverywhere(self) {
            // Its loop has ended: its teardown takes the source out of its modes, and holds on to `onUnschedule` for
            // each. Let go of the callbacks only once it has, or the source would never hear it left.
            loop.waitUntilItemsAreLetGo()
            _ = self.shared.takeCallbacks()
        }
    }

    // MARK: Used by the loop (loop thread)

    /// Clears the signalled flag and runs the callback.
    func perform() {
        self.signalled.store(false, ordering: .releasing)
        self.shared.withLock { $0.callbacks?.perform }?(self)
    }
}

extension LoopSource: LoopItem {
    static var kind: String { "LoopSource" }

    /// A ticket or a parking spot among the old loop's candidates means nothing here, and a stale ticket would keep
    /// this loop from ever taking the source as a candidate (a signal from before the move, which `attach` keeps, and
    /// every later one, would be lost).
    func forgetPreviousLoop() {
        self.candidateTicket = 0
        self.isParked = false
    }

    func withTie<Result>(_ body: (inout LoopTie) -> Result) -> Result {
        self.shared.withLock { body(&$0.tie) }
    }

    func attach(to items: ModeItems, loop: Loop) {
        items.sources.append(self)
        if self.isSignalled {
            loop.sourceWasSignalled(self)  // signalled before it joined: keep the signal
        }
        self.shared.withLock { $0.callbacks?.schedule }?(self, items.mode)
    }

    func detach(from items: ModeItems, loop: Loop) {
        ModeItems.remove(self, from: &items.sources)
        if self.modes.isEmpty && self.isSignalled {
            loop.dropSpentCandidates()  // in no mode now: parked, held by no list, in its place for a later add
        }
        if let cancel = self.shared.withLock({ $0.callbacks?.cancel }) {
            let mode = items.mode
            loop.callOutUnlessTearingDown { cancel(self, mode) }
        }
    }

    func didLeaveEveryMode() {
        _ = self.shared.takeCallbacks()  // let go of here, after the lock
    }
}
