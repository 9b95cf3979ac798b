/// What the loop needs from every item it keeps in modes. Loop thread only, except `isValid`, `withTie` and what is
/// built on it.
protocol LoopItem: AnyObject {
    /// The type's public name, for precondition messages.
    static var kind: String { get }
    var isValid: Bool { get }
    /// Runs `body` with the item's tie to its loop, under the lock that guards it: a lock of the item's own
    /// (`LoopLock<LoopTie>`), or, for a timer, the lock of its schedule, so that a timer (a million of them, say)
    /// takes no lock and no allocation more. Any thread; `body` must not call user code or take the lock again.
    func withTie<Result>(_ body: (inout LoopTie) -> Result) -> Result
    /// The modes of its loop the item is in (never `common`). Loop thread only.
    var modes: ModeSet { get set }
    /// Order of first addition to the loop: breaks ties between equal `order`s and fire dates. Loop thread only.
    var sequence: UInt64 { get set }
    /// Puts the item into `items`, whose mode the item has just joined.
    func attach(to items: ModeItems, loop: Loop)
    /// Takes the item out of `items`, whose mode the item has just left.
    func detach(from items: ModeItems, loop: Loop)
    /// The loop has taken the invalidated item out of every mode, and will not call it again. Loop thread.
    func didLeaveEveryMode()
    /// The item has just joined (`isCommon`) or left the loop's common items, which hold it as a mode does: it joins
    /// every mode later added to the common set. Loop thread.
    func commonMembershipDidChange(isCommon: Bool, loop: Loop)
    /// The item starts afresh in a new loop (its first, or one after its last loop ended or went away): forget the
    /// bookkeeping the old loop kept in it, which no teardown of that loop resets. Called by `bind(to:kind:call:)`
    /// under the tie's lock, before the new tie is set: it must not take that lock or call user code.
    func forgetPreviousLoop()
}

extension LoopItem {
    /// Nothing to do for most items: they let go of their callbacks in `invalidate()` itself.
    func didLeaveEveryMode() {}

    /// Nothing to do for most items: the loop's common items hold them.
    func commonMembershipDidChange(isCommon: Bool, loop: Loop) {}

    /// Nothing to do for most items: their loop-thread state is their modes and sequence, which `bind` resets.
    func forgetPreviousLoop() {}

    /// Forgets what a previous loop kept in the item's loop-thread state: the modes it remembers, its `sequence`
    /// (the new loop numbers its items itself, and `(order, sequence)` must not repeat in a mode) and the rest
    /// (`forgetPreviousLoop()`). Under the tie's lock, just before the item is tied to a new loop.
    ///
    /// Done here rather than on the new loop's thread: no thread touches that state now (the old loop is gone, or has
    /// let go of its items), and the new loop's thread reaches the item only through the tie, so it sees this done.
    /// Done later, on that thread, it could undo an attach that another thread's add made meanwhile.
    private func startAfresh() {
        if !self.modes.isEmpty {
            self.modes = []
        }
        self.sequence = 0
        self.forgetPreviousLoop()
    }

    /// The loop the item belongs to, if it was added to one that still exists. Any thread.
    var boundLoop: Loop? {
        self.withTie { $0.loop }
    }

    /// Ties the item to `loop`; one new to it starts afresh (`startAfresh()`). Any thread.
    ///
    /// Whether the current loop has ended is asked outside the item's lock: it takes the loop's own lock, and the
    /// last reference to an old loop must not be let go (running its deinit) under the item's. An item of a loop
    /// that has ended but is still tearing down is tied once the teardown has let go of it (`Loop.end(finalDrain:)`).
    ///
    /// - Precondition: The item does not belong to another loop that is still running.
    func bind(to loop: Loop, kind: String, call: StaticString) {
        while true {
            // An item without a loop (the usual first add) is tied in one round trip.
            let current: Loop? = self.withTie { tie in
                guard let current = tie.loop else {
                    self.startAfresh()
                    tie.loop = loop
                    return nil
                }
                return current
            }
            guard let current else { return }
            if current === loop || !current.hasEnded {
                loopPrecondition(current === loop, "\(call): this \(kind) already belongs to another loop")
                return
            }
            // Ended, but maybe still tearing down, changing the item's loop-thread state as it takes it out of its
            // modes: adopted only once it has let go (on the ended loop's own thread, at once).
            current.waitUntilItemsAreLetGo()
            let isBound = self.withTie { tie in
                guard tie.loop === current else { return false }  // another thread tied it meanwhile: look again
                self.startAfresh()
                tie.loop = loop
                return true
            }
            if isBound { return }
        }
    }
}
