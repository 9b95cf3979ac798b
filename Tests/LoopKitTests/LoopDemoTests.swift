import Foundation
import LoopKit
import Testing
@testable import loop_demo

/// The demo's session logic, run on the manual clock (a whole session in virtual time, at once), and its command line.
@Suite("loop-demo")
struct LoopDemoTests {
    /// Runs the standard 3 s scripted session on a manual clock, the touches played by timers on the loop.
    private func runScriptedSession(fps: Int = 60, trace path: String? = nil) throws -> TrackingSummary {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = try path.map { try DemoTrace(path: $0, loop: loop) }
        let duration = TrackingDemo.defaultDuration
        let input = ScriptedTouchInput(script: .standard(duration: duration), playback: .loopTimers)
        let session = TrackingSession(loop: loop, configuration: .init(fps: fps, duration: duration), input: input)
        let summary = try session.run()
        if let trace {
            #expect(trace.finish() != nil)
        }
        return summary
    }

    // MARK: The tracking session

    @Test func theDefaultModeTimerDoesNotFireDuringTheDragButTheCommonItemsDo() throws {
        let summary = try self.runScriptedSession()
        #expect(summary.segments.map(\.name) == ["before", "drag", "after"])
        #expect(summary.segments.map(\.mode) == [.default, .tracking, .default])
        let drag = summary.segments[1]
        #expect(drag.fires(of: .defaultTimer) == 0)
        for segment in summary.segments {
            #expect(segment.fires(of: .commonTimer) > 0, "common-mode timer in \(segment.name)")
            #expect(segment.fires(of: .displayLink) > 0, "display link in \(segment.name)")
        }
        #expect(summary.segments[0].fires(of: .defaultTimer) > 0)
        #expect(summary.segments[2].fires(of: .defaultTimer) > 0)
        #expect(summary.showsTheLesson)
        #expect(!summary.interrupted)
    }

    @Test func onTheManualClockTheSegmentsLastExactlyAsScriptedAndTheCountsFollow() throws {
        let summary = try self.runScriptedSession()
        // Touch-down at 0.9 s, touch-up at 2.1 s: nothing else takes virtual time.
        #expect(summary.segments.map(\.seconds) == [0.9, 1.2, 0.9])
        // A 10 Hz timer in `common` fires on its slots 1.0 ... 2.1 s while the loop runs `tracking`.
        #expect(summary.segments[1].fires(of: .commonTimer) == 12)
        // 1.2 s at 60 Hz.
        #expect(summary.segments[1].fires(of: .displayLink) == 72)
        #expect(summary.seconds == 3)
    }

    @Test func aDisplayLinkAt120HertzDrawsTwiceAsManyFrames() throws {
        let summary = try self.runScriptedSession(fps: 120)
        #expect(summary.segments[1].fires(of: .displayLink) == 144)
        #expect(summary.segments[1].fires(of: .defaultTimer) == 0)
    }

    @Test func quittingDuringADragEndsTheNestedAndTheOuterRun() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let input = ScriptedTouchInput(script: .standard(duration: .seconds(3)), playback: .loopTimers)
        let session = TrackingSession(loop: loop, configuration: .init(), input: input)
        let start = clock.now
        // What Ctrl-C does, through InterruptSignal's source: quit on the loop's thread, here in the drag.
        let interrupt = LoopTimer(fireAt: start + .milliseconds(1500), on: loop.assumeIsolated()) { _ in
            session.quit(interruptedBy: SIGINT)
        }
        loop.add(interrupt, forMode: .common)
        let summary = try session.run()
        #expect(summary.interrupted)
        #expect(summary.segments.map(\.name) == ["before", "drag"])
        #expect(clock.now - start == .milliseconds(1500))
        #expect(!session.isDragging)
    }

    /// Runs an interactive session on a manual clock whose keys are typed at the given milliseconds from its start.
    private func runKeyboardSession(typing keys: [(milliseconds: Int, key: String)]) throws -> TrackingSummary {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let pipe = try DemoPipe()
        let session = TrackingSession(loop: loop, configuration: .init(duration: nil),
                                      input: KeyboardTouchInput(descriptor: pipe.readEnd))
        let start = clock.now
        for (milliseconds, key) in keys {
            loop.add(LoopTimer(fireAt: start + .milliseconds(milliseconds)) { _ in pipe.write(Array(key.utf8)) },
                     forMode: .common)
        }
        return try session.run()
    }

    @Test func theKeyboardStartsAndEndsADragAndQQuits() throws {
        let summary = try self.runKeyboardSession(typing: [(500, "\n"), (1000, "\n"), (1500, "q")])
        #expect(summary.segments.map(\.name) == ["before", "drag", "after"])
        #expect(summary.segments.map(\.seconds) == [0.5, 0.5, 0.5])
        #expect(summary.segments[1].fires(of: .defaultTimer) == 0)
        #expect(summary.segments[1].fires(of: .commonTimer) > 0)
        #expect(!summary.interrupted)
    }

    /// A drag shorter than the timers' interval (Enter pressed twice at once) shows nothing: the verdict says so,
    /// instead of stating the lesson over counts of zero.
    @Test func aDragTooShortForTheTimersGetsNoLesson() throws {
        let summary = try self.runKeyboardSession(typing: [(500, "\n"), (530, "\n"), (1000, "q")])
        #expect(summary.segments.map(\.name) == ["before", "drag", "after"])
        #expect(!summary.hasATellingDrag)
        #expect(!summary.showsTheLesson)
        let verdict = TrackingReport(summary: summary, palette: Palette(isEnabled: false)).verdict()
        #expect(verdict.contains("Too short to tell"), "\(verdict)")
        #expect(!verdict.contains("keeps animating"), "\(verdict)")
    }

    @Test func touchEventsSurviveTheirWireRecord() {
        let event = TouchEvent(phase: .moved, x: 115, y: 300)
        #expect(event.record.count == TouchEvent.recordSize)
        #expect(TouchEvent(record: event.record) == event)
        #expect(TouchEvent(record: Array("X 0001 0002\n".utf8)) == nil)
    }

    @Test func theTimelineMarksTheDragAndShowsNoDefaultTimerFireInIt() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let input = ScriptedTouchInput(script: .standard(duration: .seconds(3)), playback: .loopTimers)
        let session = TrackingSession(loop: loop, configuration: .init(), input: input)
        var timeline: Timeline?
        session.onStart = { timeline = Timeline(origin: $0, duration: .seconds(3)) }
        session.onFire = { timeline?.record($0, at: $1) }
        let summary = try session.run()
        let lines = try #require(timeline).lines(now: clock.now, segments: summary.segments,
                                                 palette: Palette(isEnabled: false))
        #expect(lines.count == 5)  // ruler, mode, three items
        #expect(lines[0].hasPrefix(String(repeating: " ", count: Timeline.labelWidth) + "0s"))
        let grid = { (line: String) in Array(line.dropFirst(Timeline.labelWidth).prefix(60)) }
        let mode = grid(lines[1])
        let feed = grid(lines[2])
        #expect(String(mode).contains("tracking"))
        let dragColumns = mode.indices.filter { mode[$0] != "─" }
        #expect(dragColumns == Array(18..<42))  // 0.9 s to 2.1 s at 50 ms a column
        #expect(dragColumns.allSatisfy { feed[$0] != "█" || $0 == 18 })  // column 18 holds the fire at 0.9 s
    }

    // MARK: JSON and trace

    @Test func theJSONSummaryParsesAndHasExactlyTheSchema() throws {
        let summary = try self.runScriptedSession()
        let object = try JSONSerialization.jsonObject(with: Data(summary.json().utf8))
        let top = try #require(object as? [String: Any])
        #expect(Set(top.keys) == ["segments", "fps", "seconds", "interrupted"])
        #expect(top["fps"] as? Int == 60)
        let segments = try #require(top["segments"] as? [[String: Any]])
        #expect(segments.count == 3)
        for segment in segments {
            #expect(Set(segment.keys) == ["name", "mode", "seconds", "fires"])
            #expect(segment["seconds"] is Double)
            let fires = try #require(segment["fires"] as? [String: Int])
            #expect(Set(fires.keys) == ["defaultTimer", "commonTimer", "displayLink"])
            let name = try #require(segment["name"] as? String)
            #expect(segment["mode"] as? String == (name == "drag" ? "tracking" : "default"))
            #expect(fires["defaultTimer"].map { name == "drag" ? $0 == 0 : $0 > 0 } == true)
            #expect(fires["commonTimer"].map { $0 > 0 } == true)
            #expect(fires["displayLink"].map { $0 > 0 } == true)
        }
    }

    @Test func theTraceFileOfADemoRunIsTraceEventJSONWithWellNestedSlices() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("loop-demo-\(UUID()).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try self.runScriptedSession(trace: path)

        let data = try #require(FileManager.default.contents(atPath: path))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let events = try #require(object["traceEvents"] as? [[String: Any]])
        var stack: [String] = []
        var lastTime = -Double.infinity
        var trackingInsideDescriptor = false
        for event in events {
            let phase = try #require(event["ph"] as? String)
            guard phase != "M" else { continue }
            let time = try #require(event["ts"] as? Double)
            #expect(time >= lastTime)
            lastTime = time
            let name = try #require(event["name"] as? String)
            if phase == "B" {
                if name == "run tracking" {
                    trackingInsideDescriptor = stack.last?.hasPrefix("descriptor") == true
                }
                stack.append(name)
            } else if phase == "E" {
                #expect(stack.popLast() == name)
            }
        }
        #expect(stack.isEmpty)
        // The drag's nested run lies inside the input source's callout that read the touch-down.
        #expect(trackingInsideDescriptor)
    }

    // MARK: Hitches and phases

    @Test func theHitchesSessionRatesItsThreeSecondsGoodWarningCritical() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let session = HitchesSession(loop: loop, workUntil: { clock.advance(to: $0) })
        let total = session.run()
        #expect(total.hitches == 4)
        #expect(total.skippedFrames == 5)  // 11 and 11.5 ms: one frame each; 22 ms: two
        #expect(session.seconds.map(\.report.rating) == [.good, .warning, .critical])
        #expect(session.seconds.map(\.report.hitches) == [1, 2, 1])
        #expect(session.seconds.map(\.report.frames).reduce(0, +) == total.frames)
        #expect(total.rating == .warning)
        #expect(session.heavyFramesRun.count == 4)
    }

    @Test(.timeLimit(.minutes(1)))
    func thePhasesTourShowsEachKindOfWorkInItsPlaceInThePass() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let events = try PhasesTour(loop: loop).run()
        let handled = events.compactMap { event -> String? in
            if case .handled(let item, _) = event.kind { return item }
            return nil
        }
        #expect(handled == ["block", "timer", "source", "descriptor", "block"])
        #expect(events.first?.kind == .activity(.entry))
        #expect(events.last?.kind == .activity(.exit))
        // Each handled item, and the activity just before it: blocks and sources after beforeSources, the timer and
        // the descriptor source after waking, and the descriptor handler's block right after it in the same pass.
        let preceding = events.indices.compactMap { index -> String? in
            guard case .handled(let item, _) = events[index].kind, index > 0 else { return nil }
            switch events[index - 1].kind {
            case .activity(let activity): return "\(activity) \(item)"
            case .handled(let previous, _): return "\(previous) \(item)"
            }
        }
        // The helper writes 15 ms after the source ran: a loop thread held up that long (a loaded machine) finds the
        // byte in the look of the source's own pass, without a sleep in between.
        let descriptorStep = ["afterWaiting descriptor", "source descriptor"]
        #expect(preceding.count == 5 && descriptorStep.contains(preceding[3]))
        #expect(preceding.enumerated().filter { $0.offset != 3 }.map(\.element)
            == ["beforeSources block", "afterWaiting timer", "beforeSources source", "descriptor block"])
    }

    @Test func thePhasesTableSaysWhatEndedEachSleep() {
        typealias Event = PhasesTour.Event
        let events = [
            Event(time: .zero, kind: .activity(.entry)),
            Event(time: .zero, kind: .activity(.beforeTimers)),
            Event(time: .zero, kind: .activity(.beforeSources)),
            Event(time: .zero, kind: .handled(item: "block", detail: "queued with perform before the run")),
            Event(time: .zero, kind: .activity(.beforeWaiting)),
            Event(time: .milliseconds(5), kind: .activity(.afterWaiting)),
            Event(time: .milliseconds(5), kind: .activity(.beforeTimers)),
            Event(time: .milliseconds(5), kind: .activity(.beforeSources)),
            Event(time: .milliseconds(5), kind: .handled(item: "signal", detail: "Ctrl-C arrived")),
            Event(time: .milliseconds(5), kind: .activity(.exit)),
        ]
        let table = PhasesDemo(options: .init()).table(events, result: .stopped, palette: Palette(isEnabled: false))
        // A pass that ran only a block sleeps: blocks do not count as handled sources (CF's rule).
        #expect(table.contains("no source was handled (blocks do not count)"))
        #expect(table.contains("slept 5.000 ms; woken by the signal"))
        #expect(!table.contains("nothing was handled"))
    }

    // MARK: Command line

    @Test func argumentsParseIntoCommandsWithTheirOptions() throws {
        #expect(try DemoCommand.parse([]) == .tracking(.init()))
        var tracking = DemoCommand.TrackingOptions()
        tracking.fps = 120
        tracking.duration = .seconds(5)
        tracking.json = true
        tracking.common.tracePath = "t.json"
        #expect(try DemoCommand.parse(["tracking", "--fps=120", "--duration", "5", "--json", "--trace", "t.json"])
            == .tracking(tracking))
        #expect(try DemoCommand.parse(["phases", "--no-color"]) == .phases(.init(tracePath: nil, noColor: true)))
        #expect(try DemoCommand.parse(["hitches", "--duration=2"]) == .hitches(.init(duration: .seconds(2))))
        #expect(try DemoCommand.parse(["hitches", "--help"]) == .help(.hitches))
        #expect(try DemoCommand.parse(["--fps", "120", "--help"]) == .help(.tracking))  // the default command's own
        #expect(try DemoCommand.parse(["--help"]) == .help(nil))
        #expect(try DemoCommand.parse(["-h"]) == .help(nil))
        #expect(try DemoCommand.parse(["help", "phases"]) == .help(.phases))
        #expect(try DemoCommand.parse(["help", "--help"]) == .help(nil))
        #expect(try DemoCommand.parse(["help", "tracking", "-h"]) == .help(.tracking))
    }

    @Test(arguments: [
        ["bogus"], ["--bogus"], ["--fps", "90"], ["--fps"], ["--duration", "0"], ["--duration", "x"],
        ["phases", "--fps", "60"], ["hitches", "--json"], ["--interactive", "--json"], ["tracking", "extra"],
        ["help", "nothing"], ["--json=yes"],
    ])
    func aUsageMistakeExitsWithStatus2(arguments: [String]) {
        #expect(DemoMain.run(arguments: arguments) == DemoMain.usageError)
    }

    @Test(arguments: [
        (["phases", "--duration=5"], "unknown option '--duration' for 'phases'"),
        (["echo", "--trace=t.json"], "unknown option '--trace' for 'echo'"),
        (["--port=1"], "unknown option '--port' for 'tracking'"),
        (["--json=yes"], "--json takes no value"),
        (["main-queue", "--foundation=1"], "--foundation takes no value"),
        (["phases", "--trace="], "--trace needs a file name"),
    ])
    func aUsageMistakeIsNamedForWhatItIs(arguments: [String], message: String) {
        #expect(throws: DemoCommand.UsageError(description: message)) { try DemoCommand.parse(arguments) }
    }

    @Test func helpExitsWithStatus0() {
        #expect(DemoMain.run(arguments: ["phases", "--help"]) == DemoMain.success)
    }
}
