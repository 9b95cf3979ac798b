import Testing
@testable import LoopKit

@Suite("Modes and the common pseudo-mode")
struct LoopModeTests {
    @Test func modesCompareByName() {
        #expect(LoopMode("default") == .default)
        #expect(LoopMode("tracking") == .tracking)
        #expect(LoopMode("custom") == "custom")
        #expect(LoopMode("custom") != .default)
        #expect(Set([LoopMode("a"), "a", "b"]).count == 2)
    }

    @Test func theCommonSetHoldsDefaultAndTrackingFromTheStart() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        #expect(loop.commonModes == [.default, .tracking])
    }

    @Test func anItemAddedToCommonIsInEveryCommonMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        loop.add(timer, forMode: .common)
        #expect(loop.contains(timer, inMode: .default))
        #expect(loop.contains(timer, inMode: .tracking))
        #expect(loop.contains(timer, inMode: .common))
        #expect(!loop.contains(timer, inMode: "custom"))
    }

    @Test func aModeAddedToTheCommonSetLaterReceivesEveryCommonItem() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        let source = LoopSource { _ in }
        let observer = LoopObserver(activities: .entry) { _, _ in }
        loop.add(timer, forMode: .common)
        loop.add(source, forMode: .common)
        loop.add(observer, forMode: .common)
        loop.addCommonMode("modal")
        #expect(loop.commonModes == [.default, .tracking, "modal"])
        #expect(loop.contains(timer, inMode: "modal"))
        #expect(loop.contains(source, inMode: "modal"))
        #expect(loop.contains(observer, inMode: "modal"))
        let later = LoopTimer(interval: .seconds(1)) { _ in }
        loop.add(later, forMode: .common)
        #expect(loop.contains(later, inMode: "modal"))
    }

    @Test func removingFromCommonRemovesFromEveryCommonMode() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let source = LoopSource { _ in }
        loop.add(source, forMode: .common)
        loop.remove(source, forMode: .common)
        #expect(!loop.contains(source, inMode: .default))
        #expect(!loop.contains(source, inMode: .tracking))
        #expect(!loop.contains(source, inMode: .common))
    }

    @Test func aTimerInDefaultDoesNotFireWhileTheLoopRunsTracking() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(10), repeats: true) { _ in fired.append("default") }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(10), repeats: true) { _ in fired.append("common") }, forMode: .common)
        loop.run(mode: .tracking, before: clock.now + .milliseconds(35))
        #expect(fired.elements == ["common", "common", "common"])
    }

    @Test func aCustomModeIsCreatedByAddingToIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = Recorder<Int>()
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in fired.append(1) }, forMode: "custom")
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(loop.run(mode: "custom", before: .distantFuture) == .finished)
        #expect(fired.elements == [1])
        #expect(loop.allModes.contains("custom"))
    }

    @Test func currentModeIsTheInnermostRunsMode() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let seen = Recorder<String>()
        #expect(loop.currentMode == nil)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            seen.append(loop.currentMode?.name ?? "none")
            loop.run(mode: .tracking, before: clock.now)
            seen.append(loop.currentMode?.name ?? "none")
        }, forMode: .default)
        loop.add(LoopObserver(activities: .entry) { _, _ in seen.append(loop.currentMode?.name ?? "none") },
                 forMode: .tracking)
        loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .tracking)
        loop.run(mode: .default, before: clock.now + .milliseconds(2))
        #expect(seen.elements == ["default", "tracking", "default"])
        #expect(loop.currentMode == nil)
    }
}

@Suite("Blocks")
struct LoopBlockTests {
    @Test func blocksRunInFIFOOrder() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<Int>()
        for index in 0..<10 {
            loop.perform { ran.append(index) }
        }
        loop.run(mode: .default, before: loop.now)
        #expect(ran.elements == Array(0..<10))
    }

    @Test func blocksRunOnlyInTheirModes() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        loop.perform(inModes: [.tracking]) { ran.append("tracking") }
        loop.perform { ran.append("default") }
        loop.perform(inModes: [.common]) { ran.append("common") }
        loop.perform(inModes: ["custom", .default]) { ran.append("custom+default") }
        loop.run(mode: .default, before: loop.now)
        #expect(ran.elements == ["default", "common", "custom+default"])
        loop.run(mode: .tracking, before: loop.now)
        #expect(ran.elements == ["default", "common", "custom+default", "tracking"])
    }

    @Test func aBlockQueuedDuringADrainWaitsForTheNextDrainPoint() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        loop.add(LoopObserver(activities: [.beforeTimers, .beforeSources]) { _, activity in trace.append("\(activity)") },
                 forMode: .default)
        let source = LoopSource { _ in trace.append("source") }
        loop.add(source, forMode: .default)
        source.signal()
        loop.perform {
            trace.append("first")
            loop.perform { trace.append("second") }
        }
        loop.run(mode: .default, before: clock.now)
        // "second" is queued during the first drain; it runs at the next drain point of the same pass (after the
        // signalled sources), not inside the first.
        #expect(trace.elements == ["beforeTimers", "beforeSources", "first", "source", "second"])
    }

    @Test func aBlockThatRequeuesItselfRunsOncePerDrainAndCannotTrapTheLoop() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let count = Recorder<Int>()
        @Sendable func again() {
            count.append(1)
            loop.perform(again)
        }
        loop.perform(again)
        #expect(loop.run(mode: .default, before: clock.now) == .timedOut)
        #expect(count.count == 3)  // a pass has three drain points: after beforeSources, after the sources, at its end
    }

    @Test func aBlockForAnotherModeKeepsItsPlaceInTheQueue() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        loop.perform(inModes: [.tracking]) { ran.append("t1") }
        loop.perform(inModes: [.common]) { ran.append("c1") }
        loop.perform(inModes: [.tracking]) { ran.append("t2") }
        loop.run(mode: "custom-empty", before: loop.now)
        loop.run(mode: .tracking, before: loop.now)
        #expect(ran.elements == ["t1", "c1", "t2"])
    }

    /// While a block waits for tracking, thousands of blocks run in default past it: the loop's queue keeps a few
    /// entries, not one per block that ran (its storage grew with each before), and the parked block still runs first
    /// when tracking does, with one queued in tracking later.
    @Test func aBlockWaitingForTrackingDoesNotMakeTheQueueGrowWithTheDefaultModesBlocks() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let ran = Recorder<String>()
        loop.perform(inModes: [.tracking]) { ran.append("tracking 1") }
        var largest = 0
        for index in 1...2_000 {
            loop.perform { ran.append("default \(index)") }
            if index.isMultiple(of: 2) {
                loop.run(mode: .default, before: loop.now)
                largest = max(largest, loop.blockQueue.storedEntryCount)
            }
        }
        #expect(largest <= 8)
        #expect(ran.elements == (1...2_000).map { "default \($0)" })
        loop.perform(inModes: [.tracking]) { ran.append("tracking 2") }
        loop.run(mode: .tracking, before: loop.now)
        #expect(ran.elements.suffix(2) == ["tracking 1", "tracking 2"])
        #expect(loop.blockQueue.storedEntryCount == 0)
    }
}
