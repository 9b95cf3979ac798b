import Foundation
import Testing
@testable import LoopKit

/// DESIGN.md's promises at the edges its other tests leave out (an audit of DESIGN against the suite): work queued at
/// the last moment before a real sleep, a stop from another thread during a nested run, a link slower than its
/// display, removal releasing every kind of item, and a child process waited on through a descriptor.
@Suite("DESIGN at its edges", .serialized, .timeLimit(.minutes(1)))
struct DesignEdgeTests {
    enum LastMomentWork: String, CaseIterable, CustomTestStringConvertible {
        case block
        case signal
        case dueTimer

        var testDescription: String { self.rawValue }
    }

    /// §2 step 4 and §1: a `beforeWaiting` observer that queues work (a block, a signal, a timer already due) on the
    /// real waiter does not lose its wake-up: the sleep that follows ends at once, after `afterWaiting`, and the work
    /// runs in the pass after it (a lost wake-up would sleep to the 30 s deadline: `.timedOut`, not `.stopped`).
    @Test(arguments: LastMomentWork.allCases)
    func workQueuedByABeforeWaitingObserverEndsTheSleepThatFollows(_ work: LastMomentWork) throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let keepAlive = LoopTimer(interval: .seconds(3600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        let trace = Recorder<String>()
        let source = LoopSource { _ in
            trace.append("work")
            loop.stop()
        }
        loop.add(source, forMode: .default)
        let queued = AtomicCounter()
        loop.add(LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
            trace.append("\(activity)")
            guard activity == .beforeWaiting, queued.current == 0 else { return }
            queued.increment()
            switch work {
            case .block:
                loop.perform {
                    trace.append("work")
                    loop.stop()
                }
            case .signal:
                source.signal()
            case .dueTimer:
                loop.add(LoopTimer(interval: .zero) { _ in
                    trace.append("work")
                    loop.stop()
                }, forMode: .default)
            }
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .stopped)
        #expect(trace.elements == ["beforeWaiting", "afterWaiting", "work"])
        source.invalidate()
    }

    /// §3: `stop()` from another thread while the loop is nested in `tracking` ends the nested run only; the outer run
    /// goes on in its own mode (a timer of `default` fires after), and ends on its own terms.
    @Test func aStopFromAnotherThreadEndsOnlyTheNestedRunAndTheOuterRunGoesOn() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let keepAlive = LoopTimer(interval: .seconds(3600)) { _ in }
        loop.add(keepAlive, forMode: .common)
        let trace = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
            let stopper = startThread {
                guard waitUntil({ loop.isWaiting }) else { return }
                loop.stop()
            }
            trace.append("nested: \(loop.run(mode: .tracking, before: loop.now + .seconds(30)))")
            stopper.join()
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in
                trace.append("the outer run went on")
                keepAlive.invalidate()  // the mode empties: the outer run finishes
            }, forMode: .default)
        }, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .finished)
        #expect(trace.elements == ["nested: stopped", "the outer run went on"])
    }

    /// §4: a 60 Hz link on the default 120 Hz display fires every other refresh, with a budget of one 60 Hz frame,
    /// and an overrun shows as skipped frames of the link's own rate.
    @Test func aSixtyHertzLinkOnTheDefaultDisplayFiresEveryOtherRefresh() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        var frames: [DisplayFrame] = []
        let link = LoopDisplayLink(preferredRate: 60, on: loop.assumeIsolated()) { link, frame in
            frames.append(frame)
            if frames.count == 3 { clock.advance(by: .milliseconds(40)) }  // an overrun of two and a bit 60 Hz frames
            if frames.count == 6 { link.invalidate() }
        }
        loop.add(link, forMode: .default)
        loop.run(mode: .default, before: .distantFuture)
        let refresh = LoopDisplay.default.frameDuration(refreshesPerFrame: 1)
        #expect(link.frameDuration == refresh * 2)
        // Two refreshes, to the nanosecond the grid's rounding allows.
        #expect(frames.allSatisfy { abs(($0.duration - refresh * 2) / .nanoseconds(1)) <= 1 })
        #expect(frames[1].timestamp == frames[0].targetTimestamp)
        #expect(frames[1].index == frames[0].index + 1)
        #expect(frames[3].skippedFrames == 2, "40 ms late: two 60 Hz frames passed without a callback")
        #expect(frames.map(\.skippedFrames).reduce(0, +) == 2)
    }

    /// §3 "Invalidated or removed items are released at once": removal from the only mode lets go of an observer and a
    /// descriptor source at once, as it does of timers, signalled sources and links.
    @Test func anObserverOrADescriptorSourceRemovedFromItsOnlyModeIsFreedAtOnce() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        weak var weakObserver: LoopObserver?
        weak var weakSource: LoopDescriptorSource?
        do {
            let observer = LoopObserver(activities: .beforeWaiting) { _, _ in }
            let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }
            weakObserver = observer
            weakSource = source
            loop.add(observer, forMode: .default)
            loop.add(source, forMode: .default)
            loop.runOnePass()
            loop.remove(observer, forMode: .default)
            loop.remove(source, forMode: .default)
        }
        #expect(weakObserver == nil)
        #expect(weakSource == nil)
    }

    /// §5: a tool waits on a child process through a descriptor source: its output pipe's data, then its end of file
    /// when it exits; the loop then has nothing left and finishes.
    @Test func aChildProcessIsWaitedOnThroughItsOutputPipe() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "printf 'hello'; exit 3"]
        let output = Pipe()
        process.standardOutput = output
        let descriptor = output.fileHandleForReading.fileDescriptor
        let received = Recorder<UInt8>()
        let source = LoopDescriptorSource(descriptor: descriptor, events: .readable) { source, _ in
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = read(descriptor, &buffer, buffer.count)
            if count > 0 {
                buffer.prefix(count).forEach(received.append)
            } else {
                source.invalidate()  // end of file: the child closed its end, at exit
            }
        }
        loop.add(source, forMode: .default)
        try process.run()
        try? output.fileHandleForWriting.close()  // the parent's copy: only the child's keeps the pipe open
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .finished)
        process.waitUntilExit()
        #expect(String(decoding: received.elements, as: UTF8.self) == "hello")
        #expect(process.terminationStatus == 3)
    }
}
