/// The grid of a timer that fires on one of its own (a display link's): where it fires next, and what its fire on the
/// loop's thread is for, so that the callback needs neither the schedule's lock nor the loop to read them.
// @unchecked Sendable: `nextSlot` is immutable; `servedObject` is set once, before the timer is shared (the display
// link's init); `retainedServedObject` and the firing fields are touched only on the loop's thread (or its deinit),
// and set only by the grid's timer (`LoopTimer`).
final class TimerGrid: @unchecked Sendable {
    /// Given the slot just fired (or `nil` for the first fire) and now, the first grid point after now.
    let nextSlot: @Sendable (_ slot: LoopInstant?, _ now: LoopInstant) -> LoopInstant

    /// The object the timer works for (a display link), kept alive while the timer is in a mode or in its loop's
    /// common items, as a run loop retains a scheduled CADisplayLink; not otherwise, so an unscheduled link is freed.
    /// Set before the timer is first added, never after.
    ///
    /// `unowned`, not `weak`: it is read only when the timer joins a mode or the common items, and the object is alive
    /// then: either `Loop.add` is adding it (it owns the timer, and the add keeps it alive until the timer is
    /// attached), or the timer is common, joining a mode newly added to the common set, and `retainedServedObject`
    /// already holds it. A weak reference would give the object a side table, and every frame's retain and release
    /// of it would take the runtime's slow path.
    unowned(safe) var servedObject: AnyObject?

    // MARK: Loop thread only
    /// `servedObject`, held while the timer is in a mode (so, whenever it fires) or in the common items.
    @exclusivity(unchecked) var retainedServedObject: AnyObject?
    /// Set when the timer joins a mode from none, cleared by the served object's next fire: a display link's frames
    /// skipped since may have been due while it was in no mode (`HitchMonitor`).
    @exclusivity(unchecked) var hasJoinedAModeFromNone = false

    // MARK: Loop thread only, while the timer's callback runs
    /// The slot the timer fires for.
    @exclusivity(unchecked) var firingSlot = LoopInstant.distantFuture
    /// The loop's clock just before the callback.
    @exclusivity(unchecked) var firingNow = LoopInstant.distantFuture
    /// The grid point after the one the callback reported, when the served object worked it out (a display link's
    /// frame has it as its target): the next slot, unless the callback overran it. Cleared before each callback.
    @exclusivity(unchecked) var followingSlot: LoopInstant?

    init(_ nextSlot: @escaping @Sendable (_ slot: LoopInstant?, _ now: LoopInstant) -> LoopInstant) {
        self.nextSlot = nextSlot
    }

    /// The first grid point after `now` for a timer that has just fired for `slot`: `followingSlot` when the fire
    /// left one that is still ahead (a frame's arithmetic is not done twice), `nextSlot` otherwise. Loop thread, after
    /// the callback.
    func slot(after slot: LoopInstant, now: LoopInstant) -> LoopInstant {
        // `followingSlot` is the first grid point after max(slot, the clock before the callback); while it is still
        // after max(slot, now) nothing lies between, so it is also the first grid point after that.
        if let following = self.followingSlot, following > now, following > slot {
            return following
        }
        return self.nextSlot(slot, now)
    }
}
