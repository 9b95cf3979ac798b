import Testing
@testable import LoopKit

/// DESIGN §3: every item operation is safe from any thread and takes effect on a sleeping loop; every callback may
/// change any item and stop the loop. And §1: a mode added to the common set receives every common item, and runs.
@Suite("Any thread, any callback", .serialized, .timeLimit(.minutes(1)))
struct AnyThreadAndCallbackTests {
    @Test func anObserverAddedFromAnotherThreadSeesTheSleepingLoopWake() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let seen = Recorder<LoopActivity>()
        let helper = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.add(LoopObserver(activities: .afterWaiting) { _, activity in
                seen.append(activity)
                loop.stop()
            }, forMode: .default)
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .stopped)
        helper.join()
        #expect(seen.elements == [.afterWaiting])
    }

    @Test func removingSourcesFromAnotherThreadLetsTheSleepingRunFinish() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let descriptorSource = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }
        let source = LoopSource { _ in }
        let observer = LoopObserver(activities: .allActivities) { _, _ in }
        loop.add(descriptorSource, forMode: .default)
        loop.add(source, forMode: .default)
        loop.add(observer, forMode: .default)
        let helper = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.remove(observer, forMode: .default)  // first: the run may finish as soon as the sources are gone
            loop.remove(descriptorSource, forMode: .default)
            loop.remove(source, forMode: .default)
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .finished)
        helper.join()
        #expect(!loop.contains(observer, inMode: .default))
    }

    @Test func aDescriptorHandlerMayStopTheLoopAndChangeOtherItems() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let victim = LoopTimer(interval: .milliseconds(1)) { _ in Issue.record("an invalidated timer fired") }
        let added = Recorder<String>()
        loop.add(victim, forMode: .default)
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { source, _ in
            pipe.readAll()
            victim.invalidate()
            loop.add(LoopTimer(interval: .zero) { _ in added.append("new timer") }, forMode: .default)
            source.invalidate()
            loop.stop()
        }, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        pipe.write()
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        loop.run(mode: .default, before: clock.now)
        #expect(added.elements == ["new timer"])
    }

    @Test func aBlockMayInvalidateATimerAndStopTheLoop() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let timer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in Issue.record("fired after invalidate") }
        loop.add(timer, forMode: .default)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        loop.perform {
            timer.invalidate()
            loop.stop()
        }
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(10)) == .stopped)
        #expect(!timer.isValid)
    }

    @Test func aScheduleCallbackMayAddItemsToTheLoop() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<LoopMode>()
        let source = LoopSource(onSchedule: { _, mode in
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in fired.append(mode) }, forMode: mode)
        }, { _ in })
        loop.add(source, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(5))
        #expect(fired.elements == [.default])
    }

    @Test func aModeAddedToTheCommonSetRunsEveryCommonItem() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let seen = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in seen.append("timer") }, forMode: .common)
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { source, _ in
            pipe.readAll()
            seen.append("descriptor")
            source.invalidate()
        }, forMode: .common)
        loop.add(LoopDisplayLink(display: .sixtyHertz) { link, _ in
            seen.append("frame")
            link.invalidate()
        }, forMode: .common)
        loop.addCommonMode("modal")
        pipe.write()
        #expect(loop.run(mode: "modal", before: .distantFuture) == .finished)
        #expect(Set(seen.elements) == ["timer", "descriptor", "frame"])
        #expect(seen.count == 3)
    }
}
