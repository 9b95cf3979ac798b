import Testing
@testable import LoopKit

@Suite("Observers")
struct LoopObserverTests {
    @Test func observersAreCalledOnlyForTheActivitiesTheyChose() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: [.entry, .exit]) { _, activity in seen.append(activity) }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(seen.elements == [.entry, .exit])
    }

    @Test func lowerOrderObserversAreCalledFirstThenInTheOrderAdded() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<String>()
        loop.add(LoopObserver(activities: .entry, order: 5) { _, _ in seen.append("5a") }, forMode: .default)
        loop.add(LoopObserver(activities: .entry, order: -1) { _, _ in seen.append("-1") }, forMode: .default)
        loop.add(LoopObserver(activities: .entry, order: 5) { _, _ in seen.append("5b") }, forMode: .default)
        loop.add(LoopObserver(activities: .entry, order: 0) { _, _ in seen.append("0") }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now)
        #expect(seen.elements == ["-1", "0", "5a", "5b"])
    }

    @Test func aOneShotObserverIsInvalidatedAfterItsFirstCall() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<LoopActivity>()
        let observer = LoopObserver(activities: .beforeTimers, repeats: false) { _, activity in seen.append(activity) }
        loop.add(observer, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now)
        loop.run(mode: .default, before: clock.now)
        #expect(seen.elements == [.beforeTimers])
        #expect(!observer.isValid)
        #expect(!loop.contains(observer, inMode: .default))
    }

    @Test func observersRunOnlyWhileTheLoopRunsTheirMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<LoopMode>()
        loop.add(LoopObserver(activities: .entry) { _, _ in seen.append(.tracking) }, forMode: .tracking)
        loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .common)
        loop.run(mode: .default, before: clock.now)
        #expect(seen.elements.isEmpty)
        loop.run(mode: .tracking, before: clock.now)
        #expect(seen.elements == [.tracking])
    }

    @Test func anObserverIsNotReenteredByANestedRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let calls = Recorder<LoopActivity>()
        var nested = false
        loop.add(LoopObserver(activities: [.beforeTimers], on: loop.assumeIsolated()) { _, activity in
            calls.append(activity)
            if !nested {
                nested = true
                loop.run(mode: .default, before: clock.now)  // would call this observer again if it re-entered
            }
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now)
        #expect(calls.elements == [.beforeTimers])
    }

    @Test func anObserverMayInvalidateItselfAndOthers() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<String>()
        let second = LoopObserver(activities: .entry, order: 2) { _, _ in seen.append("second") }
        loop.add(LoopObserver(activities: .entry, order: 1) { observer, _ in
            seen.append("first")
            observer.invalidate()
            second.invalidate()
        }, forMode: .default)
        loop.add(second, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now)
        loop.run(mode: .default, before: clock.now)
        #expect(seen.elements == ["first"])
    }

    @Test func nothingRunsBetweenBeforeWaitingAndTheSleep() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)@\(clock.now.nanoseconds)")
        }, forMode: .default)
        let start = clock.now
        loop.add(LoopTimer(interval: .milliseconds(7)) { _ in trace.append("timer@\(clock.now.nanoseconds)") },
                 forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let slept = (start + .milliseconds(7)).nanoseconds
        #expect(trace.elements == ["beforeWaiting@\(start.nanoseconds)", "afterWaiting@\(slept)", "timer@\(slept)"])
    }
}
