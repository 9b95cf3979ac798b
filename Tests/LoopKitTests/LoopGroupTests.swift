import Dispatch
import Synchronization
import Testing
@testable import LoopKit

/// A group of loop threads for a server: round-robin, the caller's own loop, a sticky graceful shutdown that joins
/// every thread and reports completion. Real threads: order and conditions only.
@Suite("Loop groups", .serialized, .timeLimit(.minutes(1)))
struct LoopGroupTests {
    @Test func nextHandsOutTheLoopsRoundRobin() throws {
        let group = try LoopGroup(name: "rr", threadCount: 3)
        defer { group.syncShutdownGracefully() }
        let handed = (0..<6).map { _ in group.next() }
        #expect(handed.map(ObjectIdentifier.init) == (group.loops + group.loops).map(ObjectIdentifier.init))
    }

    @Test func theDefaultIsOneLoopPerProcessor() throws {
        let group = try LoopGroup()
        defer { group.syncShutdownGracefully() }
        #expect(group.loops.count == PlatformThread.processorCount)
    }

    @Test func anyOnAGroupThreadIsThatThreadsLoop() throws {
        let group = try LoopGroup(name: "any", threadCount: 2)
        defer { group.syncShutdownGracefully() }
        let seen = Recorder<Bool>()
        for loop in group.loops {
            loop.perform { seen.append(group.any() === loop) }
        }
        #expect(waitUntil { seen.count == 2 })
        #expect(seen.elements == [true, true])
        #expect(group.loops.contains { $0 === group.any() })  // from a thread of no group: one of the loops
    }

    @Test func everyShutdownCallReportsCompletionOnceAfterTheThreadsEnded() throws {
        let group = try LoopGroup(name: "twice", threadCount: 2)
        let ranBeforeShutdown = Recorder<Int>()
        for (index, loop) in group.loops.enumerated() {
            loop.perform { ranBeforeShutdown.append(index) }
        }
        let completions = Recorder<Int>()
        group.shutdownGracefully { completions.append(1) }
        group.shutdownGracefully { completions.append(2) }
        #expect(waitUntil { completions.count == 2 })
        #expect(Set(completions.elements) == [1, 2])
        #expect(Set(ranBeforeShutdown.elements) == [0, 1])  // blocks queued before the shutdown still ran
        #expect(waitUntil { group.hasShutDown })  // every completion has returned
        group.shutdownGracefully { completions.append(3) }  // after the end: at once
        #expect(completions.elements.last == 3)
        #expect(group.isShuttingDown)
    }

    @Test func aCompletionRecordedWhileEarlierOnesRunIsCalledAfterThemNotAtOnce() throws {
        let group = try LoopGroup(name: "order", threadCount: 2)
        let order = Recorder<Int>()
        let firstIsRunning = DispatchSemaphore(value: 0)
        let releaseFirst = DispatchSemaphore(value: 0)
        group.shutdownGracefully {
            firstIsRunning.signal()
            releaseFirst.wait()
            order.append(1)
        }
        firstIsRunning.wait()  // the joining thread is calling completions: the group has not shut down yet
        group.shutdownGracefully { order.append(2) }
        #expect(order.elements.isEmpty)  // not called at once, ahead of the first
        releaseFirst.signal()
        #expect(waitUntil { order.count == 2 })
        #expect(order.elements == [1, 2])
        #expect(waitUntil { group.hasShutDown })
        group.shutdownGracefully { order.append(3) }
        #expect(order.elements == [1, 2, 3])
    }

    @Test func aSyncShutdownInsideACompletionReturnsWithoutWaitingForItself() throws {
        let group = try LoopGroup(name: "nested", threadCount: 2)
        let done = DispatchSemaphore(value: 0)
        group.shutdownGracefully {
            group.syncShutdownGracefully()  // every thread has ended, which is all it waits for
            done.signal()
        }
        #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
    }

    @Test func aShutdownRightAfterStartEndsEveryThread() async throws {
        let group = try LoopGroup(name: "early", threadCount: 4)
        await group.shutdownGracefully()
        #expect(group.isShuttingDown)
    }

    @Test func threadsAreNamedAfterTheGroupAndTheirIndex() throws {
        let group = try LoopGroup(name: "named", threadCount: 2)
        defer { group.syncShutdownGracefully() }
        let names = Recorder<String>()
        for loop in group.loops {
            loop.perform { names.append(PlatformThread.currentName ?? "?") }
        }
        #expect(waitUntil { names.count == 2 })
        #expect(Set(names.elements) == ["named-0", "named-1"])
    }

    /// Linux keeps 15 bytes of a thread's name: a long group name is cut, never the index.
    @Test func aLongGroupNameIsCutSoThatEveryThreadKeepsItsIndex() {
        #expect(LoopGroup.threadName("abcdefghijklmn", 0) == "abcdefghijklm-0")
        #expect(LoopGroup.threadName("abcdefghijklmn", 12) == "abcdefghijkl-12")
        #expect(LoopGroup.threadName("server", 3) == "server-3")
        #expect(LoopGroup.threadName("ééééééééé", 1).utf8.count <= 15)
    }
}
