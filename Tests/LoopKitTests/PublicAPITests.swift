import LoopKit  // deliberately not @testable: everything used here must be public
import Testing

/// What CF on Linux lacks, LoopKit offers publicly: observers, both kinds of sources, stop, run results.
@Suite("Public API")
struct PublicAPITests {
    @Test func observersSourcesAndStopArePublic() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        var trace: [String] = []
        // On the loop's own thread, items may capture non-Sendable state through the isolated view.
        let isolated = loop.assumeIsolated()
        loop.add(LoopObserver(activities: [.entry, .exit], on: isolated) { _, activity in trace.append("\(activity)") },
                 forMode: .default)
        let source = LoopSource(on: isolated) { _ in
            trace.append("source")
            loop.stop()
        }
        loop.add(source, forMode: .default)
        let descriptorSource = LoopDescriptorSource(descriptor: 0, events: []) { _, _ in }
        loop.add(descriptorSource, forMode: "unused")
        descriptorSource.invalidate()
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        source.signal()
        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        #expect(trace == ["entry", "source", "exit"])
        loop.wakeUp()
        #expect(loop.currentMode == nil)
        #expect(loop.commonModes.contains(.tracking))
    }
}

@Suite("Thread checks")
struct ThreadCheckTests {
    @Test func thePublicThreadCheckPassesOnTheLoopsThread() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        loop.preconditionIsCurrent()
        loop.assertIsCurrent()
        #expect(loop.isCurrent)
    }
}
