import Testing
@testable import LoopKit

/// Descriptor sources (CF's version-1 sources, on any descriptor), on a `ManualLoopClock`: `runOnePass()` polls the
/// descriptors once without blocking.
@Suite("Descriptor sources (CF version 1)")
struct LoopDescriptorSourceTests {
    /// Runs passes of `loop` until `condition` holds (or a hang guard's limit passes).
    ///
    /// For a close that the other end of a pipe must see: a process that a test beside this one spawns at that moment
    /// holds a copy of every descriptor until its exec closes them (they are close-on-exec), so the hang-up or error
    /// comes once that child has exec'd, not always at the first pass.
    private static func runPasses(of loop: Loop, until condition: () -> Bool) -> Bool {
        waitUntil {
            loop.runOnePass()
            return condition()
        }
    }

    // MARK: Readable and writable

    @Test(arguments: DescriptorWaitPath.allCases)
    func aPipeWithDataIsReportedReadable(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }, forMode: .default)
        pipe.write("hello")
        loop.runOnePass()
        #expect(reports.elements == [.readable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func anEmptyPipeIsNotReportedReadable(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }, forMode: .default)
        loop.runOnePass()
        #expect(reports.elements.isEmpty)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func theWriteEndOfAnEmptyPipeIsReportedWritable(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.writeEnd, events: .writable) { _, events in
            reports.append(events)
        }, forMode: .default)
        loop.runOnePass()
        #expect(reports.elements == [.writable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func theHandlerIsCalledWithTheEventsThatHoldAmongThoseWatched(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let sockets = try TestSocketPair()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: sockets.first, events: [.readable, .writable]) { _, events in
            reports.append(events)
        }, forMode: .default)
        loop.runOnePass()
        sockets.send("ping", on: sockets.second)
        loop.runOnePass()
        #expect(reports.elements == [.writable, [.readable, .writable]])
    }

    // MARK: Level-triggered, never read by the loop

    @Test(arguments: DescriptorWaitPath.allCases)
    func theHandlerIsCalledAgainOnEveryPassWhileDataRemains(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<Int>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            calls.append(1)
        }, forMode: .default)
        pipe.write("x")
        for _ in 0..<3 {
            loop.runOnePass()
        }
        #expect(calls.count == 3)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func theHandlerIsNoLongerCalledOnceTheDataIsDrained(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let readByHandler = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            readByHandler.append(pipe.read(count: 1))  // one byte per call
        }, forMode: .default)
        pipe.write("abc")
        for _ in 0..<5 {
            loop.runOnePass()
        }
        #expect(readByHandler.elements == ["a", "b", "c"])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func theLoopNeverReadsTheDescriptorSoTheHandlerFindsAllTheData(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let readByHandler = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            readByHandler.append(pipe.readAll())
        }, forMode: .default)
        pipe.write("12345678")  // CF reads 8 bytes from a version-1 source's descriptor; LoopKit reads none
        pipe.write("hello")
        loop.runOnePass()
        #expect(readByHandler.elements == ["12345678hello"])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func dataTheHandlerLeavesIsStillThereAfterThePass(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<Int>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            calls.append(1)
        }, forMode: .default)
        pipe.write("hello")
        loop.runOnePass()
        loop.runOnePass()
        #expect(calls.count == 2)
        #expect(pipe.readAll() == "hello")
    }

    // MARK: All ready sources, in order, in one pass

    @Test(arguments: DescriptorWaitPath.allCases)
    func allReadySourcesAreCalledInOnePassLowerOrderFirst(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let passes = Recorder<Int>()
        loop.add(LoopObserver(activities: .beforeTimers) { _, _ in passes.append(1) }, forMode: .default)
        let trace = Recorder<Int>()
        var pipes: [TestPipe] = []
        for order in [2, 0, 3, 1] {
            let pipe = try TestPipe()
            pipes.append(pipe)
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable, order: order) { _, _ in
                trace.append(order)
                pipe.readAll()
            }, forMode: .default)
            pipe.write()
        }
        let result = loop.run(mode: .default, before: loop.now + .seconds(1))
        #expect(result == .timedOut)
        #expect(passes.count == 2)  // the pass that called all four, and the one that slept until the deadline
        #expect(trace.elements == [0, 1, 2, 3])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aRunThatReturnsAfterASourceCallsOnlyTheFirstReadySourceAndTheOthersStayReady(
        _ path: DescriptorWaitPath
    ) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<Int>()
        var pipes: [TestPipe] = []
        for order in [2, 0, 3, 1] {
            let pipe = try TestPipe()
            pipes.append(pipe)
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable, order: order) { _, _ in
                trace.append(order)
                pipe.readAll()
            }, forMode: .default)
            pipe.write()
        }
        for expected in [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]] {
            #expect(loop.run(mode: .default, before: loop.now + .seconds(1), returnAfterSourceHandled: true)
                == .handledSource)
            #expect(trace.elements == expected)
        }
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func readySourcesOfEqualOrderAreCalledInTheOrderTheyWereAdded(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        var pipes: [TestPipe] = []
        for name in ["a", "b", "c"] {
            let pipe = try TestPipe()
            pipes.append(pipe)
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
                trace.append(name)
            }, forMode: .default)
        }
        for pipe in pipes.reversed() {  // readiness order does not matter
            pipe.write()
        }
        loop.runOnePass()
        #expect(trace.elements == ["a", "b", "c"])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func onlyTheReadySourcesOfAPassAreCalled(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let quiet = try TestPipe()
        let busy = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: quiet.readEnd, events: .readable) { _, _ in
            trace.append("quiet")
        }, forMode: .default)
        loop.add(LoopDescriptorSource(descriptor: busy.readEnd, events: .readable) { _, _ in
            trace.append("busy")
        }, forMode: .default)
        busy.write()
        loop.runOnePass()
        #expect(trace.elements == ["busy"])
    }

    // MARK: Changing the watched events

    @Test(arguments: DescriptorWaitPath.allCases)
    func changingEventsFromReadableToWritableReportsWritableFromTheNextPass(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let sockets = try TestSocketPair()
        let reports = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: sockets.first, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(source, forMode: .default)
        loop.runOnePass()
        #expect(reports.elements.isEmpty)
        source.events = .writable
        #expect(source.events == .writable)
        loop.runOnePass()
        #expect(reports.elements == [.writable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func changingEventsToNoneStopsReportsUntilTheyAreWatchedAgain(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(source, forMode: .default)
        pipe.write()
        source.events = []
        loop.runOnePass()
        loop.runOnePass()
        #expect(reports.elements.isEmpty)
        source.events = .readable
        loop.runOnePass()
        #expect(reports.elements == [.readable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSourceWatchingNothingKeepsItsModeAlive(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: []) { _, _ in }, forMode: .default)
        #expect(loop.runOnePass() == .timedOut)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aHandlerThatChangesItsOwnEventsIsCalledForTheNewEventsFromTheNextPass(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let sockets = try TestSocketPair()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: sockets.first, events: .readable) { source, events in
            reports.append(events)
            _ = sockets.readAll(from: source.descriptor)
            source.events = .writable
        }, forMode: .default)
        sockets.send("request", on: sockets.second)
        loop.runOnePass()
        loop.runOnePass()
        #expect(reports.elements == [.readable, .writable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSourceWhoseEventsAnEarlierHandlerClearedIsNotCalledInThatPass(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let first = try TestPipe()
        let second = try TestPipe()
        let later = LoopDescriptorSource(descriptor: second.readEnd, events: .readable, order: 1) { _, events in
            trace.append("later \(events)")
        }
        loop.add(LoopDescriptorSource(descriptor: first.readEnd, events: .readable, order: 0) { _, _ in
            trace.append("earlier")
            later.events = []
        }, forMode: .default)
        loop.add(later, forMode: .default)
        first.write()
        second.write()
        loop.runOnePass()
        #expect(trace.elements == ["earlier"])
    }

    // MARK: Cancelling and removing

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSourceCancelledInsideItsHandlerIsNeverCalledAgain(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<Int>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { source, _ in
            calls.append(1)
            source.invalidate()
        }
        loop.add(source, forMode: .default)
        pipe.write()
        loop.runOnePass()
        #expect(!source.isValid)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(calls.count == 1)
        #expect(pipe.readAll() == "x")  // cancelling leaves the descriptor and its data to the caller
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSourceCancelledOutsideItsHandlerIsNeverCalledAgain(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<Int>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in calls.append(1) }
        loop.add(source, forMode: .common)
        pipe.write()
        loop.runOnePass()
        source.invalidate()
        source.invalidate()
        #expect(!source.isValid)
        #expect(!loop.contains(source, inMode: .default))
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(loop.run(mode: .tracking, before: .distantFuture) == .finished)
        #expect(calls.count == 1)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aReadySourceCancelledByAnEarlierHandlerInThePassIsNotCalled(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let trace = Recorder<String>()
        let first = try TestPipe()
        let second = try TestPipe()
        let later = LoopDescriptorSource(descriptor: second.readEnd, events: .readable, order: 1) { _, _ in
            trace.append("later")
        }
        loop.add(LoopDescriptorSource(descriptor: first.readEnd, events: .readable, order: 0) { source, _ in
            trace.append("earlier")
            later.invalidate()
            source.invalidate()
        }, forMode: .default)
        loop.add(later, forMode: .default)
        first.write()
        second.write()
        loop.runOnePass()
        #expect(trace.elements == ["earlier"])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSourceRemovedFromTheRunningModeIsNoLongerCalledThere(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<LoopMode>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            calls.append(loop.currentMode!)
        }
        loop.add(source, forMode: .common)
        pipe.write()
        loop.remove(source, forMode: .default)
        #expect(source.isValid)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        loop.runOnePass(in: .tracking)
        #expect(calls.elements == [.tracking])
    }

    // MARK: Hang-up, error, closed descriptor

    @Test(arguments: DescriptorWaitPath.allCases)
    func closingTheWriteEndReportsHangUpOnTheReadEnd(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }, forMode: .default)
        pipe.closeWriteEnd()
        #expect(Self.runPasses(of: loop) { !reports.elements.isEmpty })
        let report = try #require(reports.elements.first)
        #expect(report.contains(.hangUp))
        #expect(!report.contains(.invalid))
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func hangUpIsReportedEvenWhenNothingIsWatched(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let sockets = try TestSocketPair()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: sockets.first, events: []) { source, events in
            reports.append(events)
            source.invalidate()
        }, forMode: .default)
        loop.runOnePass()
        #expect(reports.elements.isEmpty)
        sockets.hangUp(sockets.second)
        loop.runOnePass()
        #expect(reports.elements.count == 1)
        #expect(reports.elements.first?.contains(.hangUp) == true)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func closingTheReadEndReportsAnErrorOnTheWriteEnd(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.writeEnd, events: []) { source, events in
            reports.append(events)
            source.invalidate()
        }, forMode: .default)
        pipe.closeReadEnd()
        #expect(Self.runPasses(of: loop) { !reports.elements.isEmpty })
        #expect(reports.elements.count == 1)
        #expect(reports.elements.first?.contains(.error) == true)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aDescriptorClosedWithoutCancellingIsReportedInvalidOnceAndItsSourceIsCancelled(
        _ path: DescriptorWaitPath
    ) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let descriptor = try highDuplicate(of: pipe.readEnd, atLeast: path == .ppoll ? 3000 : 3050)
        let reports = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: descriptor, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(source, forMode: .default)
        closeDescriptorForTest(descriptor)
        loop.runOnePass()
        loop.runOnePass()
        #expect(reports.elements == [.invalid])
        #expect(!source.isValid)
        #expect(!loop.contains(source, inMode: .default))
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aRunWhoseOnlySourceLostItsDescriptorFinishesInsteadOfSpinning(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let descriptor = try highDuplicate(of: pipe.readEnd, atLeast: path == .ppoll ? 3100 : 3150)
        let calls = Recorder<Int>()
        let source = LoopDescriptorSource(descriptor: descriptor, events: []) { _, _ in calls.append(1) }
        loop.add(source, forMode: .default)
        closeDescriptorForTest(descriptor)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(calls.count == 1)
        #expect(loop.run(mode: .default, before: .distantFuture) == .finished)
        #expect(calls.count == 1)
    }

    // MARK: Other kinds of descriptor

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSocketpairEndIsReportedReadableWhenThePeerSends(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let sockets = try TestSocketPair()
        let received = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: sockets.second, events: .readable) { source, _ in
            received.append(sockets.readAll(from: source.descriptor))
        }, forMode: .default)
        loop.runOnePass()
        sockets.send("hello", on: sockets.first)
        loop.runOnePass()
        loop.runOnePass()
        #expect(received.elements == ["hello"])
    }

    #if os(Linux)
    @Test(arguments: DescriptorWaitPath.allCases)
    func anEventfdIsReportedReadableOnceWrittenAndLeftForTheHandlerToRead(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let counter = try TestEventDescriptor()
        let taken = Recorder<UInt64>()
        loop.add(LoopDescriptorSource(descriptor: counter.descriptor, events: .readable) { _, _ in
            if let value = counter.take() {
                taken.append(value)
            }
        }, forMode: .default)
        loop.runOnePass()
        counter.add(2)
        counter.add(3)
        loop.runOnePass()
        loop.runOnePass()
        #expect(taken.elements == [5])  // the handler read the whole count: the loop read nothing
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func anEventfdIsReportedWritable(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let counter = try TestEventDescriptor()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: counter.descriptor, events: .writable) { _, events in
            reports.append(events)
        }, forMode: .default)
        loop.runOnePass()
        #expect(reports.elements == [.writable])
    }
    #endif

    // MARK: Modes and run results

    @Test(arguments: DescriptorWaitPath.allCases)
    func aDescriptorSourceKeepsItsModeAlive(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        #expect(loop.runOnePass() == .timedOut)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aDescriptorSourceInDefaultIsNotPolledWhileTheLoopRunsTracking(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<LoopMode>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            calls.append(loop.currentMode!)
        }, forMode: .default)
        let idle = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: idle.readEnd, events: .readable) { _, _ in }, forMode: .tracking)
        pipe.write()
        loop.runOnePass(in: .tracking)
        #expect(calls.elements.isEmpty)
        loop.runOnePass(in: .default)
        #expect(calls.elements == [.default])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aDescriptorSourceInCommonIsPolledWhileTheLoopRunsTracking(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<LoopMode>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            calls.append(loop.currentMode!)
        }, forMode: .common)
        pipe.write()
        loop.runOnePass(in: .tracking)
        #expect(calls.elements == [.tracking])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func returnAfterSourceHandledReturnsHandledSourceAfterADescriptorSource(_ path: DescriptorWaitPath) throws {
        let clock = ManualLoopClock()
        let loop = try path.makeLoop(clock: clock)
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        pipe.write()
        let result = loop.run(mode: .default, before: clock.now + .seconds(3600), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aReadyDescriptorEndsTheWaitOfALoopWithNoDeadline(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }, forMode: .default)
        pipe.write()
        let result = loop.run(mode: .default, before: .distantFuture, returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.readable])
    }

    // MARK: Preconditions

    @Test func aNegativeDescriptorTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = LoopDescriptorSource(descriptor: -1, events: .readable) { _, _ in }
        }
        #expect(result?.standardErrorText.contains("the descriptor is negative") == true)
    }

    @Test func watchingErrorTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = LoopDescriptorSource(descriptor: 0, events: .error) { _, _ in }
        }
        #expect(result?.standardErrorText.contains("only .readable and .writable can be watched") == true)
    }

    @Test func settingEventsToHangUpTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let source = LoopDescriptorSource(descriptor: 0, events: .readable) { _, _ in }
            source.events = [.readable, .hangUp]
        }
        #expect(result?.standardErrorText.contains("only .readable and .writable can be watched") == true)
    }

    @Test func addingAnInvalidatedSourceAddsNothingAndSaysSo() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let source = LoopDescriptorSource(descriptor: 0, events: .readable) { _, _ in }
        source.invalidate()
        #expect(loop.add(source, forMode: .default) == false)
        #expect(!loop.contains(source, inMode: .default))
    }

    @Test func addingADescriptorSourceToASecondLoopTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let first = try Loop(clock: ManualLoopClock())
            let second = try Loop(clock: ManualLoopClock())
            let source = LoopDescriptorSource(descriptor: 0, events: .readable) { _, _ in }
            first.add(source, forMode: .default)
            withExtendedLifetime(first) {
                _ = second.add(source, forMode: .default)
            }
        }
        #expect(result?.standardErrorText.contains("this LoopDescriptorSource already belongs to another loop") == true)
    }
}

/// Descriptor sources with real threads and the real clock: order and conditions only, never elapsed-time bounds.
@Suite("Descriptor sources across threads", .serialized, .timeLimit(.minutes(1)))
struct LoopDescriptorSourceThreadTests {
    @Test(arguments: DescriptorWaitPath.allCases)
    func dataWrittenFromAnotherThreadWakesASleepingLoop(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }, forMode: .default)
        let writer = startThread {
            // If the loop never sleeps, give up: the run's deadline (a hang guard) then ends the test.
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            pipe.write()
        }
        defer { writer.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.readable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aSourceAddedFromAnotherThreadIsPolledByTheSleepingLoop(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let idle = try TestPipe()
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: idle.readEnd, events: .readable) { _, _ in }, forMode: .default)
        pipe.write()
        let adder = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
                reports.append(events)
            }, forMode: .default)
        }
        defer { adder.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.readable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func eventsChangedFromAnotherThreadReachTheSleepingLoop(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let sockets = try TestSocketPair()
        let reports = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: sockets.first, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(source, forMode: .default)
        let changer = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            source.events = .writable  // nothing to read, but always writable: the loop must re-poll to see it
        }
        defer { changer.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.writable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func eventsClearedFromAnotherThreadStopReportsOnTheSleepingLoop(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let trace = Recorder<String>()
        let watched = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            trace.append("watched \(events)")
        }
        let done = LoopSource { _ in trace.append("done") }
        loop.add(watched, forMode: .default)
        loop.add(done, forMode: .default)
        let changer = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            watched.events = []
            pipe.write()
            done.signal()
        }
        defer { changer.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(trace.elements == ["done"])
        #expect(pipe.readAll() == "x")
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func cancellingFromAnotherThreadWhileTheLoopSleepsFinishesItsRun(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let calls = Recorder<Int>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in calls.append(1) }
        loop.add(source, forMode: .default)
        let canceller = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            source.invalidate()
            pipe.write()
        }
        defer { canceller.join() }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        #expect(result == .finished)
        #expect(calls.count == 0)
    }
}
