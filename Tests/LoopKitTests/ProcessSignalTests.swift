#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import Testing
@testable import LoopKit

/// Signal sources and the process's signals. A signal's disposition and its delivery are process-wide, so every test
/// in the process that installs, ignores or sends a signal is here, in one serialized suite: run beside each other,
/// one test's `SIG_IGN` or restore would replace another's live handler, and one test's signal would be counted by
/// another's source. (Exit tests run in their own process and may use signals anywhere.)
@Suite("Process signals", .serialized, .timeLimit(.minutes(1)))
struct ProcessSignalTests {
    @Test func eachProcessSignalIsDeliveredToTheLoopAsASourceAndCounted() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let counts = Recorder<Int>()
        let source = try LoopSignalSource(signal: SIGUSR1, loop: loop) { count in
            counts.append(count)
        }
        defer { source.invalidate() }
        let start = loop.now
        for round in 1...3 {
            LoopSignalSource.sendToThisProcess(SIGUSR1)
            while counts.elements.reduce(0, +) < round, loop.now < start + .seconds(30) {
                loop.run(mode: .default, before: start + .seconds(30), returnAfterSourceHandled: true)
            }
        }
        #expect(counts.elements.reduce(0, +) == 3)
        #expect(counts.elements.allSatisfy { $0 >= 1 })
    }

    @Test func aSignalWakesASleepingLoop() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let counts = Recorder<Int>()
        let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { count in
            counts.append(count)
            loop.stop()
        }
        defer { source.invalidate() }
        let raiser = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            LoopSignalSource.sendToThisProcess(SIGUSR2)
        }
        let result = loop.run(mode: .default, before: loop.now + .seconds(30))
        raiser.join()
        #expect(result == .stopped)
        #expect(counts.elements == [1])
    }

    @Test func severalSourcesOfOneSignalOnTwoLoopsAllSeeIt() throws {
        let first = try Loop()
        defer { first.invalidate() }
        let second = try Loop()
        defer { second.invalidate() }
        let seen = Recorder<String>()
        let sources = try [
            LoopSignalSource(signal: SIGWINCH, loop: first) { _ in seen.append("first a") },
            LoopSignalSource(signal: SIGWINCH, loop: first) { _ in seen.append("first b") },
            LoopSignalSource(signal: SIGWINCH, loop: second) { _ in seen.append("second") },
        ]
        defer { for source in sources { source.invalidate() } }
        LoopSignalSource.sendToThisProcess(SIGWINCH)
        let start = first.now
        while seen.count < 3, first.now < start + .seconds(30) {
            first.run(mode: .default, before: first.now + .milliseconds(10))
            second.run(mode: .default, before: second.now + .milliseconds(10))
        }
        #expect(Set(seen.elements) == ["first a", "first b", "second"])
    }

    @Test func aSourceWhoseHandleIsDroppedKeepsDeliveringUntilInvalidated() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let seen = Recorder<Int>()
        weak var weakSource: LoopSignalSource?
        do {
            let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { seen.append($0) }
            weakSource = source  // the test's last reference goes at the end of this scope
        }
        #expect(weakSource != nil)  // the loop keeps it
        LoopSignalSource.sendToThisProcess(SIGUSR2)
        let start = loop.now
        while seen.count < 1, loop.now < start + .seconds(30) {
            loop.run(mode: .default, before: loop.now + .seconds(30), returnAfterSourceHandled: true)
        }
        #expect(seen.elements == [1])
        weakSource?.invalidate()
        #expect(weakSource == nil)
    }

    @Test func anUncatchableSignalIsAThrownError() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        #expect(throws: SystemCallError(call: "sigaction", code: EINVAL)) {
            _ = try LoopSignalSource(signal: SIGKILL, loop: loop) { _ in }
        }
        let source = try LoopSignalSource(signal: SIGWINCH, loop: loop) { _ in }
        source.invalidate()
    }

    @Test func aSignalThatAFaultRaisesIsAThrownErrorAndKeepsItsDisposition() throws {
        // Its handler would return into the faulting instruction, which would fault again, for ever: a crash would hang.
        let loop = try Loop()
        defer { loop.invalidate() }
        for number in [SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS] {
            var before = sigaction()
            sigaction(number, nil, &before)
            #expect(throws: SystemCallError(call: "sigaction", code: EINVAL), "signal \(number)") {
                _ = try LoopSignalSource(signal: number, loop: loop) { _ in }
            }
            var after = sigaction()
            sigaction(number, nil, &after)
            let handler = { (action: sigaction) in unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) }
            #expect(handler(after) == handler(before))
        }
    }

    @Test func aRemovedListenersTicketTakesNothingFromTheNextListenerOfItsSlot() throws {
        // A source's handler may take its count just after another thread invalidated it, while a new source of the
        // same signal has its slot: the deliveries counted for the new one stay the new one's.
        let first = try WakeupPipe()
        let second = try WakeupPipe()
        let old = try ProcessSignals.install(SIGUSR1, notifying: first)
        ProcessSignals.uninstall(SIGUSR1, ticket: old)
        let new = try ProcessSignals.install(SIGUSR1, notifying: second)
        defer { ProcessSignals.uninstall(SIGUSR1, ticket: new) }
        #expect(new != old)
        #expect(new % 16 == old % 16, "the same slot, a later listener")
        // The handler counts, then writes its byte; it may run on another thread after `kill` returns.
        func raiseAndWaitForTheByte() {
            ProcessSignals.raiseInProcess(SIGUSR1)
            var watch = pollfd(fd: second.readEnd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&watch, 1, 10_000) == 1)
            second.drain()
        }
        raiseAndWaitForTheByte()
        #expect(ProcessSignals.takeCount(SIGUSR1, ticket: old) == 0)
        #expect(ProcessSignals.takeCount(SIGUSR1, ticket: new) == 1)
        ProcessSignals.uninstall(SIGUSR1, ticket: old)  // a second removal does nothing to the new listener
        raiseAndWaitForTheByte()
        #expect(ProcessSignals.takeCount(SIGUSR1, ticket: new) == 1)
    }

    @Test func aSourceWhoseLoopEndsIsInvalidatedAndGivesItsSignalBack() throws {
        let thread = try LoopThread(name: "signals")
        weak var weakSource: LoopSignalSource?
        do {
            let source = try LoopSignalSource(signal: SIGUSR2, loop: thread.loop) { _ in }
            weakSource = source
            #expect(source.isValid)
        }
        #expect(weakSource != nil)  // kept alive by its loop while valid
        thread.shutdownAndJoin()
        #expect(weakSource == nil)  // ended with its loop: invalidated and freed, not left swallowing SIGUSR2
        var action = sigaction()
        sigaction(SIGUSR2, nil, &action)
        #expect(action.__sigaction_handler.sa_handler == nil)  // SIG_DFL again: no LoopKit handler installed
    }

    @Test func aSourceMadeForALoopThatHasEndedIsInvalidAndLeavesTheSignalAlone() throws {
        let thread = try LoopThread(name: "signals-after-end")
        thread.shutdownAndJoin()
        weak var weakSource: LoopSignalSource?
        do {
            let source = try LoopSignalSource(signal: SIGUSR2, loop: thread.loop) { _ in }
            weakSource = source
            #expect(!source.isValid)
        }
        #expect(weakSource == nil)
        var action = sigaction()
        sigaction(SIGUSR2, nil, &action)
        #expect(action.__sigaction_handler.sa_handler == nil)  // SIG_DFL: no LoopKit handler left behind
    }

    /// A loop of one's own that is let go of without `invalidate()` ends its signal sources as it goes.
    @Test func aSourceWhoseLoopIsFreedIsInvalidatedAndGivesItsSignalBack() throws {
        weak var weakSource: LoopSignalSource?
        weak var weakLoop: Loop?
        do {
            let loop = try Loop()
            weakLoop = loop
            let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
            weakSource = source
        }
        #expect(weakLoop == nil)
        #expect(weakSource == nil)
        var action = sigaction()
        sigaction(SIGUSR2, nil, &action)
        #expect(action.__sigaction_handler.sa_handler == nil)
    }

    /// A process whose threads all block a signal (a child spawned from one of Dispatch's threads inherits such a
    /// mask) would never see it: creating a source lets the calling thread take it.
    @Test func creatingASourceUnblocksItsSignalOnTheCallingThread() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let blockedAfter = Atomic<Bool>(true)
        let thread = startThread {
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGUSR2)
            pthread_sigmask(SIG_BLOCK, &signals, nil)
            let source = try! LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
            var mask = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &mask)
            blockedAfter.store(sigismember(&mask, SIGUSR2) == 1, ordering: .relaxed)
            source.invalidate()
        }
        thread.join()
        #expect(blockedAfter.load(ordering: .relaxed) == false)
    }

    /// Ignores SIGUSR2 (a disposition the tests can tell from the default), returning the one it replaced.
    static func ignoreSIGUSR2() -> sigaction {
        var ignore = sigaction()
        ignore.__sigaction_handler.sa_handler = SIG_IGN
        var saved = sigaction()
        sigaction(SIGUSR2, &ignore, &saved)
        return saved
    }

    static func restoreSIGUSR2(_ saved: sigaction) {
        var saved = saved
        sigaction(SIGUSR2, &saved, nil)
    }

    @Test func cancellingASignalSourceRestoresTheDispositionItReplaced() throws {
        let saved = Self.ignoreSIGUSR2()
        defer { Self.restoreSIGUSR2(saved) }
        let loop = try Loop()
        defer { loop.invalidate() }
        let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
        source.invalidate()
        var now = sigaction()
        sigaction(SIGUSR2, nil, &now)
        #expect(unsafeBitCast(now.__sigaction_handler.sa_handler, to: Int.self) == 1)  // SIG_IGN
    }

    @Test func aHandlerTheProgramInstalledAfterTheSourceStaysWhenTheSourceIsCancelled() throws {
        let saved = Self.ignoreSIGUSR2()
        defer { Self.restoreSIGUSR2(saved) }
        let loop = try Loop()
        defer { loop.invalidate() }
        let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
        var own = sigaction()
        own.__sigaction_handler.sa_handler = programsOwnSIGUSR2Handler
        sigaction(SIGUSR2, &own, nil)  // the program's own handler, after LoopKit's
        source.invalidate()
        var now = sigaction()
        sigaction(SIGUSR2, nil, &now)
        // Not SIG_IGN, which was there before the source: LoopKit takes out only its own handler.
        let address = { (handler: __sighandler_t?) in unsafeBitCast(handler, to: Int.self) }
        #expect(address(now.__sigaction_handler.sa_handler) == address(programsOwnSIGUSR2Handler))
    }

    /// With `replacedSIGUSR2Handler` installed before LoopKit's, runs `arrange` (which makes and removes sources on
    /// `loop`, and leaves some handler in place), raises SIGUSR2 on this thread (delivered before raise returns) and
    /// returns how many times that first handler ran.
    static func callsOfTheHandlerBeforeLoopKit(after arrange: (_ loop: Loop) throws -> Void) throws -> Int {
        var replaced = sigaction()
        replaced.__sigaction_handler.sa_handler = replacedSIGUSR2Handler
        var saved = sigaction()
        sigaction(SIGUSR2, &replaced, &saved)
        defer { Self.restoreSIGUSR2(saved) }
        let loop = try Loop()
        defer { loop.invalidate() }
        try arrange(loop)
        replacedHandlerCalls.store(0, ordering: .relaxed)
        raise(SIGUSR2)
        return replacedHandlerCalls.load(ordering: .relaxed)
    }

    @Test func aDeliveryAHandlerInstalledSincePassesOnAfterTheLastSourceGoesReachesTheHandlerLoopKitReplaced() throws {
        let calls = try Self.callsOfTheHandlerBeforeLoopKit { loop in
            let source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }  // unblocks SIGUSR2 on this thread
            var chaining = sigaction()
            chaining.__sigaction_handler.sa_sigaction = chainingSIGUSR2Handler
            chaining.sa_flags = SA_SIGINFO
            sigaction(SIGUSR2, &chaining, &handlerBeforeTheChainingOne)  // a library's, which calls the one it replaced
            source.invalidate()  // LoopKit's handler is not the current one: the library's stays
        }
        #expect(calls == 1, "passed on, not swallowed by LoopKit's handler")
    }

    /// Code that saved LoopKit's handler and puts it back: the next source must not take LoopKit's own handler for the
    /// disposition it replaced, or a delivery passed on would come back to it, and the one before LoopKit be lost.
    @Test func loopKitsHandlerPutBackByTheProgramStillPassesDeliveriesOnToTheHandlerBeforeIt() throws {
        let calls = try Self.callsOfTheHandlerBeforeLoopKit { loop in
            let first = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
            var loopKits = sigaction()
            sigaction(SIGUSR2, nil, &loopKits)  // saved...
            first.invalidate()
            sigaction(SIGUSR2, &loopKits, nil)  // ...and put back
            let second = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in }
            second.invalidate()  // LoopKit's is the current one: the handler from before LoopKit comes back
            sigaction(SIGUSR2, &loopKits, nil)  // put back once more
        }
        #expect(calls == 1, "passed on to the handler from before LoopKit")
    }

    /// The add reaches the loop as a queued change, which the loop drops when its thread ends first: the source must
    /// not stay installed (swallowing the signal) with nothing to read its pipe.
    @Test func aSignalSourceWhoseAddItsEndingLoopDroppedEndsWithIt() throws {
        let saved = Self.ignoreSIGUSR2()
        defer { Self.restoreSIGUSR2(saved) }
        let loops = Recorder<Loop>()
        let (created, added) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let owner = startThread {
            loops.append(Loop.current)  // this thread's loop, which it never runs, and ends as the thread exits
            created.signal()
            added.wait()
        }
        created.wait()
        let source = try LoopSignalSource(signal: SIGUSR2, loop: loops.elements[0]) { _ in }
        #expect(source.isValid)
        added.signal()
        owner.join()
        #expect(!source.isValid)
        var now = sigaction()
        sigaction(SIGUSR2, nil, &now)
        #expect(unsafeBitCast(now.__sigaction_handler.sa_handler, to: Int.self) == 1)  // SIG_IGN again
    }

    /// A signal taken after a `LoopThread`'s last pass (here, by a block of its final stretch) still reaches the
    /// handler, on the loop's thread, before the source ends with the loop.
    @Test func aSignalTakenAfterTheLastPassOfAnEndingLoopThreadIsDelivered() throws {
        let saved = Self.ignoreSIGUSR2()
        defer { Self.restoreSIGUSR2(saved) }
        let thread = try LoopThread(name: "last-signal")
        let counts = Recorder<Bool>()
        let source = try LoopSignalSource(signal: SIGUSR2, loop: thread.loop) { _ in counts.append(thread.loop.isCurrent) }
        thread.perform {
            thread.shutdown()
            thread.perform {  // runs after the last pass, in the thread's final stretch
                var set = sigset_t()
                sigemptyset(&set)
                sigaddset(&set, SIGUSR2)
                pthread_sigmask(SIG_UNBLOCK, &set, nil)
                pthread_kill(pthread_self(), SIGUSR2)  // taken by this thread before pthread_kill returns
            }
        }
        thread.join()
        #expect(counts.elements == [true])
        #expect(!source.isValid)
    }

    /// A signal taken while a `LoopThread`'s final drain runs blocks reaches the handler while the loop still takes
    /// work: a block the handler queues runs, where after the end `perform` would trap. In a child process, so that a
    /// regression fails this test rather than ending the whole run.
    @Test func aHandlerCalledInAFinalDrainMayStillQueueWork() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            _ = ProcessSignalTests.ignoreSIGUSR2()
            let thread = try LoopThread(name: "drain-signal")
            let trace = Recorder<String>()
            let source = try LoopSignalSource(signal: SIGUSR2, loop: thread.loop) { count in
                trace.append("handler \(count)")
                thread.loop.perform { trace.append("block queued by the handler") }
            }
            thread.perform {
                thread.shutdown()
                thread.perform {  // runs in the thread's final drain, whose waits are over
                    var set = sigset_t()
                    sigemptyset(&set)
                    sigaddset(&set, SIGUSR2)
                    pthread_sigmask(SIG_UNBLOCK, &set, nil)
                    pthread_kill(pthread_self(), SIGUSR2)  // taken by this thread before pthread_kill returns
                    trace.append("final block")
                }
            }
            thread.join()
            let expected = ["final block", "handler 1", "block queued by the handler"]
            guard trace.elements == expected, !source.isValid else {
                let message = Array("trace \(trace.elements), source valid: \(source.isValid)\n".utf8)
                _ = message.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }  // to the parent's report
                exit(1)
            }
        }
        let message = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(result?.exitStatus == .exitCode(0), "stderr: \(message.prefix(600))")
    }

    /// Removing a listener hands back the deliveries counted for it and not taken, so that a caller can still pass
    /// them on; a second removal returns none.
    @Test func removingAListenerReturnsItsUntakenDeliveries() throws {
        let saved = Self.ignoreSIGUSR2()
        defer { Self.restoreSIGUSR2(saved) }
        let pipe = try WakeupPipe()
        let ticket = try ProcessSignals.install(SIGUSR2, notifying: pipe)
        for _ in 0..<2 {
            ProcessSignals.raiseInProcess(SIGUSR2)
            var watch = pollfd(fd: pipe.readEnd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&watch, 1, 10_000) == 1)  // the handler may run on another thread after `kill` returns
            pipe.drain()
        }
        #expect(ProcessSignals.uninstall(SIGUSR2, ticket: ticket) == 2)
        #expect(ProcessSignals.uninstall(SIGUSR2, ticket: ticket) == 0)
        #expect(ProcessSignals.takeCount(SIGUSR2, ticket: ticket) == 0)
    }

    @Test func aSignalThatInterruptsTheSleepIsNotAWakeUp() throws {
        final class Shared: @unchecked Sendable {
            var loop: Loop?
            var thread: pthread_t?
            var result: RunResult?
            var elapsed: Duration?
        }
        let shared = Shared()
        let ready = Atomic<Bool>(false)
        let wakes = Recorder<LoopActivity>()
        let other = try Loop()
        let counts = Recorder<Int>()
        let source = try LoopSignalSource(signal: SIGUSR1, loop: other) { counts.append($0) }
        defer { source.invalidate() }
        let sleeper = startThread {
            // Threads started from the test runner's pool inherit its blocked signals: let this one take SIGUSR1.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR1)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            let loop = try! Loop()
            loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
            loop.add(LoopObserver(activities: .afterWaiting) { _, activity in wakes.append(activity) },
                     forMode: .default)
            shared.loop = loop
            shared.thread = pthread_self()
            ready.store(true, ordering: .releasing)
            let start = loop.now
            shared.result = loop.run(mode: .default, before: start + .milliseconds(300))
            shared.elapsed = loop.now - start
        }
        #expect(waitUntil { ready.load(ordering: .acquiring) && shared.loop!.isWaiting })
        pthread_kill(shared.thread!, SIGUSR1)  // interrupts that thread's ppoll: EINTR
        sleeper.join()
        #expect(shared.result == .timedOut)
        #expect(wakes.count == 1)  // only at the deadline
        #expect(try #require(shared.elapsed) >= .milliseconds(300))
        other.run(mode: .default, before: other.now + .seconds(5), returnAfterSourceHandled: true)
        #expect(counts.elements == [1])  // and the signal itself was counted, not lost
    }
}

/// A handler a program installs itself, after LoopKit's.
private func programsOwnSIGUSR2Handler(_ signal: Int32) {}

/// The handler a library saved when it installed `chainingSIGUSR2Handler` (LoopKit's, in the test).
nonisolated(unsafe) private var handlerBeforeTheChainingOne = sigaction()
/// How many times `replacedSIGUSR2Handler` ran.
private let replacedHandlerCalls = Atomic<Int>(0)

/// The handler LoopKit's first source replaced.
private func replacedSIGUSR2Handler(_ signal: Int32) {
    replacedHandlerCalls.wrappingAdd(1, ordering: .relaxed)
}

/// A library's handler that passes each delivery on to the handler it replaced.
private func chainingSIGUSR2Handler(
    _ signal: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _ context: UnsafeMutableRawPointer?
) {
    handlerBeforeTheChainingOne.__sigaction_handler.sa_sigaction?(signal, info, context)
}
