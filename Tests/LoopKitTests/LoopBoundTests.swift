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
