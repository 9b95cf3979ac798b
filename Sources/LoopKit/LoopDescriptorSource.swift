import Synchronization

/// A source that calls back when a file descriptor is readable and/or writable (CF's version-1 source, for any
/// descriptor: pipes, sockets, eventfds, terminals).
///
/// The loop never reads or writes the descriptor: the handler does. It is level-triggered: while the condition
/// holds, the handler is called on every pass. All ready sources of the running mode are called in one pass, lower
/// `order` first. `error` and `hangUp` are always reported. A descriptor closed while its source is live is
/// reported once as `invalid`, after which the loop cancels the source (so it never spins on a dead descriptor); the
/// source cannot tell a closed descriptor whose number was reused by a new `open`, so cancel before closing.
///
/// A mode with many descriptor sources (16 or more) keeps them in an epoll set, so that a pass costs the same however
/// many are idle. There, as libuv and SwiftNIO ask, cancel a source before closing its descriptor: epoll forgets a
/// closed descriptor without a word, so a close without a cancel is found by looking: the loop looks at 16 of the
/// mode's descriptors every 32 waits, at all of them at the first wait of a run that begins a sweep cycle or more
/// after the last such look, and at all of them once the loop has been idle for 100 ms after it last woke (at most
/// once a second per mode: one wake-up after the loop's last work, none while it stays idle; on the system clock,
/// with epoll taking every descriptor of the mode). A descriptor closed under a live source is then reported
/// `invalid` within 2n passes or 100 ms to 1 s after the loop goes idle, never spun on; one closed from another
/// thread while the loop sleeps idle is found after the loop next wakes, the same way. One closed while a `dup` of it
/// lives on elsewhere may make the loop rebuild the mode's epoll set once (O(n)).
///
/// Several sources may watch one descriptor, and a mode may hold more sources than the process may open descriptors
/// (`RLIMIT_NOFILE`). A run traps, naming the limit, only when a mode's distinct descriptors outnumber it (the limit
/// lowered after they were opened): no wait can watch them.
///
/// A source may be created on any thread. `events`, `invalidate()` and `isValid` are safe from any thread; the handler
/// runs on the loop's thread. A source belongs to one loop; the descriptor stays the caller's to close.
// @unchecked Sendable: the `// MARK: Loop thread only` state is touched only on the loop's thread; cross-thread state
// is atomic or under `shared`'s lock.
public final class LoopDescriptorSource: @unchecked Sendable {
    /// The watched descriptor.
    public let descriptor: CInt
    /// Sorts ready sources within a pass: lower first.
    public let order: Int

    private let watched: Atomic<UInt8>
    private let valid = Atomic<Bool>(true)
    /// Whether the source is in its loop's list of sources whose events changed (`PollWaiter.noteNewEvents(of:)`).
    let isListedWithNewEvents = Atomic<Bool>(false)
    /// The loop the item belongs to (`LoopItem.withTie`), and the handler, let go of at `invalidate()`.
    private let shared: LoopLock<TiedCallbacks<Handler>>

    /// The handler, in a struct: see `TiedCallbacks`.
    private struct Handler {
        let call: (LoopDescriptorSource, DescriptorEvents) -> Void
    }
    /// Called when the loop ends with the source in one of its modes (a `LoopSignalSource` then gives its signal
    /// back): on the loop's thread (`true`: it may still call back), or on the thread that frees a loop of one's own
    /// (`Loop.deinit`, `false`). Set before the source is first added, never after.
    nonisolated(unsafe) var whenLoopEnds: (@Sendable (_ isOnLoopThread: Bool) -> Void)?
    /// Called on the loop's thread in each round of a final drain that runs everything (`LoopThread`'s), where no
    /// wait reads the descriptor any more but the loop still takes work: a `LoopSignalSource` hands over the
    /// deliveries its pipe holds. Set before the source is first added, never after.
    nonisolated(unsafe) var whenLoopDrains: (@Sendable () -> Void)?

    // MARK: Loop thread only
    var modes: ModeSet = []
    var sequence: UInt64 = 0

    /// A source on `descriptor`.
    ///
    /// - Parameters:
    ///   - descriptor: Any open descriptor. The source neither reads, writes nor closes it.
    ///   - events: `.readable`, `.writable`, both, or neither (then only error, hang-up and invalid are reported).
    ///   - order: Sorts ready sources within a pass: lower first.
    ///   - handler: Called on the loop's thread with the events that hold.
    /// - Precondition: `descriptor` is not negative; `events` holds only `.readable` and `.writable`.
    public init(
        descriptor: CInt,
        events: DescriptorEvents,
        order: Int = 0,
        _ handler: @escaping @Sendable (LoopDescriptorSource, DescriptorEvents) -> Void
    ) {
        loopPrecondition(descriptor >= 0,
                     "LoopDescriptorSource(descriptor:events:): the descriptor is negative (\(descriptor))")
        LoopDescriptorSource.checkWatchable(events, call: "LoopDescriptorSource(descriptor:events:)")
        self.descriptor = descriptor
        self.order = order
        self.watched = Atomic(events.rawValue)
        self.shared = LoopLock(TiedCallbacks(callbacks: Handler(call: handler)))
    }

    private static func checkWatchable(_ events: DescriptorEvents, call: StaticString) {
        loopPrecondition(events.isSubset(of: [.readable, .writable]),
                     "\(call): only .readable and .writable can be watched (got \(events))")
    }

    /// The conditions watched. Any thread; a change reaches a sleeping loop at once.
    ///
    /// - Precondition: Holds only `.readable` and `.writable`.
    public var events: DescriptorEvents {
        get { DescriptorEvents(rawValue: self.watched.load(ordering: .acquiring)) }
        set {
            LoopDescriptorSource.checkWatchable(newValue, call: "LoopDescriptorSource.events")
            let old = self.watched.exchange(newValue.rawValue, ordering: .acquiringAndReleasing)
            guard old != newValue.rawValue, let loop = self.boundLoop else { return }
            loop.waiter.noteNewEvents(of: self)  // before the wake-up, so that the wait it ends sees the change
            if !loop.isCurrent {
                loop.wakeUp()  // the loop is maybe asleep on the old set of events
            }
        }
    }

    /// Whether the source is still watching. Any thread.
    public var isValid: Bool {
        self.valid.load(ordering: .acquiring)
    }

    /// Stops watching for good and removes the source from every mode. Any thread; doing it twice does nothing.
    ///
    /// Before `invalidate()` returns, on any thread, the source lets go of its handler (and of what it captured), and
    /// the loop calls it no more, but for a call the loop had already begun on its thread when another thread
    /// invalidated the source.
    public func invalidate() {
        guard self.valid.exchange(false, ordering: .acquiringAndReleasing) else { return }
        _ = self.shared.takeCallbacks()  // let go of here, after the lock
        self.boundLoop?.detachEverywhere(self)
    }

    // MARK: Used by the loop (loop thread)

    func handle(_ events: DescriptorEvents) {
        self.shared.callbacks()?.call(self, events)
    }
}

extension LoopDescriptorSource: LoopItem {
    static var kind: String { "LoopDescriptorSource" }

    /// A change of `events` the old loop listed and never applied (it ended first) must not read as listed here, or
    /// this loop's epoll set would never learn of a later change: its registration is made afresh when the source
    /// joins a mode, from `events` as they are then.
    func forgetPreviousLoop() {
        self.isListedWithNewEvents.store(false, ordering: .releasing)
    }

    func withTie<Result>(_ body: (inout LoopTie) -> Result) -> Result {
        self.shared.withLock { body(&$0.tie) }
    }

    func attach(to items: ModeItems, loop: Loop) {
        ModeItems.insertSorted(self, into: &items.descriptorSources) { ($0.order, $0.sequence) }
        loop.waiter.descriptorSource(self, didJoin: items)
    }

    func detach(from items: ModeItems, loop: Loop) {
        ModeItems.removeSorted(self, from: &items.descriptorSources) { ($0.order, $0.sequence) }
        loop.waiter.descriptorSource(self, didLeave: items)
        if !loop.hostDrivers.isEmpty {
            for driver in loop.hostDrivers.compactMap(\.object) {
                driver.descriptorSource(self, didLeave: items)
            }
        }
    }
}

extension Array where Element == (LoopDescriptorSource, DescriptorEvents) {
    /// Puts the ready sources from `start` on in the order a pass calls them: lower `order` first, then the order they
    /// were added (`sequence`). Loop thread.
    mutating func sortInCallOrder(from start: Int) {
        guard self.count - start > 1 else { return }
        self[start...].sort { ($0.0.order, $0.0.sequence) < ($1.0.order, $1.0.sequence) }
    }
}
