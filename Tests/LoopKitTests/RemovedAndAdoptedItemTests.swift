#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

/// Items taken out of modes, moved to a new loop after theirs ended, and a pass whose poll a nested run made stale:
/// nothing is kept alive, nothing is called twice, and removal finds the item it names.
@Suite("Removed and adopted items", .timeLimit(.minutes(1)))
struct RemovedAndAdoptedItemTests {
    final class Payload: Sendable {}

    /// A loop whose default mode holds a source that reads all of a pipe at each call, recording what it read.
    private func loopReadingAPipe() throws -> (Loop, TestPipe, Recorder<String>) {
        let loop = try Loop()
        let pipe = try TestPipe()
        let reads = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            reads.append(pipe.readAll())
        }, forMode: .default)
        return (loop, pipe, reads)
    }

    /// A timer's callback runs the loop nested; the nested run polls again and its handler reads the one byte. The
    /// outer pass, whose poll found the descriptor ready before the timer fired, must not call the handler again
    /// on that stale report.
    @Test func aNestedRunInATimerCallbackMakesTheOuterPassForgetItsPoll() throws {
        let (loop, pipe, reads) = try self.loopReadingAPipe()
        defer { loop.invalidate() }
        pipe.write()
        loop.add(LoopTimer(fireAt: loop.now) { _ in
            loop.run(mode: .default, before: loop.now)
        }, forMode: .default)
        loop.run(mode: .default, before: loop.now + .milliseconds(20))
        #expect(reads.elements == ["x"], "one call, which read the byte; no second call on the stale report")
    }

    /// An `afterWaiting` observer, woken by the byte, does the same.
    @Test func aNestedRunInAnAfterWaitingObserverMakesTheOuterPassForgetItsPoll() throws {
        let (loop, pipe, reads) = try self.loopReadingAPipe()
        defer { loop.invalidate() }
        let isNested = LoopLock(false)
        let observer = LoopObserver(activities: .afterWaiting) { observer, _ in
            var probe = pollfd(fd: pipe.readEnd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 0) == 1 else { return }  // a wake for the stopper
            observer.invalidate()
            isNested.withLock { $0 = true }
            loop.run(mode: .default, before: loop.now)
            isNested.withLock { $0 = false }
        }
        loop.add(observer, forMode: .default)
        // Ends the outer run once the byte is read, whatever the clock did meanwhile.
        let stopper = LoopTimer(interval: .milliseconds(20), repeats: true) { _ in
            if reads.count > 0 && !isNested.withLock({ $0 }) { loop.stop() }
        }
        loop.add(stopper, forMode: .default)
        let writer = startThread {
            _ = waitUntil { loop.isWaiting }
            pipe.write()
        }
        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
        writer.join()
        stopper.invalidate()
        #expect(reads.elements == ["x"])
    }

    @Test func aSignalledSourceRemovedFromItsOnlyModeIsReleasedAndKeepsItsSignalForALaterAdd() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)  // keeps the mode alive
        weak var weakPayload: Payload?
        weak var weakSource: LoopSource?
        do {
            let payload = Payload()
            weakPayload = payload
            let source = LoopSource { _ in _ = payload }
            weakSource = source
            loop.add(source, forMode: .default)
            source.signal()
            loop.remove(source, forMode: .default)
            loop.run(mode: .default, before: clock.now)
        }
        #expect(weakSource == nil)
        #expect(weakPayload == nil)

        let runs = Recorder<Int>()
        let source = LoopSource { _ in runs.append(1) }
        loop.add(source, forMode: .default)
        source.signal()
        loop.remove(source, forMode: .default)
        loop.run(mode: .default, before: clock.now)
        #expect(runs.elements.isEmpty)
        loop.add(source, forMode: .default)
        loop.run(mode: .default, before: clock.now)
        #expect(runs.elements == [1], "the signal made before the removal runs once the source is back")
    }

    /// As CFRunLoopRemoveSource with kCFRunLoopCommonModes: only an item added to `common` leaves the common modes.
    @Test func removingFromCommonLeavesAnItemAddedToTheModesByName() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let source = LoopSource { _ in }
        loop.add(source, forMode: .default)
        loop.remove(source, forMode: .common)
        #expect(loop.contains(source, inMode: .default))
        loop.add(source, forMode: .common)
        loop.remove(source, forMode: .common)
        #expect(!loop.contains(source, inMode: .default))
        #expect(!loop.contains(source, inMode: .tracking))
    }

    /// An observer numbered by a loop that ended joins a new loop, which numbers it afresh: removing it, or one of
    /// the new loop's own observers, takes out exactly the one named.
    @Test func anItemAdoptedFromAnEndedLoopIsNumberedAfreshSoRemovalFindsIt() throws {
        let first = try Loop()
        let calls = Recorder<String>()
        for index in 1...5 {
            first.add(LoopObserver(activities: .entry) { _, _ in calls.append("old \(index)") }, forMode: .default)
        }
        let adopted = LoopObserver(activities: .entry) { _, _ in calls.append("adopted") }
        first.add(adopted, forMode: .default)  // sequence 6 in `first`
        first.invalidate()

        let second = try Loop()
        defer { second.invalidate() }
        second.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        second.add(adopted, forMode: .default)  // sequence 2 here; 6, that of `own[4]`, if it kept the old number
        var own: [LoopObserver] = []
        for index in 1...6 {
            let observer = LoopObserver(activities: .entry) { _, _ in calls.append("new \(index)") }
            own.append(observer)
            second.add(observer, forMode: .default)
        }
        second.remove(own[4], forMode: .default)
        second.remove(adopted, forMode: .default)
        calls.removeAll()
        second.run(mode: .default, before: second.now)
        #expect(calls.elements == ["new 1", "new 2", "new 3", "new 4", "new 6"])
    }

    /// A source removed from its mode and then signalled is in no mode: no list of the loop keeps it.
    @Test func aSourceSignalledAfterItsRemovalIsReleased() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        weak var weakSource: LoopSource?
        do {
            let source = LoopSource { _ in }
            weakSource = source
            loop.add(source, forMode: .default)
            loop.remove(source, forMode: .default)
            source.signal()
            loop.run(mode: .default, before: clock.now)
        }
        #expect(weakSource == nil)
    }

    /// A signal sent to a source of a loop that has ended is not kept for a pass that will never come.
    @Test func aSourceSignalledAfterItsLoopEndedIsReleased() throws {
        let thread = try LoopThread(name: "signal-after-end")
        weak var weakSource: LoopSource?
        do {
            let source = LoopSource { _ in }
            weakSource = source
            thread.loop.add(source, forMode: .default)
            thread.shutdownAndJoin()
            source.signal()
        }
        #expect(weakSource == nil)
        withExtendedLifetime(thread) {}
    }
}
