#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Testing
@testable import LoopKit

/// A mode with `PollWaiter.largeModeThreshold` descriptor sources or more sleeps in an epoll set
/// (`DescriptorRegistry`), with a sweep of a few descriptors every few waits for closes: the same contract as a small
/// mode's ppoll. The descriptor suites run every test through both paths; these cover what only the large path has.
/// Real threads assert order and conditions only.
@Suite("Descriptor sources in a large mode", .serialized, .timeLimit(.minutes(1)))
struct LargeModeDescriptorTests {
    private func registry(of loop: Loop, mode: LoopMode = .default) -> DescriptorRegistry? {
        loop.modeItemsByMode[mode].flatMap { loop.pollWaiter?.registry(for: $0) }
    }

    /// Adds a source on `descriptor` to `loop`'s default mode that records the events it is called with.
    private func addReporter(to loop: Loop, descriptor: CInt, events: DescriptorEvents) -> Recorder<DescriptorEvents> {
        let reports = Recorder<DescriptorEvents>()
        loop.add(LoopDescriptorSource(descriptor: descriptor, events: events) { _, events in
            reports.append(events)
        }, forMode: .default)
        return reports
    }

    /// Adds a source on a new pipe's read end to `loop`'s default mode that reads what arrives and records it.
    private func addPipeReader(to loop: Loop) throws -> (pipe: TestPipe, reads: Recorder<String>) {
        let pipe = try TestPipe()
        let reads = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            reads.append(pipe.readAll())
        }, forMode: .default)
        return (pipe, reads)
    }

    /// A loop on `path` whose default mode reads a new pipe (`addPipeReader`) and holds a timer an hour away, so that
    /// its waits sleep until a stop or their run's deadline; on the epoll path, past its first sleep in the set.
    private func makeServingLoop(on path: DescriptorWaitPath) throws
        -> (loop: Loop, pipe: TestPipe, reads: Recorder<String>) {
        let loop = try path.makeLoop()
        let (pipe, reads) = try self.addPipeReader(to: loop)
        loop.add(LoopTimer(fireAt: loop.now + .seconds(3_600)) { _ in }, forMode: .default)
        if path == .epoll {
            try loop.sleepOnceInEpoll()
        }
        return (loop, pipe, reads)
    }

    /// Writes to `pipe` and runs `loop` until its reader has handled it: a wait that finds a source ready.
    private func serveOnce(_ loop: Loop, _ pipe: TestPipe) {
        pipe.write("x")
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
                    == .handledSource)
    }

    /// Adds a one-shot timer at `due` to `loop`'s default mode that records when it fired, runs `also`, and stops the
    /// run.
    private func addStoppingTimer(to loop: Loop, at due: LoopInstant,
                                  also: @escaping @Sendable () -> Void = {}) -> Recorder<LoopInstant> {
        let firedAt = Recorder<LoopInstant>()
        loop.add(LoopTimer(fireAt: due) { _ in
            firedAt.append(loop.now)
            also()
            loop.stop()
        }, forMode: .default)
        return firedAt
    }

    /// Records each `afterWaiting` of `loop`'s default mode: one per wait that ended in a pass.
    private func recordWakeUps(of loop: Loop) -> Recorder<LoopActivity> {
        let wakes = Recorder<LoopActivity>()
        loop.add(LoopObserver(activities: .afterWaiting) { _, activity in wakes.append(activity) }, forMode: .default)
        return wakes
    }

    /// Runs `mode` until a source is handled; `action` runs on another thread once the loop is asleep. The run's
    /// 30 s deadline only guards against a hang: a loop that never wakes fails the test with `.timedOut`.
    private func runUntilHandled(_ loop: Loop, mode: LoopMode = .default,
                                 whenAsleep action: @escaping @Sendable () -> Void) -> RunResult {
        let helper = startThread {
            guard waitUntil(limit: .seconds(20), { loop.isWaiting }) else { return }
            action()
        }
        defer { helper.join() }
        return loop.run(mode: mode, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
    }

    @Test func aLargeModeSleepsOnEpollAndCallsOnlyTheSourceThatBecameReady() throws {
        let loop = try Loop.onLinuxBackend()
        defer { loop.invalidate() }
        let pairs = try (0..<100).map { _ in try TestSocketPair() }
        let calls = Recorder<Int>()
        for (index, pair) in pairs.enumerated() {
            loop.add(LoopDescriptorSource(descriptor: pair.first, events: .readable) { _, _ in
                calls.append(index)
            }, forMode: .default)
        }
        #expect(self.runUntilHandled(loop) {
            pairs[57].send("x", on: pairs[57].second)
        } == .handledSource)
        #expect(calls.elements == [57])
        #expect(self.registry(of: loop) != nil)
    }

    @Test func sourcesThatEpollReportsReadyAreCalledLowerOrderFirst() throws {
        let pipes = try (0..<3).map { _ in try TestPipe() }
        defer { withExtendedLifetime(pipes) {} }  // an optimized build would close them after their last use
        let sources = zip(pipes, [3, 1, 2]).map { pipe, order in
            LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable, order: order) { _, _ in }
        }
        let registry = try #require(DescriptorRegistry(sources: sources))
        for pipe in pipes { pipe.write() }
        var ready: [(LoopDescriptorSource, DescriptorEvents)] = []
        _ = registry.collectReady(into: &ready)
        #expect(ready.map(\.0.order) == [1, 2, 3])
        #expect(ready.allSatisfy { $0.1 == .readable })
    }

    /// A change of `events` listed by a loop that then went away (let go of, or invalidated) is not left marked as
    /// listed: the next loop's epoll set must learn of the source's later changes.
    @Test(arguments: [false, true])
    func aSourceWhoseEventsChangedInALoopThatWentAwayFollowsItsEventsInTheNextLoop(invalidated: Bool) throws {
        let pipe = try TestPipe()
        defer { withExtendedLifetime(pipe) {} }
        let reports = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, events in
            reports.append(events)
        }
        do {
            let first = try DescriptorWaitPath.epoll.makeLoop()
            first.add(source, forMode: .default)
            source.events = .writable  // listed for the loop's next wait, which never comes
            if invalidated {
                first.invalidate()
            }
        }
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        loop.add(source, forMode: .default)
        try loop.sleepOnceInEpoll()  // registered for `.writable`, which a pipe's read end never is
        source.events = .readable
        pipe.write("x")
        #expect(loop.run(mode: .default, before: loop.now + .seconds(5), returnAfterSourceHandled: true)
                    == .handledSource)
        #expect(reports.elements == [.readable])
    }

    @Test func aDescriptorClosedWithoutCancellingIsReportedInvalidInALargeMode() throws {
        let loop = try Loop.onLinuxBackend()
        defer { loop.invalidate() }
        let idle = try (0..<40).map { _ in try TestPipe() }
        defer { withExtendedLifetime(idle) {} }  // an optimized build would close them after their last use
        for pipe in idle {
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        }
        let pipe = try TestPipe()
        let descriptor = try highDuplicate(of: pipe.readEnd, atLeast: 3200)
        let reports = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: descriptor, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(source, forMode: .default)
        // Passes every millisecond: the sweep finds the close within 2n of them.
        loop.add(LoopTimer(interval: .milliseconds(1), repeats: true) { _ in }, forMode: .default)
        try loop.sleepOnceInEpoll()
        closeDescriptorForTest(descriptor)
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.invalid])
        #expect(!source.isValid)
    }

    @Test func aDescriptorClosedWithoutCancellingByACallbackIsReportedOnceTheLoopGoesIdle() throws {
        let loop = try Loop.onLinuxBackend()
        defer { loop.invalidate() }
        let idle = try (0..<40).map { _ in try TestPipe() }
        defer { withExtendedLifetime(idle) {} }
        for pipe in idle {
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        }
        let pipe = try TestPipe()
        let descriptor = try highDuplicate(of: pipe.readEnd, atLeast: 3600)
        let reports = self.addReporter(to: loop, descriptor: descriptor, events: .readable)
        // A callback closes it behind the loop's back, and then nothing wakes the loop: no timer, no traffic, so no
        // later wait's sweep of a few numbers would ever reach it.
        let trigger = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: trigger.readEnd, events: .readable) { _, _ in
            _ = trigger.readAll()
            closeDescriptorForTest(descriptor)
        }, forMode: .default)
        try loop.sleepOnceInEpoll()
        trigger.write("close")
        var results: [RunResult] = []
        while reports.elements.isEmpty, results.count < 3 {
            results.append(loop.run(mode: .default, before: loop.now + .seconds(10), returnAfterSourceHandled: true))
        }
        // The trigger's pass, then the report: each a source handled, no run left to its deadline.
        #expect(results == [.handledSource, .handledSource])
        #expect(reports.elements == [.invalid])
    }

    @Test func anIdleLargeModeLooksForClosesOnceAfterItsLastWorkAndThenSleeps() throws {
        let loop = try Loop.onLinuxBackend()
        defer { loop.invalidate() }
        let (pipe, reads) = try self.addPipeReader(to: loop)
        let idle = try (0..<40).map { _ in try TestPipe() }
        defer { withExtendedLifetime(idle) {} }
        for pipe in idle {
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        }
        try loop.sleepOnceInEpoll()
        let registry = try #require(self.registry(of: loop))
        self.serveOnce(loop, pipe)
        #expect(reads.elements == ["x"])
        #expect(registry.lastIdleSweep == nil)
        let before = loop.counters
        let start = loop.now
        let idleFor = PollWaiter.idleSweepSpacing + .milliseconds(500)
        #expect(loop.run(mode: .default, before: start + idleFor) == .timedOut)
        // Not before the loop had been idle for the delay; once, though the run outlasted the spacing between two.
        let sweptAt = try #require(registry.lastIdleSweep)
        #expect(sweptAt >= start + PollWaiter.idleSweepDelay)
        #expect(loop.counters.since(before).blockingWaits <= 2)
    }

    /// The runs last 100 ms, or long enough for the idle sweep (which must not wait on a stale report either).
    static let noSpinRuns: [Duration] = [.milliseconds(100), .milliseconds(1_500)]

    @Test(arguments: Self.noSpinRuns)
    func aClosedDescriptorWhoseFileLivesOnInADuplicateDoesNotMakeTheLoopSpin(runFor length: Duration) throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let keepAlive = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: keepAlive.readEnd, events: .readable) { _, _ in }, forMode: .default)
        let pipe = try TestPipe()
        let descriptor = try highDuplicate(of: pipe.readEnd, atLeast: 3300)  // pipe.readEnd keeps the file open
        let reports = self.addReporter(to: loop, descriptor: descriptor, events: .readable)
        try loop.sleepOnceInEpoll()
        closeDescriptorForTest(descriptor)
        pipe.write()  // epoll still holds the open file under the closed number, and it is readable now
        let before = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + length) == .timedOut)
        #expect(reports.elements == [.invalid])
        // Not a spin: the report, one wake-up from the stale registration, then a fresh epoll set and a sleep (cut
        // in two by the idle sweep in a long run).
        #expect(loop.counters.since(before).blockingWaits <= 6)
    }

    @Test(arguments: Self.noSpinRuns)
    func aStaleRegistrationReportingWhatTheNewSourceDoesNotWatchDoesNotMakeTheLoopSpin(runFor length: Duration) throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        func socketPair() throws -> [CInt] {
            var ends: [CInt] = [0, 0]
            try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &ends) == 0)
            return ends
        }
        let oldFile = try socketPair()  // writable from the start
        defer { oldFile.forEach { closeDescriptorForTest($0) } }
        let number = try highDuplicate(of: oldFile[0], atLeast: 3950)  // oldFile[0] keeps the file open
        let old = LoopDescriptorSource(descriptor: number, events: [.readable, .writable]) { _, _ in }
        loop.add(old, forMode: .default)
        loop.add(LoopTimer(fireAt: loop.now + .seconds(3_600)) { _ in }, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now, returnAfterSourceHandled: true) == .handledSource)
        // Closed before it is cancelled, the wrong order: epoll keeps (old file, number), which stays writable.
        closeDescriptorForTest(number)
        old.invalidate()
        let newFile = try socketPair()  // writable too, and watched only for reading
        defer { newFile.forEach { closeDescriptorForTest($0) } }
        try #require(dup2(newFile[0], number) == number)
        defer { closeDescriptorForTest(number) }
        let reports = self.addReporter(to: loop, descriptor: number, events: .readable)
        let before = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + length) == .timedOut)
        #expect(reports.elements.isEmpty)
        // Not a spin: the stale report twice, then a fresh epoll set and a sleep until the deadline (cut in two by the
        // idle sweep in a long run).
        #expect(loop.counters.since(before).blockingWaits <= 6)
    }

    @Test func aLargeModesWaitsPollAFewDescriptorsOnceTheRunsFirstWaitHasLookedAtAll() throws {
        let clock = SteppingClock()
        let poller = FakePoller(clock: clock)
        let loop = Loop(clock: clock, waiter: try PollWaiter(backend: .linux, clock: clock, poller: poller))
        defer { loop.invalidate() }
        let pipes = try (0..<200).map { _ in try TestPipe() }
        defer { withExtendedLifetime(pipes) {} }
        for pipe in pipes {
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        }
        loop.add(LoopTimer(fireAt: clock.now + .milliseconds(1), interval: .milliseconds(1), repeats: true) { _ in },
                 forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(50)) == .timedOut)
        // The first wait looks at every descriptor (a close made before the run is reported at once); each later one
        // polls the wake-up pipe, the epoll set and the few numbers of this wait's sweep, whatever the mode holds.
        // (A clock other than the system's has no timerfd to arm, so these waits take the poll path, which a fake
        // poller can watch; with one, the sleep is epoll_wait's: see the epoll-sleep tests below.)
        #expect(poller.descriptorCounts.count >= 50)
        #expect(try #require(poller.descriptorCounts.first) >= 200)
        #expect(poller.descriptorCounts.dropFirst().allSatisfy { $0 <= 2 + PollWaiter.sweepCount })
    }

    @Test func aDescriptorClosedUnderALiveSourceDuringARunIsReportedWithinAFewPasses() throws {
        let loop = try Loop.onLinuxBackend()
        defer { loop.invalidate() }
        let idle = try (0..<100).map { _ in try TestPipe() }
        defer { withExtendedLifetime(idle) {} }
        for pipe in idle {
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .default)
        }
        let pipe = try TestPipe()
        let descriptor = try highDuplicate(of: pipe.readEnd, atLeast: 3500)
        let reports = self.addReporter(to: loop, descriptor: descriptor, events: .readable)
        // Passes every millisecond; the close comes after the run's first wait, so only the sweep can find it.
        loop.add(LoopTimer(interval: .milliseconds(1), repeats: true) { _ in }, forMode: .default)
        let closer = LoopTimer(interval: .milliseconds(5)) { _ in closeDescriptorForTest(descriptor) }
        loop.add(closer, forMode: .default)
        let result = loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        #expect(result == .handledSource)
        #expect(reports.elements == [.invalid])
        #expect(self.registry(of: loop) != nil)
    }

    /// Several sources on each descriptor give a mode more poll entries than the descriptor limit, on fewer descriptors
    /// than it: poll(2) refuses such a wait (EINVAL), and the loop must watch them all the same, in the large mode's
    /// look at every source and in the portable backend's sleep.
    @Test func moreSourcesThanTheDescriptorLimitOnFewerDescriptorsAreWatched() async {
        await #expect(processExitsWith: .success) {
            func check() throws -> Bool {
                let pipes = try (0..<20).map { _ in try TestPipe() }
                var limit = rlimit()
                getrlimit(RLIMIT_NOFILE_VALUE, &limit)
                let original = limit
                defer {
                    var restored = original  // a sanitizer reading /proc at exit needs descriptors
                    setrlimit(RLIMIT_NOFILE_VALUE, &restored)
                }
                let highest = pipes.map { max($0.readEnd, $0.writeEnd) }.max()!
                limit.rlim_cur = rlim_t(highest + 16)  // room for each loop's own few descriptors
                try #require(setrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0)
                let sourcesPerDescriptor = Int(limit.rlim_cur) / pipes.count + 1
                var passed = true
                for backend in LoopBackend.allCases {
                    let clock = SystemLoopClock()
                    let loop = Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: backend))
                    defer { loop.invalidate() }
                    let calls = Recorder<Int>()
                    for (index, pipe) in pipes.enumerated() {
                        for _ in 0..<sourcesPerDescriptor {
                            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
                                calls.append(index)
                            }, forMode: .default)
                        }
                    }
                    let writer = startThread {
                        guard waitUntil({ loop.isWaiting }) else { return }
                        pipes[7].write()  // to the sleeping loop: the portable backend's poll(2) must watch it
                    }
                    let result = loop.run(mode: .default, before: loop.now + .seconds(30),
                                          returnAfterSourceHandled: true)
                    writer.join()
                    passed = passed && result == .handledSource && !calls.elements.isEmpty
                        && calls.elements.allSatisfy { $0 == 7 }
                    _ = pipes[7].readAll()
                }
                return passed
            }
            exit(try check() ? 0 : 1)
        }
    }

    @Test func aNumberReusedForAnotherFileIsWatchedForTheNewFile() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let first = try TestPipe()
        let number = try highDuplicate(of: first.readEnd, atLeast: 3400)
        let old = LoopDescriptorSource(descriptor: number, events: .readable) { _, _ in }
        loop.add(old, forMode: .default)
        try loop.sleepOnceInEpoll()
        old.invalidate()
        let second = try TestPipe()
        try #require(dup2(second.readEnd, number) == number)  // closes the old file under `number`, reuses it
        defer { closeDescriptorForTest(number) }
        let reports = self.addReporter(to: loop, descriptor: number, events: .readable)
        #expect(self.runUntilHandled(loop) {
            second.write()
        } == .handledSource)
        #expect(reports.elements == [.readable])
    }

    @Test func eventsChangedOnTheLoopThreadReachTheEpollSetBeforeTheNextSleep() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<DescriptorEvents>()
        let watched = LoopDescriptorSource(descriptor: pipe.readEnd, events: []) { _, events in
            reports.append(events)
        }
        loop.add(watched, forMode: .default)
        try loop.sleepOnceInEpoll()  // registered, no events
        let change = LoopSource { _ in watched.events = .readable }  // on the loop's thread: no wake-up needed
        loop.add(change, forMode: .default)
        change.signal()
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
                == .handledSource)
        #expect(self.runUntilHandled(loop) {
            pipe.write()  // only epoll can wake the loop for this: it must be watching `.readable` by now
        } == .handledSource)
        #expect(reports.elements == [.readable])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aRegularFileIsReportedReadableOnEveryPass(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        var template = Array("/tmp/loopkit-test-XXXXXX".utf8CString)
        let file = mkstemp(&template)
        try #require(file >= 0)
        unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        defer { closeDescriptorForTest(file) }
        let reports = self.addReporter(to: loop, descriptor: file, events: .readable)
        // epoll refuses regular files; poll calls them always ready, and every wait polls them itself.
        for _ in 0..<2 {
            #expect(loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
                == .handledSource)
        }
        #expect(reports.elements == [.readable, .readable])
    }

    @Test func sourcesThatEpollRefusedAndSourcesItReportsAreCalledLowerOrderFirst() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let calls = Recorder<Int>()
        var files: [CInt] = []
        defer { files.forEach(closeDescriptorForTest) }
        for order in [3, 1] {  // regular files: epoll refuses them, every wait polls them itself, always ready
            var template = Array("/tmp/loopkit-test-XXXXXX".utf8CString)
            let file = mkstemp(&template)
            try #require(file >= 0)
            unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            files.append(file)
            loop.add(LoopDescriptorSource(descriptor: file, events: .readable, order: order) { _, _ in
                calls.append(order)
            }, forMode: .default)
        }
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable, order: 2) { _, _ in
            calls.append(2)
        }, forMode: .default)
        pipe.write()  // epoll reports this one
        loop.run(mode: .default, before: loop.now)  // one pass
        #expect(calls.elements == [1, 2, 3])
    }

    @Test func aModeGoesBackToPpollBelowHalfTheThresholdAndKeepsReporting() throws {
        let loop = try Loop.onLinuxBackend(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipes = try (0..<PollWaiter.defaultLargeModeThreshold).map { _ in try TestPipe() }
        defer { withExtendedLifetime(pipes) {} }  // an optimized build would close them after their last use
        let calls = Recorder<Int>()
        let sources = pipes.enumerated().map { index, pipe in
            LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in calls.append(index) }
        }
        for source in sources { loop.add(source, forMode: .default) }
        try loop.sleepOnceInEpoll()
        for source in sources.dropFirst(PollWaiter.defaultLargeModeThreshold / 2 - 2) { source.invalidate() }
        try loop.runBriefly { self.registry(of: loop) == nil }
        pipes[1].write()
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(1), returnAfterSourceHandled: true)
                == .handledSource)
        #expect(calls.elements == [1])
    }

    /// With no descriptor left, the mode sleeps on the loop's futex, not in its epoll set: it lets go of the set then.
    @Test func aLargeModeThatLosesEveryDescriptorLetsGoOfItsEpollSetWhenItSleepsOnTheFutex() throws {
        let loop = try Loop.onLinuxBackend()
        defer { loop.invalidate() }
        let pipes = try (0..<PollWaiter.defaultLargeModeThreshold).map { _ in try TestPipe() }
        defer { withExtendedLifetime(pipes) {} }
        let sources = pipes.map { LoopDescriptorSource(descriptor: $0.readEnd, events: .readable) { _, _ in } }
        for source in sources { loop.add(source, forMode: .default) }
        loop.add(LoopSource { _ in }, forMode: .default)  // keeps the mode alive once the descriptors are gone
        try loop.sleepOnceInEpoll()
        for source in sources { source.invalidate() }
        // No deadline, so the sleep is on the futex whatever the thread's timer slack; a stop ends it.
        let (result, restops) = loop.runStoppedFromAnotherThread()
        #expect(result == .stopped)
        #expect(restops == 0)
        #expect(self.registry(of: loop) == nil)
    }

    @Test func aSourceInTwoLargeModesIsWatchedInEach() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<LoopMode>()
        let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            reports.append(loop.currentMode ?? .default)
            pipe.readAll()
        }
        loop.add(source, forMode: .common)
        for mode in [LoopMode.default, .tracking] {
            #expect(self.runUntilHandled(loop, mode: mode) { pipe.write() } == .handledSource)
            #expect(self.registry(of: loop, mode: mode) != nil)
        }
        #expect(reports.elements == [.default, .tracking])
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aReusedNumberIsNotReportedForTheOldFileOfADuplicate(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let first = try TestPipe()
        let number = try highDuplicate(of: first.readEnd, atLeast: 3600)  // first.readEnd keeps the old file open
        let reports = self.addReporter(to: loop, descriptor: number, events: .readable)
        if path == .epoll {
            try loop.sleepOnceInEpoll()
        } else {
            #expect(loop.run(mode: .default, before: loop.now + .milliseconds(5)) == .timedOut)
        }
        let second = try TestPipe()
        try #require(dup2(second.readEnd, number) == number)  // closed without cancelling, and reused at once
        defer { closeDescriptorForTest(number) }
        first.write()  // epoll still holds the old file under `number`; the number's new file is empty
        let before = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(100)) == .timedOut)
        #expect(reports.elements.isEmpty)
        // Not a spin: one unconfirmed report from the stale registration, then a fresh epoll set and a sleep.
        #expect(loop.counters.since(before).blockingWaits <= 4)
    }

    @Test func aModeWhoseDescriptorsEpollRefusesKeepsPpollWithoutRetryingEverySleep() throws {
        // epoll refuses to nest epoll sets deeper than a few levels (ELOOP): a source on the deepest one is refused.
        var chain: [EpollSet] = [try #require(EpollSet())]
        while chain.count < 16 {
            let outer = try #require(EpollSet())
            guard outer.add(chain.last!.descriptor, watching: .readable) == .done else { break }
            chain.append(outer)
        }
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        loop.add(LoopDescriptorSource(descriptor: chain.last!.descriptor, events: .readable) { _, _ in },
                 forMode: .default)
        try loop.runBriefly {
            loop.modeItemsByMode[.default].map { loop.pollWaiter?.hasRefusedRegistrations(of: $0) } == true
        }
        #expect(self.registry(of: loop) == nil)
        #expect(self.runUntilHandled(loop) {
            pipe.write()
        } == .handledSource)
        #expect(reports.elements == [.readable])
        withExtendedLifetime(chain) {}
    }

    @Test func aHangUpWhileTheLoopSleepsOnEpollIsReported() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        #expect(self.runUntilHandled(loop) {
            pipe.closeWriteEnd()
        } == .handledSource)
        #expect(self.registry(of: loop) != nil)
        #expect(reports.elements.first?.contains(.hangUp) == true)
    }

    @Test func anErrorWhileTheLoopSleepsOnEpollIsReportedEvenWhenNothingIsWatched() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = self.addReporter(to: loop, descriptor: pipe.writeEnd, events: [])
        #expect(self.runUntilHandled(loop) {
            pipe.closeReadEnd()
        } == .handledSource)
        #expect(reports.elements.first?.contains(.error) == true)
    }

    @Test func cancellingOnAnotherThreadThenClosingAndReusingTheNumberNeedsNoRebuild() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let keepAlive = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: keepAlive.readEnd, events: .readable) { _, _ in }, forMode: .default)
        let first = try TestPipe()
        let number = try highDuplicate(of: first.readEnd, atLeast: 3700)
        let old = LoopDescriptorSource(descriptor: number, events: .readable) { _, _ in }
        loop.add(old, forMode: .default)
        try loop.sleepOnceInEpoll()
        let epollBefore = try #require(self.registry(of: loop)).descriptor
        let second = try TestPipe()
        let canceller = startThread {
            old.invalidate()  // queued for the loop's thread, which removes it from epoll after the close below
            closeDescriptorForTest(number)
        }
        canceller.join()
        try #require(dup2(second.readEnd, number) == number)
        defer { closeDescriptorForTest(number) }
        let reports = self.addReporter(to: loop, descriptor: number, events: .readable)
        #expect(self.runUntilHandled(loop) {
            second.write()
        } == .handledSource)
        #expect(reports.elements == [.readable])
        #expect(self.registry(of: loop)?.descriptor == epollBefore)
    }

    @Test func aSourceIsReportedOnceWhenAStaleRegistrationSharesItsNumber() throws {
        let first = try TestPipe()
        let number = try highDuplicate(of: first.readEnd, atLeast: 3900)  // first.readEnd keeps the old file open
        let old = LoopDescriptorSource(descriptor: number, events: .readable) { _, _ in }
        let registry = try #require(DescriptorRegistry(sources: [old]))
        closeDescriptorForTest(number)  // closed without cancelling: epoll keeps (old file, number)
        registry.remove(old)
        let second = try TestPipe()
        try #require(dup2(second.readEnd, number) == number)
        defer { closeDescriptorForTest(number) }
        registry.add(LoopDescriptorSource(descriptor: number, events: .readable) { _, _ in })
        first.write()
        second.write()  // both files under one number are ready: epoll reports the number twice
        var ready: [(LoopDescriptorSource, DescriptorEvents)] = []
        _ = registry.collectReady(into: &ready)
        #expect(ready.count == 1)
    }

    @Test func eventsChangedWhileAnotherModeRunsReachEveryLargeModeOfTheSource() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = Recorder<LoopMode>()
        let watched = LoopDescriptorSource(descriptor: pipe.readEnd, events: []) { _, _ in
            reports.append(loop.currentMode ?? .default)
        }
        loop.add(watched, forMode: .common)
        for mode in [LoopMode.default, .tracking] {  // both modes get an epoll set, watching nothing on the pipe
            try loop.sleepOnceInEpoll(mode: mode)
        }
        watched.events = .readable  // on the loop's thread, between runs
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(5)) == .timedOut)  // takes the change
        #expect(self.runUntilHandled(loop, mode: .tracking) {
            pipe.write()  // only the tracking mode's epoll set can wake the loop for this
        } == .handledSource)
        #expect(reports.elements == [.tracking])
    }

    @Test func aLargeModeSleepsInItsEpollSetItselfUntilATimerAWakeUpOrADescriptor() throws {
        let clock = SystemLoopClock()
        let poller = RecordingPoller()
        let waiter = try PollWaiter(backend: .linux, clock: clock, poller: poller)
        waiter.largeModeThreshold = 1
        let loop = Loop(clock: clock, waiter: waiter)
        defer { loop.invalidate() }
        let (pipe, reads) = try self.addPipeReader(to: loop)
        let due = loop.now + .seconds(1)  // after the first sleep has begun, even on a loaded machine
        let firedAt = Recorder<LoopInstant>()
        loop.add(LoopTimer(fireAt: due) { _ in firedAt.append(loop.now) }, forMode: .default)
        let performed = Recorder<String>()
        let before = loop.counters

        #expect(self.runUntilHandled(loop) {  // asleep until the timer, then for ever: a block, then the pipe
            guard waitUntil({ firedAt.count == 1 && loop.isWaiting }) else { return }
            loop.perform { performed.append("block") }
            guard waitUntil({ performed.count == 1 && loop.isWaiting }) else { return }
            pipe.write("x")
        } == .handledSource)
        #expect(try #require(firedAt.elements.first) >= due)
        #expect(performed.elements == ["block"])
        #expect(reads.elements == ["x"])
        #expect(loop.counters.since(before).blockingWaits >= 3)
        // Every sleep was in the epoll set, which holds the wake-up pipe and the deadline timer: the poller only
        // looked (the sweeps for closes), and never slept.
        #expect(!poller.timeouts.isEmpty)
        #expect(poller.timeouts.allSatisfy { $0 == 0 })
    }

    /// A busy server's loop offers its processor to other runnable threads before it sleeps, so that it comes back to
    /// a batch of ready descriptors instead of being woken for each; an idle loop sleeps at once, and so does one whose
    /// next timer is near. (Both paths: the descriptor suites' helpers cannot see the counter.)
    @Test(arguments: DescriptorWaitPath.allCases)
    func aLoopOffersTheProcessorBeforeASleepOnlyRightAfterAWaitThatFoundSources(path: DescriptorWaitPath) throws {
        let (loop, pipe, reads) = try self.makeServingLoop(on: path)
        defer { loop.invalidate() }
        let idle = loop.counters
        self.serveOnce(loop, pipe)
        #expect(reads.elements == ["x"])
        #expect(loop.counters.since(idle).processorOffers == 0)  // the waits before found nothing

        // Ended by its deadline, not by a stop: a stop from another thread may come during a large mode's look for
        // closes, which precedes the offer, and end the wait there.
        let serving = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + .seconds(1)) == .timedOut)
        #expect(loop.counters.since(serving).processorOffers == 1)

        let stopped = loop.counters
        // Its wait follows one that ended for the stop alone. Stopped once it has begun to sleep (counted as the call
        // begins): a stop during the large mode's look for closes would end the wait before any sleep.
        let idled = loop.runStoppedFromAnotherThread(afterItSleeps: {
            _ = waitUntil { loop.counters.since(stopped).blockingWaits >= 1 }
        })
        #expect(idled.result == .stopped && idled.restops == 0)
        #expect(loop.counters.since(stopped).processorOffers == 0)
        #expect(loop.counters.since(stopped).blockingWaits >= 1)

        // Serving again, then a wait until a deadline 5 ms away: no offer, which could keep the processor away past it.
        self.serveOnce(loop, pipe)
        let nearDeadline = loop.counters
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(5)) == .timedOut)
        #expect(loop.counters.since(nearDeadline).processorOffers == 0)
        #expect(reads.elements == ["x", "x"])
    }

    /// Two offers close together that come back late (a neighbour that does not block ran out its slice; here, a
    /// stand-in offer that says it was away 2 ms) turn the next offers on that processor into short naps; once they
    /// are used up, or once the loop runs on another processor, it offers again.
    @Test(arguments: DescriptorWaitPath.allCases)
    func anOfferThatComesBackLateTurnsTheNextOffersOnItsProcessorIntoNaps(path: DescriptorWaitPath) throws {
        let (loop, pipe, reads) = try self.makeServingLoop(on: path)
        defer { loop.invalidate() }
        let waiter = try #require(loop.pollWaiter)
        waiter.napsAfterStall = 2
        waiter.lateOfferWindow = 2
        var processor: CInt = 0  // where the scheduler runs the loop's thread, as the waiter reads it
        waiter.testsOnly_currentProcessor = { processor }
        /// Serves the pipe once, then runs a wait after it (an offer or a nap) until a deadline 50 ms away (well past
        /// `offerLead`, even for a thread that a loaded machine holds up), and says what that wait did.
        let serveThenWait = { () -> (offers: UInt64, naps: UInt64) in
            self.serveOnce(loop, pipe)
            let before = loop.counters
            #expect(loop.run(mode: .default, before: loop.now + .milliseconds(50)) == .timedOut)
            let waited = loop.counters.since(before)
            return (waited.processorOffers, waited.processorNaps)
        }
        // What each offer says of how long the processor was away, in nanoseconds: 2 ms, or not at all.
        let busyNeighbour: () -> UInt64 = { 2_000_000 }
        let noNeighbour: () -> UInt64 = { 0 }
        waiter.testsOnly_offerProcessor = busyNeighbour
        #expect(serveThenWait() == (1, 0))  // a late offer alone
        waiter.testsOnly_offerProcessor = noNeighbour
        #expect(serveThenWait() == (1, 0))
        #expect(serveThenWait() == (1, 0))
        waiter.testsOnly_offerProcessor = busyNeighbour
        #expect(serveThenWait() == (1, 0))  // late again, but three offers after the first: still alone
        #expect(serveThenWait() == (1, 0))  // the next offer, late too: a stall
        waiter.testsOnly_offerProcessor = noNeighbour  // gone, but the naps still come, then offers again
        #expect(serveThenWait() == (0, 1))
        #expect(serveThenWait() == (0, 1))
        #expect(serveThenWait() == (1, 0))

        waiter.testsOnly_offerProcessor = busyNeighbour
        #expect(serveThenWait() == (1, 0))  // two offers after the last late one: a stall
        waiter.testsOnly_offerProcessor = noNeighbour
        #expect(serveThenWait() == (0, 1))
        processor = 1  // moved to the other processor, away from the neighbour: an offer, not the nap left
        #expect(serveThenWait() == (1, 0))
        #expect(reads.elements == Array(repeating: "x", count: 11))
    }

    @Test func aLargeModeWhoseLastTimerWasInvalidatedSleepsThroughTheInstantItWasArmedFor() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        let reports = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        let timer = LoopTimer(fireAt: loop.now + .milliseconds(10)) { _ in }
        loop.add(timer, forMode: .default)
        #expect(self.runUntilHandled(loop) {  // the sleep is armed for the timer
            pipe.write()
        } == .handledSource)
        _ = pipe.readAll()
        #expect(reports.count == 1)
        timer.invalidate()
        let wakes = self.recordWakeUps(of: loop)
        let (result, restops) = loop.runStoppedFromAnotherThread {
            usleep(30_000)  // past the instant the timer was armed for
        }
        #expect(result == .stopped)
        #expect(restops == 0)
        #expect(wakes.count == 1)  // the stop's: no wake-up at the old timer's instant
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func anExpiredDeadlineTimerTheKernelRefusesToReArmDoesNotEndEveryWait(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        let pipe = try TestPipe()
        _ = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        let due = loop.now + .milliseconds(2)
        let firedAt = Recorder<LoopInstant>()
        loop.add(LoopTimer(fireAt: due) { _ in
            firedAt.append(loop.now)
            // The timer's descriptor has expired; every arming from now on fails, so none clears it.
            SystemCallFaults.inject(EINVAL, into: "timerfd_settime", count: 1_000_000)
        }, forMode: .default)
        let end = loop.now + .milliseconds(50)
        let before = loop.counters

        #expect(loop.run(mode: .default, before: end) == .timedOut)
        #expect(try #require(firedAt.elements.first) >= due)
        #expect(loop.now >= end)
        // Not a spin on the expired descriptor: a few waits, then the poll's own timeout.
        #expect(loop.counters.since(before).waits < 20)
    }

    @Test func aWakeUpDuringATimedSleepInTheEpollSetRunsTheBlockBeforeTheTimer() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        _ = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        let events = Recorder<String>()
        loop.add(LoopTimer(fireAt: loop.now + .seconds(30)) { _ in events.append("timer") }, forMode: .default)
        let helper = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }  // asleep, with the timerfd armed 30 s ahead
            loop.perform {
                events.append("block")
                loop.stop()
            }
        }
        defer { helper.join() }

        #expect(loop.run(mode: .default, before: loop.now + .seconds(60)) == .stopped)
        #expect(events.elements == ["block"])
    }

    /// A loop on the epoll path whose one idle source a first, short run has registered in the set, with a timer due
    /// `delay` from then that stops the loop, and a record of its wake-ups: for the faults of the epoll sleep.
    private func loopSleepingInEpoll(
        withTimerIn delay: Duration
    ) throws -> (loop: Loop, pipe: TestPipe, due: LoopInstant, firedAt: Recorder<LoopInstant>,
                 wakes: Recorder<LoopActivity>) {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        let pipe = try TestPipe()
        _ = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        try loop.sleepOnceInEpoll()
        let due = loop.now + delay
        let firedAt = self.addStoppingTimer(to: loop, at: due)
        return (loop, pipe, due, firedAt, self.recordWakeUps(of: loop))
    }

    @Test func signalsDuringASleepInTheEpollSetNeitherWakeItEarlyNorLoseTheTimer() throws {
        let (loop, pipe, due, firedAt, wakes) = try self.loopSleepingInEpoll(withTimerIn: .milliseconds(5))
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        SystemCallFaults.inject(EINTR, into: "epoll_wait", count: 5)

        #expect(loop.run(mode: .default, before: due + .seconds(30)) == .stopped)
        #expect(SystemCallFaults.remainingForCurrentThread == 0)
        #expect(firedAt.count == 1)
        #expect(try #require(firedAt.elements.first) >= due)
        #expect(wakes.count == 1)  // the timer's wake-up, not one per signal
        withExtendedLifetime(pipe) {}
    }

    @Test func aLastingFailureOfTheEpollSleepRunsNoPassUntilTheTimerIsDue() throws {
        let (loop, pipe, due, firedAt, wakes) = try self.loopSleepingInEpoll(withTimerIn: .milliseconds(20))
        defer { loop.invalidate() }
        defer { SystemCallFaults.clearForCurrentThread() }
        SystemCallFaults.inject(ENOMEM, into: "epoll_wait", count: 1_000_000)

        #expect(loop.run(mode: .default, before: due + .seconds(30)) == .stopped)
        #expect(try #require(firedAt.elements.first) >= due)
        // About one try per millisecond, each a wait again rather than a pass with nothing to do.
        #expect(wakes.count <= 2)
        withExtendedLifetime(pipe) {}
    }

    @Test func aSourceOnANumberTheLoopUsesItselfLeavesTheLoopsTimerInTheEpollSet() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        _ = self.addReporter(to: loop, descriptor: pipe.readEnd, events: .readable)
        // As if a source's descriptor had been closed without a cancel and the loop's timerfd had got its number.
        let own = try #require(loop.pollWaiter?.deadlineTimerDescriptor)
        // A timer lost from the epoll set would leave the loop asleep for ever: a watchdog wakes each such run
        // instead, and the test fails on the order of events (or a run's result).
        let events = Recorder<String>()
        let finished = Recorder<Bool>()
        let watchdog = startThread {
            while !waitUntil(limit: .seconds(10), { finished.count > 0 }) {
                events.append("watchdog")
                loop.stop()
            }
        }
        defer { watchdog.join() }
        defer { finished.append(true) }
        let stale = LoopDescriptorSource(descriptor: own, events: .readable) { _, _ in }
        loop.add(stale, forMode: .default)
        try loop.sleepOnceInEpoll()
        stale.invalidate()  // must not take the loop's timer out of the epoll set with it
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(1)) == .timedOut)
        let due = loop.now + .milliseconds(5)
        let firedAt = self.addStoppingTimer(to: loop, at: due) { events.append("timer") }

        #expect(loop.run(mode: .default, before: .distantFuture) == .stopped)
        #expect(try #require(firedAt.elements.first) >= due)
        #expect(events.elements == ["timer"])  // woken by its timer, not by the watchdog
    }

    /// A source on the number of another mode's epoll set is reported `invalid` and cancelled, whether its own mode
    /// polls its descriptors (small) or registers them in a set of its own (large): polled or registered, the number
    /// would report the other set's readiness, here a descriptor left readable, on every pass.
    @Test(arguments: [false, true])
    func aSourceOnTheNumberOfAnotherModesEpollSetIsReportedInvalidAndCancelled(ownModeIsLarge: Bool) throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let waiter = try #require(loop.pollWaiter)
        waiter.largeModeThreshold = ownModeIsLarge ? 1 : 3
        let trackingPipes = try (0..<3).map { _ in try TestPipe() }
        for pipe in trackingPipes {
            loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }, forMode: .tracking)
        }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
        try loop.sleepOnceInEpoll(mode: .tracking)
        let trackingSet = try #require(loop.epollRegistry(of: .tracking)?.descriptor)
        trackingPipes[0].write("never read")  // the tracking set stays readable

        let (pipe, reads) = try self.addPipeReader(to: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let reports = Recorder<DescriptorEvents>()
        let stale = LoopDescriptorSource(descriptor: trackingSet, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(stale, forMode: .default)
        pipe.write("a")
        try loop.runBriefly { reads.elements == ["a"] }
        #expect(reports.elements == [.invalid])
        #expect(!stale.isValid)
        #expect((loop.epollRegistry(of: .default) != nil) == ownModeIsLarge)
    }

    /// A source registered on a descriptor that is then closed without a cancel, whose number another mode's epoll
    /// set gets when that mode first sleeps, is reported `invalid` and cancelled when the sweep comes to it. A poll of
    /// the number would look at the set, which is open, and the source would sit in its mode for good.
    @Test func aSweptSourceWhoseNumberBecameAnotherModesEpollSetIsReportedInvalid() throws {
        // The set gets the lowest free number; another test's thread may take the closed one first, so a few tries.
        for _ in 0..<10 {
            let loop = try DescriptorWaitPath.epoll.makeLoop()
            defer { loop.invalidate() }
            let waiter = try #require(loop.pollWaiter)
            waiter.largeModeThreshold = 1
            let (pipe, reads) = try self.addPipeReader(to: loop)
            loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
            let doomed = try TestPipe()
            let reports = self.addReporter(to: loop, descriptor: doomed.readEnd, events: .readable)
            try loop.sleepOnceInEpoll()  // the doomed source is registered in the default mode's set
            let trackingPipe = try TestPipe()
            loop.add(LoopDescriptorSource(descriptor: trackingPipe.readEnd, events: .readable) { _, _ in },
                     forMode: .tracking)
            loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .tracking)
            let number = doomed.readEnd
            doomed.closeReadEnd()
            try loop.sleepOnceInEpoll(mode: .tracking)  // its set is made now, on the lowest free number
            guard loop.epollRegistry(of: .tracking)?.descriptor == number else { continue }
            trackingPipe.write("never read")  // the tracking set stays readable
            try loop.runBriefly { !reports.elements.isEmpty }
            #expect(reports.elements == [.invalid])
            #expect(loop.epollRegistry(of: .tracking)?.descriptor == number)  // the set itself untouched
            pipe.write("a")
            try loop.runBriefly { reads.elements == ["a"] }
            #expect(reports.elements == [.invalid])
            return
        }
        Issue.record("the tracking mode's epoll set never got the closed number in ten tries")
    }

    /// A source on the number of the mode's own epoll set (its descriptor was closed without a cancel, and the set,
    /// made after, got the number) is reported `invalid` and cancelled, instead of being called with the set's
    /// readiness, and the loop goes on sleeping in the set.
    @Test func aSourceOnTheNumberOfItsModesEpollSetIsReportedInvalidAndCancelled() throws {
        let loop = try DescriptorWaitPath.epoll.makeLoop()
        defer { loop.invalidate() }
        let (pipe, reads) = try self.addPipeReader(to: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        try loop.sleepOnceInEpoll()
        let setNumber = try #require(loop.epollRegistry()?.descriptor)
        let reports = Recorder<DescriptorEvents>()
        let stale = LoopDescriptorSource(descriptor: setNumber, events: .readable) { _, events in
            reports.append(events)
        }
        loop.add(stale, forMode: .default)
        pipe.write("a")  // makes the set readable: a poll of its number would call the stale source
        try loop.runBriefly { reads.elements == ["a"] }
        #expect(reports.elements == [.invalid])
        #expect(!stale.isValid)
        pipe.write("b")
        try loop.runBriefly { reads.elements == ["a", "b"] }
        #expect(loop.epollRegistry()?.descriptor == setNumber)  // the same set, slept in
        #expect(reports.elements == [.invalid])
    }
}

/// A poller that makes the loop's polls (ppoll) and records the timeout of each. Loop thread only.
private final class RecordingPoller: Poller {
    private let base = SystemPoller()
    private(set) var timeouts: [Int64] = []

    var count: Int { self.base.count }

    func reset() {
        self.base.reset()
    }

    func append(_ descriptor: CInt, events: DescriptorEvents) {
        self.base.append(descriptor, events: events)
    }

    func waitForEvents(timeoutNanoseconds: Int64) -> Int {
        self.timeouts.append(timeoutNanoseconds)
        return self.base.waitForEvents(timeoutNanoseconds: timeoutNanoseconds)
    }

    func events(at index: Int) -> DescriptorEvents {
        self.base.events(at: index)
    }
}

/// A number whose epoll reports poll keeps failing to confirm after a rebuild: a lost race each time (a listening socket
/// several processes accept on), which no rebuild cures. Each rebuild costs O(n), so they come ever further apart.
@Suite("Rebuilds asked for by one number")
struct RebuildSpacingTests {
    /// The waits at which number 7 may rebuild when it asks at every wait, out of `waits`.
    private func rebuildWaits(_ spacing: inout RebuildSpacing, waits: Int) -> [Int] {
        var rebuilds: [Int] = []
        for wait in 0..<waits {
            spacing.noteWait()
            if spacing.mayRebuild(for: 7) { rebuilds.append(wait) }
        }
        return rebuilds
    }

    @Test func theFirstRebuildComesAtOnceAndEachNextOneTwiceAsLateUpToTheMaximum() {
        var spacing = RebuildSpacing()
        let rebuilds = self.rebuildWaits(&spacing, waits: 4_200)
        #expect(Array(rebuilds.prefix(12)) == [0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 1023, 2047])
        let gaps = zip(rebuilds, rebuilds.dropFirst()).map { $1 - $0 }
        #expect(gaps.suffix(2) == [RebuildSpacing.maximumSpacing, RebuildSpacing.maximumSpacing])  // spaced, never stopped
    }

    @Test func aNumberWhoseRegistrationChangedStartsAfreshAndOthersAreNotHeldBack() {
        var spacing = RebuildSpacing()
        _ = self.rebuildWaits(&spacing, waits: 100)
        let otherMay = spacing.mayRebuild(for: 8)
        #expect(otherMay, "another number's first rebuild comes at once")
        let heldBack = spacing.mayRebuild(for: 7)
        #expect(!heldBack, "7 asked at the wait before")
        spacing.forget(7)  // a source joined on 7: it may name another file, whose stale twin needs a rebuild now
        let afresh = spacing.mayRebuild(for: 7)
        #expect(afresh)
    }
}
