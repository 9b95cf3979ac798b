/// The grid of a timer that fires on one of its own (a display link's): where it fires next, and what its fire on the
/// loop's thread is for, so that the callback needs neither the schedule's lock nor the loop to read them.
// @unchecked Sendable: `nextSlot` is immutable; `servedObject` is set once, before the timer is shared (the display
// link's init); `retainedServedObject` and the firing fields are touched only on the loop's thread (or its deinit),
// and set only by the grid's timer (`LoopTimer`).
final class TimerGrid: @unchecked Sendable {
    /// Given the slot just fired (or `nil` for the first fire) and now, the first grid point after now.
    let nextSlot: @Sendable (_ slot: LoopInstant?, _ now: LoopInstant) -> LoopInstant

    /// The object the timer works for (a display link), kept alive while the timer is in a mode, as a run loop
    /// retains a scheduled CADisplayLink; weak otherwise, so an unscheduled link is freed. Set before the timer is
    /// first added, never after.
    weak var servedObject: AnyObject?

    // MARK: Loop thread only
    /// `servedObject`, held while the timer is in a mode (so, whenever it fires).
    @exclusivity(unchecked) var retainedServedObject: AnyObject?

    // MARK: Loop thread only, while the timer's callback runs
    /// The slot the timer fires for.
    @exclusivity(unchecked) var firingSlot = LoopInstant.distantFuture
    /// The loop's clock just before the callback.
    @exclusivity(unchecked) var firingNow = LoopInstant.distantFuture

    init(_ nextSlot: @escaping @Sendable (_ slot: LoopInstant?, _ now: LoopInstant) -> LoopInstant) {
        self.nextSlot = nextSlot
    }
}
