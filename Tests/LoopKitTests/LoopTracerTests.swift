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

    /// The open slices when each slice began, by name: `[name, parent, grandparent, ...]`, in order of beginning.
    private func slicesWithTheirParents(_ events: [[String: Any]]) -> [[String]] {
        var stack: [String] = []
        var slices: [[String]] = []
        for event in events {
            let name = event["name"] as? String ?? ""
            switch event["ph"] as? String {
            case "B":
                slices.append([name] + stack.reversed())
                stack.append(name)
            case "E":
                stack.removeLast()
            default:
                break
            }
        }
        return slices
    }

    /// A hang handler is work of the pass whose stretch hung, traced as its own callout before the sleep: the sleep
    /// slice begins when the loop waits, after every `beforeWaiting` observer and hang handler.
    @Test func aHangHandlerIsACalloutOfThePassAndNotPartOfTheSleep() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = LoopTracer(loop: loop)
        let monitor = HitchMonitor(loop: loop, hangThreshold: .milliseconds(100))
        monitor.onHang { _ in clock.advance(by: .milliseconds(7)) }
        var fires = 0
        loop.add(LoopTimer(interval: .milliseconds(10), repeats: true, on: loop.assumeIsolated()) { timer in
            fires += 1
            clock.advance(by: fires == 1 ? .milliseconds(300) : .milliseconds(1))  // the first fire hangs
            if fires == 2 { timer.invalidate() }
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        #expect(monitor.report.hangs == 1)

        let events = try self.events(tracer)
        self.expectWellNested(events)
        let slices = self.slicesWithTheirParents(events)
        #expect(slices.filter { $0.first == "hang handler" } == [["hang handler", "pass", "run default"]])
        #expect(slices.allSatisfy { $0.first == "sleep" ? $0 == ["sleep", "pass", "run default"] : true })
        // The handler's 7 ms lie before the sleep that follows it, not inside it.
        let begins = events.filter { $0["ph"] as? String == "B" }
        let handler = try #require(begins.firstIndex { $0["name"] as? String == "hang handler" })
        let handlerTime = try #require(begins[handler]["ts"] as? Double)
        let nextSleep = try #require(begins[handler...].first { $0["name"] as? String == "sleep" })
        #expect(try #require(nextSleep["ts"] as? Double) >= handlerTime + 7_000)
    }

    /// A tracer made inside a callout of a run saw neither that run's entry nor the callout's start: what it records
    /// nests, from the next pass on. (A regression guard: the run's exit must end no slice the tracer did not begin.)
    @Test func aTracerMadeInsideARunEndsOnlyTheSlicesItBegan() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        var tracer: LoopTracer?
        loop.add(LoopTimer(interval: .milliseconds(1), on: loop.assumeIsolated()) { _ in
            tracer = LoopTracer(loop: loop)
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let events = try self.events(try #require(tracer))
        self.expectWellNested(events)
        #expect(self.slicesWithTheirParents(events).first(where: { $0.first == "timer" }) == ["timer", "pass"])
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

    /// A directory of its own for one test's files, removed after `body`.
    private func inTemporaryDirectory(_ body: (String) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("loopkit-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func recordedTracer(_ loop: Loop, timers: Int) -> LoopTracer {
        let tracer = LoopTracer(loop: loop)
        for _ in 0..<timers {
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        }
        loop.run(mode: .default, before: .distantFuture)
        return tracer
    }

    /// Runs `loop` through one more timer's fire, so that its tracers have more to write.
    private func recordAnotherTimer(on loop: Loop) {
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
    }

    /// Writing again replaces the file whole, by a rename: a reader of the old file keeps the old trace entire (it is
    /// never truncated under it), the new one keeps the old one's permissions, and nothing is left beside it.
    @Test func rewritingATraceReplacesTheFileWholeAndKeepsItsPermissions() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = self.recordedTracer(loop, timers: 1)
        try self.inTemporaryDirectory { directory in
            let path = directory + "/trace.json"
            try tracer.write(toFile: path)
            #expect(chmod(path, 0o600) == 0)
            let first = try #require(FileManager.default.contents(atPath: path))
            let reader = try #require(FileHandle(forReadingAtPath: path))
            defer { try? reader.close() }

            self.recordAnotherTimer(on: loop)
            try tracer.write(toFile: path)

            #expect(try reader.readToEnd() == first, "the old file was replaced, not rewritten under its reader")
            let second = try #require(FileManager.default.contents(atPath: path))
            #expect(second.count > first.count)
            #expect(try JSONSerialization.jsonObject(with: second) is [String: Any])
            var status = stat()
            #expect(stat(path, &status) == 0)
            #expect(status.st_mode & 0o777 == 0o600)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["trace.json"])
        }
    }

    /// A path that is a symbolic link is written through: the link stays a link, and its target holds the trace.
    @Test func aTraceWrittenThroughASymbolicLinkLeavesTheLink() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = self.recordedTracer(loop, timers: 1)
        try self.inTemporaryDirectory { directory in
            let target = directory + "/target.json"
            let link = directory + "/link.json"
            try tracer.write(toFile: target)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
            self.recordAnotherTimer(on: loop)
            try tracer.write(toFile: link)
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target)
            #expect(FileManager.default.contents(atPath: target) == Data(tracer.json().utf8))
        }
    }

    /// The rewritten file keeps the old one's group as well as its bits (a group of the caller's other than its
    /// own, where it has one; any, as root).
    @Test func rewritingATraceKeepsTheFilesGroup() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = self.recordedTracer(loop, timers: 1)
        var groups = [gid_t](repeating: 0, count: Int(getgroups(0, nil)))
        groups = Array(groups.prefix(Int(getgroups(Int32(groups.count), &groups))))
        let otherGroup = geteuid() == 0 ? getegid() &+ 1 : groups.first { $0 != getegid() } ?? getegid()
        try self.inTemporaryDirectory { directory in
            let path = directory + "/trace.json"
            try tracer.write(toFile: path)
            #expect(chown(path, uid_t.max, otherGroup) == 0)
            #expect(chmod(path, 0o640) == 0)
            var before = stat()
            #expect(stat(path, &before) == 0)
            try tracer.write(toFile: path)
            var status = stat()
            #expect(stat(path, &status) == 0)
            #expect(status.st_ino != before.st_ino, "replaced by a rename, not written in place")
            #expect(status.st_gid == otherGroup)
            #expect(status.st_mode & 0o777 == 0o640)
        }
    }

    /// A file that cannot be renamed over (a single file bind-mounted into a container: rename(2) says EBUSY or
    /// EXDEV) is written in place instead.
    @Test func aFileThatCannotBeRenamedOverIsWrittenInPlace() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = self.recordedTracer(loop, timers: 1)
        try self.inTemporaryDirectory { directory in
            let path = directory + "/trace.json"
            try tracer.write(toFile: path)
            self.recordAnotherTimer(on: loop)
            defer { SystemCallFaults.clearForCurrentThread() }
            for code in [EBUSY, EXDEV] {
                #expect(truncate(path, 0) == 0)  // so that each round must write the trace
                SystemCallFaults.inject(code, into: "rename")
                try tracer.write(toFile: path)
                #expect(SystemCallFaults.remainingForCurrentThread == 0)
                #expect(FileManager.default.contents(atPath: path) == Data(tracer.json().utf8))
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["trace.json"])
            }
        }
    }

    /// A write that fails at the rename leaves the previous trace as it was, and no file beside it.
    @Test func aFailedRewriteLeavesThePreviousTrace() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tracer = self.recordedTracer(loop, timers: 1)
        try self.inTemporaryDirectory { directory in
            let path = directory + "/trace.json"
            try tracer.write(toFile: path)
            let first = FileManager.default.contents(atPath: path)
            self.recordAnotherTimer(on: loop)
            defer { SystemCallFaults.clearForCurrentThread() }
            SystemCallFaults.inject(EIO, into: "rename")
            #expect(throws: SystemCallError(call: "rename", code: EIO)) { try tracer.write(toFile: path) }
            #expect(FileManager.default.contents(atPath: path) == first)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["trace.json"])
        }
    }
}
