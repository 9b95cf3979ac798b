import Foundation
import Testing
@testable import LoopKit

@Suite("Tracer")
struct LoopTracerTests {
    private func events(_ tracer: LoopTracer) throws -> [[String: Any]] {
        let data = Data(tracer.json().utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(object["traceEvents"] as? [[String: Any]])
    }

    /// Checks that B and E events pair up like parentheses, by name, with times that never go backwards.
    private func expectWellNested(_ events: [[String: Any]]) {
        var stack: [String] = []
        var lastTime = -Double.infinity
        for event in events {
            guard let phase = event["ph"] as? String, phase != "M" else { continue }
            let time = event["ts"] as? Double ?? .nan
            #expect(time >= lastTime)
            lastTime = time
            let name = event["name"] as? String ?? ""
            if phase == "B" {
                stack.append(name)
            } else if phase == "E" {
                #expect(stack.popLast() == name)
            }
        }
        #expect(stack.isEmpty)
    }

    /// A tracer invalidated mid-run ends its open slices then, not whenever `json()` is called later.
    @Test func invalidatingMidRunEndsTheOpenSlicesAtThatTime() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = LoopTracer(loop: loop)
        loop.add(LoopTimer(interval: .milliseconds(10)) { _ in
            clock.advance(by: .milliseconds(1))
            tracer.invalidate()
            clock.advance(by: .milliseconds(1))
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        clock.advance(by: .seconds(60))
        let events = try self.events(tracer)
        self.expectWellNested(events)
        let ends = events.filter { $0["ph"] as? String == "E" }
        #expect(Set(ends.compactMap { $0["name"] as? String }).isSuperset(of: ["run default", "pass", "timer"]))
        let times = events.compactMap { $0["ts"] as? Double }
        #expect(times.max() == 11_000)  // µs from the tracer's creation: when it was invalidated
    }

    @Test func theTraceIsTraceEventJSONWithNestedRunsPassesSleepsAndCallouts() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = LoopTracer(loop: loop)
        let source = LoopSource { _ in clock.advance(by: .microseconds(300)) }
        loop.add(source, forMode: .common)
        loop.add(LoopTimer(interval: .milliseconds(5)) { _ in
            clock.advance(by: .milliseconds(1))
            source.signal()
            loop.perform(inModes: [.tracking]) { loop.stop() }
            loop.run(mode: .tracking, before: clock.now + .milliseconds(50))
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(30))

        let events = try self.events(tracer)
        self.expectWellNested(events)
        let slices = events.filter { $0["ph"] as? String == "B" }.compactMap { $0["name"] as? String }
        #expect(slices.contains("run default"))
        #expect(slices.contains("run tracking"))
        #expect(slices.contains("pass"))
        #expect(slices.contains("sleep"))
        #expect(slices.contains("timer"))
        #expect(slices.contains("source"))
        #expect(slices.contains("block"))
        // The nested run lies inside the timer callout that started it.
        let names = events.compactMap { event -> String? in
            guard let phase = event["ph"] as? String, phase == "B" || phase == "E" else { return nil }
            return "\(phase) \(event["name"] as? String ?? "")"
        }
        let timerStart = try #require(names.firstIndex(of: "B timer"))
        let nestedStart = try #require(names.firstIndex(of: "B run tracking"))
        let timerEnd = try #require(names.firstIndex(of: "E timer"))
        #expect(timerStart < nestedStart && nestedStart < timerEnd)
    }

    @Test func aTraceTakenWhileTheLoopRunsIsClosedAndStillNests() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = LoopTracer(loop: loop)
        var snapshot: [[String: Any]] = []
        loop.add(LoopTimer(interval: .milliseconds(1),
                           on: loop.assumeIsolated()) { _ in snapshot = (try? self.events(tracer)) ?? [] },
                 forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(!snapshot.isEmpty)
        self.expectWellNested(snapshot)
    }

    @Test func anInvalidatedTracerStopsRecordingAndTheLoopStopsCallingIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = LoopTracer(loop: loop)
        loop.add(LoopTimer(interval: .milliseconds(1), repeats: true) { _ in }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .milliseconds(3))
        tracer.invalidate()
        let count = tracer.eventCount
        loop.run(mode: .default, before: clock.now + .milliseconds(3))
        #expect(tracer.eventCount == count)
        #expect(loop.tracers.isEmpty)
    }

    private func calloutSlices(_ tracer: LoopTracer) throws -> [String] {
        try self.events(tracer).filter { $0["ph"] as? String == "B" && $0["cat"] as? String == "callout" }
            .compactMap { $0["name"] as? String }
    }

    /// Two tracers on one loop each record every callout; invalidating one leaves the other recording.
    @Test func aSecondTracerOnALoopLeavesTheFirstRecording() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let first = LoopTracer(loop: loop)
        let second = LoopTracer(loop: loop)
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(try self.calloutSlices(first) == ["timer"])
        #expect(try self.calloutSlices(second) == ["timer"])

        second.invalidate()
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(try self.calloutSlices(first) == ["timer", "timer"])
        #expect(try self.calloutSlices(second) == ["timer"])
        #expect(loop.tracers.count == 1)
    }

    /// A tracer made on another thread and dropped before the loop set it up is never attached, and does not detach
    /// the tracer already recording.
    @Test func aTracerDroppedBeforeItsSetUpLeavesTheAttachedOneRecording() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let first = LoopTracer(loop: loop)
        onAnotherThread { _ = LoopTracer(loop: loop) }
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(try self.calloutSlices(first) == ["timer"])
        #expect(loop.tracers.count == 1)
    }

    @Test func theTraceIsWrittenToAFile() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = LoopTracer(loop: loop, threadName: "main \"loop\"")
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("loopkit-\(UUID()).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try tracer.write(toFile: path)
        let data = try #require(FileManager.default.contents(atPath: path))
        #expect(try JSONSerialization.jsonObject(with: data) is [String: Any])
        #expect(throws: SystemCallError.self) { try tracer.write(toFile: "/nonexistent-dir/trace.json") }
    }
}
