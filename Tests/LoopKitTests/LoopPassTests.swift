import Testing
@testable import LoopKit

@Suite("One run: results and the order of a pass")
struct LoopPassTests {
    @Test func anEmptyModeFinishesAtOnceWithoutCallingObservers() throws {
        let loop = try Loop(clock: ManualLoopClock())
        let seen = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: .allActivities) { _, activity in seen.append(activity) }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(seen.elements.isEmpty)
    }

    @Test func onePassWithADueTimerCallsObserversInCFOrder() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: .allActivities) { _, activity in trace.append("\(activity)") }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in trace.append("timer") }, forMode: .default)
        let result = loop.run(mode: .default, before: clock.now + .milliseconds(10))
        #expect(result == .timedOut)
        #expect(trace.elements == [
            "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "timer", "exit",
        ])
    }
}
