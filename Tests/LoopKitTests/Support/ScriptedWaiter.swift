import Synchronization
@testable import LoopKit

/// A waiter that plays a script instead of sleeping: each wait takes the next step, which moves a `SteppingClock`
/// and says what the wait found. It records each wait's deadline (`nil` for a look). Loop thread only, except
/// `wakeUp(through:)`, which only counts.
final class ScriptedWaiter: LoopWaiter, @unchecked Sendable {
    /// One scripted wait.
    struct Step {
        /// How far the clock moves during the wait (`nil`: to the wait's deadline).
        var elapsed: Duration?
        /// Whether the wait found a wake-up in the channel.
        var wokenByChannel = false
    }

    let clock: SteppingClock
    let counts = WaitCounts()
    let wakeUpDescriptor: CInt = -1
    var script: [Step] = []
    private(set) var deadlines: [LoopInstant?] = []
    private let wakeUps = Atomic<Int>(0)
    private(set) var hasUnreadWakeUp = false
    private(set) var consumedWakeUps = 0

    init(clock: SteppingClock) {
        self.clock = clock
    }

    var wakeUpCount: Int { self.wakeUps.load(ordering: .relaxed) }

    func wait(
        for items: ModeItems,
        until deadline: LoopInstant?,
        sleepingOn channel: WakeUpChannel,
        into ready: inout [(LoopDescriptorSource, DescriptorEvents)]
    ) -> WaitOutcome {
        self.deadlines.append(deadline)
        guard let deadline else { return WaitOutcome() }  // a look finds nothing unless scripted otherwise
        let step = self.script.isEmpty ? Step() : self.script.removeFirst()
        let now = self.clock.now
        let elapsed = step.elapsed ?? (deadline == .distantFuture ? .zero : deadline - now)
        self.clock.advance(by: Int64(elapsed.components.seconds) * 1_000_000_000
                           + Int64(elapsed.components.attoseconds / 1_000_000_000))
        self.hasUnreadWakeUp = step.wokenByChannel
        return WaitOutcome(isWokenByChannel: step.wokenByChannel)
    }

    func wakeUp(through channel: WakeUpChannel) {
        self.wakeUps.wrappingAdd(1, ordering: .relaxed)
    }

    func consumeWakeUp() -> Bool {
        guard self.hasUnreadWakeUp else { return false }
        self.hasUnreadWakeUp = false
        self.consumedWakeUps += 1
        return true
    }

    func noteNewEvents(of source: LoopDescriptorSource) {}
    func descriptorSource(_ source: LoopDescriptorSource, didJoin items: ModeItems) {}
    func descriptorSource(_ source: LoopDescriptorSource, didLeave items: ModeItems) {}
    func forgetModes() {}
    func runWillBegin(in items: ModeItems) {}
}
