#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

/// Invalidated and removed items are released at once, and a loop of the user's own is freed with its descriptors
/// once the user lets go of it and of its items, even when they capture it. Counted with weak references and the
/// process's open descriptors.
@Suite("Releasing loops and items", .serialized)
struct ReleaseTests {
    /// Something a closure captures, whose lifetime the tests watch.
    final class Payload: Sendable {}

    /// The number of open descriptors of this process.
    static func openDescriptorCount() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(directory) }
        var count = 0
        while readdir(directory) != nil { count += 1 }
        return count
    }

    @Test func anInvalidatedTimerAndWhatItsClosureCapturesAreFreedBeforeItsDeadline() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        weak var weakTimer: LoopTimer?
        weak var weakPayload: Payload?
        do {
            let payload = Payload()
            weakPayload = payload
            let timer = LoopTimer(interval: .seconds(60)) { _ in _ = payload }
            weakTimer = timer
            loop.add(timer, forMode: .common)
            loop.runOnePass()
            timer.invalidate()
        }
        #expect(weakTimer == nil)
        #expect(weakPayload == nil)
    }

    @Test func aTimerRemovedFromItsOnlyModeIsFreedAtOnce() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        weak var weakTimer: LoopTimer?
        do {
            let timer = LoopTimer(interval: .seconds(60)) { _ in }
            weakTimer = timer
            loop.add(timer, forMode: .default)
            loop.remove(timer, forMode: .default)
        }
        #expect(weakTimer == nil)
    }

    @Test func armingAndCancellingAnIdleTimeoutPerRequestKeepsNothingAlive() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let keepAlive = LoopSource { _ in }
        loop.add(keepAlive, forMode: .default)
        let payloads = Recorder<WeakPayload>()
        for _ in 0..<10_000 {
            let payload = Payload()
            payloads.append(WeakPayload(payload))
            let timeout = LoopTimer(interval: .seconds(30)) { _ in _ = payload }
            loop.add(timeout, forMode: .default)
            loop.perform { timeout.invalidate() }
            loop.runOnePass()
        }
        #expect(payloads.elements.allSatisfy { $0.payload == nil })
        #expect(loop.modeItemsByMode[.default]!.timers.queue.count <= 64)
    }

    @Test func aSignalledSourceInvalidatedBeforeItRanIsFreed() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        weak var weakSource: LoopSource?
        do {
            let source = LoopSource { _ in }
            weakSource = source
            loop.add(source, forMode: .tracking)
            source.signal()
            loop.add(LoopTimer(interval: .seconds(60)) { _ in }, forMode: .default)
            loop.runOnePass()  // takes the signal, which waits for a run of tracking
            source.invalidate()
        }
        #expect(weakSource == nil)
    }

    @Test func aDescriptorSourceInvalidatedAfterAPassIsFreed() throws {
        #expect(try Self.isDescriptorSourceFreed { loop, pipe, source in
            pipe.write()
            loop.runOnePass()
            source.invalidate()
        })
    }

    /// The waiter's list of sources whose `events` changed lets go of one that leaves its last mode, without a wait.
    @Test func aDescriptorSourceWhoseEventsChangedIsFreedWhenInvalidatedWithoutAWait() throws {
        #expect(try Self.isDescriptorSourceFreed { _, _, source in
            source.events = .writable
            source.invalidate()
        })
    }

    /// Adds a descriptor source on a pipe to a loop's default mode, lets `use` drive it, and tells whether nothing
    /// keeps it alive afterwards.
    static func isDescriptorSourceFreed(_ use: (Loop, TestPipe, LoopDescriptorSource) -> Void) throws -> Bool {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        let pipe = try TestPipe()
        weak var weakSource: LoopDescriptorSource?
        do {
            let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in }
            weakSource = source
            loop.add(source, forMode: .default)
            use(loop, pipe, source)
        }
        return weakSource == nil
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func aUsersOwnLoopWhoseItemsCaptureItIsFreed(_ path: DescriptorWaitPath) throws {
        #expect(try Self.useAndDropALoopWhoseItemsCaptureIt(path))
    }

    @Test func aUsersOwnLoopGivesBackItsDescriptorsWhenItIsFreed() async {
        // In a process of its own, so that no other test opens or closes descriptors meanwhile.
        await #expect(processExitsWith: .success) {
            func check() throws {
                // One round first, so that whatever the process opens once on first use is not counted; then many,
                // so that a loop that kept even one descriptor shows as growth the harness's own few cannot match.
                for path in DescriptorWaitPath.allCases {
                    guard try ReleaseTests.useAndDropALoopWhoseItemsCaptureIt(path) else { exit(2) }
                }
                let before = ReleaseTests.openDescriptorCount()
                let rounds = 20
                for _ in 0..<rounds {
                    for path in DescriptorWaitPath.allCases {
                        guard try ReleaseTests.useAndDropALoopWhoseItemsCaptureIt(path) else { exit(2) }
                    }
                }
                let grown = ReleaseTests.openDescriptorCount() - before
                exit(grown < rounds ? 0 : 1)
            }
            try check()
        }
    }

    @Test func aThreadThatEndsWithALoopDoesNotCreateTheMainLoop() async {
        // In a process of its own, where nothing has touched `Loop.main`: it would hold two descriptors for good.
        await #expect(processExitsWith: .success) {
            let before = ReleaseTests.openDescriptorCount()
            for _ in 0..<5 {
                startThread { _ = Loop.current }.join()  // a thread's loop, torn down as the thread exits
            }
            // `Loop.main` would hold at least two (its wake-up pipe); the test harness may open one of its own meanwhile.
            exit(ReleaseTests.openDescriptorCount() - before < 2 ? 0 : 1)
        }
    }

    @Test func everyDescriptorLoopKitOpensIsCloseOnExec() async {
        // In a process of its own: every descriptor opened after the start is LoopKit's, and none may leak into a
        // child that the program spawns.
        await #expect(processExitsWith: .success) {
            func openDescriptors() -> Set<CInt> {
                Set((0..<1024).filter { fcntl($0, F_GETFD) != -1 })
            }
            func check() throws -> Bool {
                let before = openDescriptors()
                let loop = try Loop()  // the wake-up channel and the deadline timer
                let thread = try LoopThread(name: "cloexec")
                let signals = try LoopSignalSource(signal: SIGUSR1, loop: loop) { _ in }
                let driver = try LoopHostDriver(loop: loop)  // an epoll set
                let added = openDescriptors().subtracting(before)
                let allCloseOnExec = added.allSatisfy { fcntl($0, F_GETFD) & FD_CLOEXEC != 0 }
                signals.invalidate()
                thread.shutdownAndJoin()
                withExtendedLifetime(driver) {}
                loop.invalidate()
                return added.count >= 6 && allCloseOnExec
            }
            exit(try check() ? 0 : 1)
        }
    }

    @Test func aLoopThreadThatCannotGetDescriptorsThrowsInsteadOfTrapping() async {
        await #expect(processExitsWith: .success) {
            var limit = rlimit()
            getrlimit(RLIMIT_NOFILE_VALUE, &limit)
            let original = limit
            let lowestFree = dup(0)  // every number below it is taken
            close(lowestFree)
            limit.rlim_cur = rlim_t(lowestFree)  // so nothing is left to open
            setrlimit(RLIMIT_NOFILE_VALUE, &limit)
            let code: Int32
            do throws(SystemCallError) {
                _ = try LoopThread(name: "starved")
                code = 3
            } catch {
                code = error.code == EMFILE ? 0 : 4
            }
            var restored = original  // a sanitizer reading /proc at exit needs descriptors
            setrlimit(RLIMIT_NOFILE_VALUE, &restored)
            exit(code)
        }
    }

    /// Makes a loop whose timer, sources and observer capture it, runs it, invalidates the items and lets go of
    /// everything. Returns whether the loop was freed.
    static func useAndDropALoopWhoseItemsCaptureIt(_ path: DescriptorWaitPath) throws -> Bool {
        weak var weakLoop: Loop?
        let pipe = try TestPipe()
        do {
            let loop = try path.makeLoop()
            defer { loop.invalidate() }
            weakLoop = loop
            let timer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in _ = loop.now }
            let source = LoopSource { _ in _ = loop.now }
            let descriptorSource = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
                _ = loop.now
            }
            let observer = LoopObserver(activities: .allActivities) { _, _ in _ = loop.now }
            loop.add(timer, forMode: .common)
            loop.add(source, forMode: .default)
            loop.add(descriptorSource, forMode: .default)
            loop.add(observer, forMode: .default)
            source.signal()
            pipe.write()
            loop.perform { _ = loop.now }
            loop.run(mode: .default, before: loop.now + .milliseconds(5))
            source.signal()  // pending when the items are invalidated
            timer.invalidate()
            source.invalidate()
            descriptorSource.invalidate()
            observer.invalidate()
        }
        return weakLoop == nil
    }

    /// A source whose `events` change after it left its last mode is listed for the waiter; a loop that then sleeps
    /// on its futex (a `LoopThread` whose mode has no descriptor sources left) still lets go of it, and of its handler.
    @Test func aSourceChangedAfterLeavingItsLastModeIsReleasedByALoopSleepingOnItsFutex() throws {
        let thread = try LoopThread(name: "futex-release")
        defer { thread.shutdownAndJoin() }
        let pipe = try TestPipe()
        let weakPayload = LoopLock<WeakPayload?>(nil)
        thread.perform {
            let payload = Payload()
            weakPayload.withLock { $0 = WeakPayload(payload) }
            let source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in _ = payload }
            thread.loop.add(source, forMode: .default)
            thread.loop.perform {  // a later pass: the source has been in a wait
                thread.loop.remove(source, forMode: .default)
                source.events = []
            }
        }
        #expect(waitUntil(limit: .seconds(20)) {
            weakPayload.withLock { $0 != nil && $0?.payload == nil }
        })
        withExtendedLifetime(pipe) {}
    }
}

/// A weak reference to a payload, for counting the survivors.
final class WeakPayload: @unchecked Sendable {
    weak var payload: ReleaseTests.Payload?
    init(_ payload: ReleaseTests.Payload) { self.payload = payload }
}
