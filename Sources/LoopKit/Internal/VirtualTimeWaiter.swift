/// The waiter of a loop whose clock is virtual: instead of sleeping until an instant, it looks at the descriptors
/// and, if nothing is ready, advances the clock to that instant, as if it had slept. A wait with no instant to reach
/// waits in real time on the waiter it wraps (for a wake-up or a descriptor), as any loop does.
///
/// Only `wakeUp(through:)`, `noteNewEvents(of:)`, `counts` and `wakeUpFutex` (none: its loop wakes it through the
/// waiter it wraps) are safe from other threads.
final class VirtualTimeWaiter: LoopWaiter {  // checked Sendable: both stored properties are Sendable `let`s
    let base: any LoopWaiter
    private let clock: any VirtualLoopClock

    init(wrapping base: any LoopWaiter, clock: any VirtualLoopClock) {
        self.base = base
        self.clock = clock
    }

    var counts: WaitCounts { self.base.counts }

    var wakeUpDescriptor: CInt { self.base.wakeUpDescriptor }

    func wait(
        for items: ModeItems,
        until deadline: LoopInstant?,
        sleepingOn channel: WakeUpChannel,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        guard let deadline, deadline != .distantFuture else {
            return self.base.wait(for: items, until: deadline, sleepingOn: channel, into: &ready)
        }
        let start = ready.count
        // A wait whose deadline has passed: it only looks, but through the same registrations as a real sleep.
        let outcome = self.base.wait(for: items, until: min(self.clock.now, deadline), sleepingOn: channel,
                                     into: &ready)
        if ready.count == start && !outcome.isWokenByChannel {
            self.clock.advance(to: deadline)
        }
        return outcome
    }

    func wakeUpChannel(forWaitingIn items: ModeItems, until deadline: LoopInstant) -> WakeUpChannel {
        self.base.wakeUpChannel(forWaitingIn: items, until: deadline)
    }

    func wakeUp(through channel: WakeUpChannel) {
        self.base.wakeUp(through: channel)
    }

    var hasUnreadWakeUp: Bool {
        self.base.hasUnreadWakeUp
    }

    func consumeWakeUp() -> Bool {
        self.base.consumeWakeUp()
    }

    func noteNewEvents(of source: LoopDescriptorSource) {
        self.base.noteNewEvents(of: source)
    }

    func descriptorSource(_ source: LoopDescriptorSource, didJoin items: ModeItems) {
        self.base.descriptorSource(source, didJoin: items)
    }

    func descriptorSource(_ source: LoopDescriptorSource, didLeave items: ModeItems) {
        self.base.descriptorSource(source, didLeave: items)
    }

    func forgetModes() {
        self.base.forgetModes()
    }

    func runWillBegin(in items: ModeItems) {
        self.base.runWillBegin(in: items)
    }
}
