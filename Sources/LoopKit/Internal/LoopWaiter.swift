import Synchronization

/// Where a loop sleeps: the seam between the pass (items, modes, phases) and the system's wait (SwiftNIO's
/// `Selector`).
///
/// A waiter owns the wake-up channel, the poll set, the deadline timer, the registrations of large modes and the
/// wait counters. The pass uses a few calls: `wait(for:until:sleepingOn:into:)` (wait for a mode's descriptors until
/// an instant, or only look), `wakeUp(through:)` (from any thread) and the notes that keep registrations current.
/// Backends: `PollWaiter` (Linux: ppoll, timerfd, epoll and a futex; portable: poll and a pipe, nothing else) and
/// `VirtualTimeWaiter` (a clock that declares itself virtual). Tests inject scripted ones.
///
/// Only `wakeUp(through:)`, `noteNewEvents(of:)`, `counts` and `wakeUpFutex` are safe from other threads; everything
/// else is loop thread only.
protocol LoopWaiter: AnyObject, Sendable {
    /// Waits until a descriptor source of `items` is ready, `deadline` passes (`.distantFuture`: never) or
    /// `wakeUp(through:)` is called; with `deadline` `nil`, only looks. A signal does not end the wait. A wake-up is
    /// reported, not read: the loop consumes it with `consumeWakeUp()` once the pass has taken the work it announced,
    /// so that the work runs one system call sooner.
    ///
    /// Appends the ready sources, with the events they have, to `ready`, in `(order, sequence)` order.
    ///
    /// - Parameter channel: What a sleep waits on for a wake-up: the channel the loop's state machine granted for this
    ///   wait (`wakeUpChannel(forWaitingIn:until:)`, unless a wake-up through the descriptor may still be on its way).
    ///   A look polls the descriptor only: a futex wake-up is sent only to a wait on the futex, and one that lands
    ///   after its wait is absorbed by the next wait on the futex.
    func wait(
        for items: ModeItems,
        until deadline: LoopInstant?,
        sleepingOn channel: WakeUpChannel,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome

    /// The channel a wait for `items` until `deadline` would rather sleep on: `.futex` when the mode has no descriptor
    /// to watch, the waiter has one, and the futex would not fire the deadline later than the descriptor's timer.
    func wakeUpChannel(forWaitingIn items: ModeItems, until deadline: LoopInstant) -> WakeUpChannel

    /// Ends the current wait, or the next one if none is under way, through `channel`: the one the current wait
    /// sleeps on. Any thread.
    func wakeUp(through channel: WakeUpChannel)

    /// Takes the wake-up a wait or look found, if nothing has taken it since (reads the pipe, or notes the futex word).
    ///
    /// - Returns: Whether a wake-up was read.
    func consumeWakeUp() -> Bool

    /// Whether a wait or look found a wake-up and nothing has taken it since.
    var hasUnreadWakeUp: Bool { get }

    /// `source`'s watched events changed: bring registrations up to date before the next wait. Any thread.
    func noteNewEvents(of source: LoopDescriptorSource)

    /// `source` joined the mode of `items`.
    func descriptorSource(_ source: LoopDescriptorSource, didJoin items: ModeItems)

    /// `source` left the mode of `items`.
    func descriptorSource(_ source: LoopDescriptorSource, didLeave items: ModeItems)

    /// Lets go of everything kept for the loop's modes: the loop is ending.
    func forgetModes()

    /// A run of the mode of `items` that may wait begins: the first wait of a large mode looks at all its descriptors
    /// (unless it did a sweep cycle or less ago), so that one closed without cancelling its source while the loop was
    /// not running is reported in the run's first pass.
    func runWillBegin(in items: ModeItems)

    /// The descriptor that becomes readable when the waiter is woken (a host loop watches it). Any thread.
    var wakeUpDescriptor: CInt { get }

    /// What the waiter did so far. Any thread.
    var counts: WaitCounts { get }

    /// The futex that `wakeUp(through: .futex)` notifies, and nothing else, for the loop to notify directly
    /// (`nil`: none, or a wake-up does more). Lives as long as the waiter. Any thread.
    var wakeUpFutex: WakeupFutex? { get }
}

extension LoopWaiter {
    /// Waits, or looks, sleeping on the wake-up descriptor.
    func wait(
        for items: ModeItems,
        until deadline: LoopInstant?,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        self.wait(for: items, until: deadline, sleepingOn: .descriptor, into: &ready)
    }

    var wakeUpFutex: WakeupFutex? { nil }

    /// A waiter without a futex sleeps on its descriptor.
    func wakeUpChannel(forWaitingIn items: ModeItems, until deadline: LoopInstant) -> WakeUpChannel {
        .descriptor
    }

    /// Wakes through the wake-up descriptor. Any thread.
    func wakeUp() {
        self.wakeUp(through: .descriptor)
    }
}

/// What a sleeping loop is woken through.
enum WakeUpChannel: Equatable, Sendable {
    /// The wake-up descriptor (a pipe), polled beside the mode's descriptors; a host loop watches it too.
    case descriptor
    /// A futex word (`WakeupFutex`): one system call to wake and one to sleep, for a mode with no descriptors.
    case futex
}

/// What a wait found besides the ready descriptors.
struct WaitOutcome: Equatable {
    /// The wait found the wake-up channel readable (and left it for `consumeWakeUp()`).
    var isWokenByChannel = false
}

/// How many waits a waiter made, how many could block, how many wake-ups it took, and how often it offered the
/// processor before a wait, or napped instead; written on the loop's thread, read from any. (The wake-ups sent are
/// counted by the state machine, under the lock their producers hold: `LoopStateMachine.wakeUpsSent`.)
final class WaitCounts: Sendable {
    let waits = Atomic<UInt64>(0)
    let blockingWaits = Atomic<UInt64>(0)
    let wakeUpDrains = Atomic<UInt64>(0)
    let processorOffers = Atomic<UInt64>(0)
    let processorNaps = Atomic<UInt64>(0)

    func count(timeoutNanoseconds: Int64) {
        self.waits.wrappingAdd(1, ordering: .relaxed)
        if timeoutNanoseconds != 0 {
            self.blockingWaits.wrappingAdd(1, ordering: .relaxed)
        }
    }
}
