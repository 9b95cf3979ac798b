import Foundation
import Testing
@testable import LoopKit

/// Data-race safety at the API: non-`Sendable` state reaches a loop's thread only through `LoopBound` or the
/// isolated view, both checked at run time to be on that thread.
///
/// What the compiler refuses (kept as a comment, since a test cannot fail to compile):
///
/// ```swift
/// final class Counter { var count = 0 }
/// let counter = Counter()
/// loop.perform { counter.count += 1 }
/// // error: capture of 'counter' with non-Sendable type 'Counter' in a '@Sendable' closure
///
/// var fires = 0
/// let timer = LoopTimer(interval: .seconds(1)) { _ in fires += 1 }   // items may be made and added on any thread
/// // error: mutation of captured var 'fires' in concurrently-executing code
/// ```
@Suite("Loop-bound values and the isolated view", .serialized)
struct LoopBoundTests {
    /// Deliberately not `Sendable`.
    final class Counter {
        var count = 0
    }

    @Test func aBoundValueIsReadAndWrittenOnItsLoopsThreadFromSendableClosures() throws {
        let thread = try LoopThread(name: "bound")
        let loop = thread.loop
        let seen = Recorder<Int>()
        loop.perform {
            let counter = LoopBoundBox(Counter(), loop: loop)
            onAnotherThread {
                for _ in 0..<3 {
                    loop.perform { counter.value.count += 1 }
                }
                loop.perform { seen.append(counter.value.count) }
            }
        }
        #expect(waitUntil { seen.count == 1 })
        #expect(seen.elements == [3])
        thread.shutdownAndJoin()
    }

    /// Deliberately not `Sendable`: tells on which thread it was let go of.
    final class Tracked {
        let loop: Loop
        let freedOnItsLoop: Recorder<Bool>

        init(loop: Loop, freedOnItsLoop: Recorder<Bool>) {
            self.loop = loop
            self.freedOnItsLoop = freedOnItsLoop
        }

        deinit {
            self.freedOnItsLoop.append(self.loop.isCurrent)
        }
    }

    @Test func aBoxFreedOnAnotherThreadLetsGoOfItsValueOnTheLoopsThread() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(keepAliveTimer(), forMode: .default)
        let freedOnItsLoop = Recorder<Bool>()
        var box: LoopBoundBox<Tracked>? = LoopBoundBox(Tracked(loop: loop, freedOnItsLoop: freedOnItsLoop), loop: loop)
        let last = LoopBoundBoxHandOff(box: box!)
        box = nil
        onAnotherThread { last.drop() }  // the last reference goes there
        #expect(freedOnItsLoop.elements.isEmpty, "not let go of off the loop's thread")
        loop.run(mode: .default, before: loop.now + .milliseconds(100))  // the pass that lets go of it
        #expect(freedOnItsLoop.elements == [true])
    }

    @Test func theIsolatedViewTakesClosuresThatAreNotSendable() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let counter = Counter()
        let isolated = loop.assumeIsolated()
        isolated.perform { counter.count += 1 }
        isolated.schedule(after: .milliseconds(5)) { counter.count += 10 }
        loop.run(mode: .default, before: loop.now + .seconds(1))
        #expect(counter.count == 11)
    }

    @Test func itemsMadeOnTheIsolatedViewTakeClosuresThatAreNotSendable() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let isolated = loop.assumeIsolated()
        let counter = Counter()
        var activities: [LoopActivity] = []
        let pipe = try TestPipe()
        loop.add(LoopTimer(interval: .milliseconds(5), on: isolated) { _ in counter.count += 1 }, forMode: .default)
        loop.add(LoopObserver(activities: .entry, repeats: false, on: isolated) { _, activity in
            activities.append(activity)
        }, forMode: .default)
        let source = LoopSource(on: isolated) { source in
            counter.count += 10
            source.invalidate()
        }
        loop.add(source, forMode: .default)
        source.signal()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable, on: isolated) { source, _ in
            counter.count += 100
            source.invalidate()
        }, forMode: .default)
        pipe.write()
        #expect(loop.run(mode: .default, before: loop.now + .seconds(1)) == .finished)
        #expect(counter.count == 111)
        #expect(activities == [.entry])
    }

    @Test func anItemMadeForOneLoopAndAddedToAnotherTrapsAtItsFirstCallout() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            func onTheWrongLoop() throws {
                let mine = try Loop(clock: ManualLoopClock())
                let counter = Counter()
                let timer = LoopTimer(interval: .milliseconds(1), on: mine.assumeIsolated()) { _ in counter.count += 1 }
                let thread = try LoopThread(name: "other")
                thread.loop.add(timer, forMode: .default)
                thread.join()
            }
            try onTheWrongLoop()
        }
        #expect(result?.standardErrorText.contains(
            "LoopTimer(…, on:) callback, added to another loop must be called on the loop's own thread") == true)
    }

    @Test func touchingABoundValueOffItsLoopsThreadTrapsNamingTheCall() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            func offTheLoopsThread() throws {
                let loop = try Loop()
                let bound = LoopBound(0, loop: loop)
                onAnotherThread { _ = bound.value }
            }
            try offTheLoopsThread()
        }
        #expect(result?.standardErrorText.contains("LoopBound.value must be called on the loop's own thread") == true)
    }

    @Test func theIsolatedViewOffTheLoopsThreadTrapsNamingTheCall() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            func offTheLoopsThread() throws {
                let loop = try Loop()
                onAnotherThread { _ = loop.assumeIsolated() }
            }
            try offTheLoopsThread()
        }
        #expect(result?.standardErrorText.contains("Loop.assumeIsolated() must be called on the loop's own thread")
                == true)
    }
}

/// Holds the last reference to a box until `drop()`, on whatever thread calls it.
final class LoopBoundBoxHandOff<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var box: LoopBoundBox<Value>?

    init(box: LoopBoundBox<Value>) {
        self.box = box
    }

    func drop() {
        let box = self.lock.withLock { () -> LoopBoundBox<Value>? in
            defer { self.box = nil }
            return self.box
        }
        _ = box
    }
}
