#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

/// Every documented precondition a caller can break, each in a process of its own: the process ends, and its
/// message names the call and what was wrong, in a release build too (`fatalError` keeps its message under `-O`,
/// where `precondition` drops it). CI runs this suite again in a release build (see `.ci/run`).
///
/// Preconditions checked elsewhere with their messages: descriptor sources (`LoopDescriptorSourceTests`),
/// `LoopBound` (`LoopBoundTests`), running off the loop's thread (`LoopPassTests`), lifecycle
/// (`LifecycleTests`), and nesting (`LoopStopAndNestingTests`).
@Suite("Misuse: every precondition says what and where")
struct MisuseTests {
    /// One misuse, and the words its message must hold.
    enum Misuse: String, Codable, Sendable, CaseIterable, CustomTestStringConvertible {
        case nanTimeInterval
        case infiniteTimeInterval
        case negativeTimeInterval
        case negativeTimerInterval
        case repeatingTimerWithZeroInterval
        case repeatingTimerAtADateWithNoInterval
        case negativeTimerTolerance
        case negativeToleranceSetLater
        case timerInTwoLoops
        case sourceInTwoLoops
        case observerInTwoLoops
        case performWithNoModes
        case performOnAnEndedLoop
        case performOnAnEndedLoopThread
        case performUnlessEndedWithNoModes
        case runningCommon
        case runningOnAnotherThread
        case invalidatingFromInsideARun
        case invalidatingOnAnotherThread
        case addingCommonToItself
        case signalSourceWithNoModes
        case actorOnAnEndedLoop
        case scheduleWithNoModes
        case scheduleAfterWithNoModes
        case submitWithNoModes
        case submitAfterWithNoModes
        case submitAtWithNoModes
        case repeatingScheduleWithZeroInterval
        case repeatingScheduleWithNoModes
        case fixedDelayScheduleWithNegativeDelay
        case fixedDelayScheduleWithNoModes
        case boundBoxReadDuringAChange
        case nextTimerDateOfCommon
        case hostDriverForCommon
        case executorWithNoModes
        case executorCheckedOffItsThread
        case assumeIsolatedOffTheThread
        case isolatedItemMadeOffTheThread
        case preconditionIsCurrentOffTheThread
        case groupWithNoThreads
        case groupShutDownFromItsOwnThread
        case loopThreadJoiningItself
        case loopThreadShuttingDownAndJoiningItself
        case isolatedPerformWithNoModes
        case isolatedScheduleWithNoModes
        case displayRateOutOfRange
        case displayLinkNegativeRate
        case displayLinkEmptyRange
        case hitchMonitorZeroThreshold
        case hitchMonitorOnAnotherLoopsLink
        case manualClockGoingBack

        var testDescription: String { self.rawValue }

        /// Words the message must hold: the call, and what was wrong.
        var expectedMessage: String {
            switch self {
            case .nanTimeInterval: "LoopTimer(timeInterval:repeats:tolerance:): the interval is NaN"
            case .infiniteTimeInterval: "LoopTimer(timeInterval:repeats:tolerance:): the interval is infinite"
            case .negativeTimeInterval: "LoopTimer(timeInterval:repeats:tolerance:): the interval is negative"
            case .negativeTimerInterval: "LoopTimer(interval:repeats:tolerance:): the interval is negative"
            case .repeatingTimerWithZeroInterval:
                "LoopTimer(interval:repeats:tolerance:): a repeating timer needs an interval greater than zero"
            case .repeatingTimerAtADateWithNoInterval:
                "LoopTimer(fireAt:interval:repeats:tolerance:): a repeating timer needs an interval greater than zero"
            case .negativeTimerTolerance: "LoopTimer(interval:repeats:tolerance:): the tolerance is negative"
            case .negativeToleranceSetLater: "LoopTimer.tolerance: the tolerance is negative"
            case .timerInTwoLoops: "Loop.add(_:forMode:): this LoopTimer already belongs to another loop"
            case .sourceInTwoLoops: "Loop.add(_:forMode:): this LoopSource already belongs to another loop"
            case .observerInTwoLoops: "Loop.add(_:forMode:): this LoopObserver already belongs to another loop"
            case .performWithNoModes: "Loop.perform(inModes:_:): the list of modes is empty"
            case .performOnAnEndedLoop: "the loop has ended"
            case .performOnAnEndedLoopThread: "LoopThread.perform(_:): the loop has ended"
            case .performUnlessEndedWithNoModes: "Loop.performUnlessEnded(inModes:_:): the list of modes is empty"
            case .runningCommon: "Loop.run(mode:before:): `common` is a pseudo-mode and cannot be run"
            case .runningOnAnotherThread: "Loop.run(mode:before:) must be called on the loop's own thread"
            case .invalidatingFromInsideARun: "Loop.invalidate(): called from inside one of the loop's runs"
            case .invalidatingOnAnotherThread: "Loop.invalidate() must be called on the loop's own thread"
            case .addingCommonToItself: "Loop.addCommonMode(_:): `common` cannot be a member of itself"
            case .signalSourceWithNoModes: "LoopSignalSource(signal:loop:modes:_:): the list of modes is empty"
            case .actorOnAnEndedLoop: "Loop.executor: a job of an actor or task whose executor is this loop"
            case .scheduleWithNoModes: "Loop.schedule(at:inModes:_:): the list of modes is empty"
            case .scheduleAfterWithNoModes: "Loop.schedule(after:inModes:_:): the list of modes is empty"
            case .submitWithNoModes: "Loop.submit(inModes:_:): the list of modes is empty"
            case .submitAfterWithNoModes: "Loop.submit(after:inModes:_:): the list of modes is empty"
            case .submitAtWithNoModes: "Loop.submit(at:inModes:_:): the list of modes is empty"
            case .repeatingScheduleWithZeroInterval: "Loop.scheduleRepeating(initialDelay:every:inModes:_:)"
            case .repeatingScheduleWithNoModes: "Loop.scheduleRepeating(initialDelay:every:inModes:_:): no modes"
            case .fixedDelayScheduleWithNegativeDelay:
                "Loop.scheduleRepeating(initialDelay:delay:inModes:_:): the delay must be greater than zero"
            case .fixedDelayScheduleWithNoModes: "Loop.scheduleRepeating(initialDelay:delay:inModes:_:): no modes"
            case .boundBoxReadDuringAChange: "LoopBoundBox.value: used while a change through it is under way"
            case .nextTimerDateOfCommon: "Loop.nextTimerDate(forMode:): `common` is a pseudo-mode"
            case .hostDriverForCommon: "LoopHostDriver(loop:mode:): `common` is a pseudo-mode"
            case .executorWithNoModes: "LoopExecutor(loop:modes:): the list of modes is empty"
            case .executorCheckedOffItsThread: "LoopExecutor: not on the loop's thread"
            case .assumeIsolatedOffTheThread: "Loop.assumeIsolated() must be called on the loop's own thread"
            case .isolatedItemMadeOffTheThread:
                "LoopTimer(interval:repeats:tolerance:on:_:) must be called on the loop's own thread"
            case .preconditionIsCurrentOffTheThread: "Loop.preconditionIsCurrent(): not on the loop's own thread"
            case .groupWithNoThreads: "LoopGroup(name:threadCount:): threadCount must be at least 1"
            case .groupShutDownFromItsOwnThread: "LoopGroup.syncShutdownGracefully(): called on one of the group's own"
            case .loopThreadJoiningItself: "LoopThread.join(): called on the loop's own thread"
            case .loopThreadShuttingDownAndJoiningItself: "LoopThread.shutdownAndJoin(): called on the loop's own thread"
            case .isolatedPerformWithNoModes: "Loop.Isolated.perform(inModes:_:): the list of modes is empty"
            case .isolatedScheduleWithNoModes: "Loop.Isolated.schedule(after:inModes:_:): the list of modes is empty"
            case .displayRateOutOfRange: "LoopDisplay(maximumRate:epoch:): the rate must be 1...1000 Hz"
            case .displayLinkNegativeRate: "LoopDisplayLink(display:preferredRate:): the rate must be finite"
            case .displayLinkEmptyRange: "LoopDisplayLink(display:minimum:maximum:preferred:): need 0 < minimum"
            case .hitchMonitorZeroThreshold: "HitchMonitor(loop:modes:hangThreshold:): the threshold must be positive"
            case .hitchMonitorOnAnotherLoopsLink:
                "HitchMonitor.attach(to:): the display link ticks on another loop than the monitor's"
            case .manualClockGoingBack: "ManualLoopClock.advance(by:): the clock cannot go backwards"
            }
        }

        /// Calls `body` with a new `LoopThread` on that thread itself, and waits until it returns (it should trap).
        private static func onItsOwnThread(_ body: @escaping @Sendable (LoopThread) -> Void) throws {
            let thread = try LoopThread()
            let finished = AtomicCounter()
            thread.perform {
                body(thread)
                finished.increment()
            }
            _ = waitUntil { finished.current > 0 }
        }

        /// Commits the misuse; returns only if it did not trap.
        func commit() throws {
            let loop = try Loop(clock: ManualLoopClock())
            let timer = LoopTimer(interval: .seconds(1)) { _ in }
            switch self {
            case .nanTimeInterval: _ = LoopTimer(timeInterval: .nan) { _ in }
            case .infiniteTimeInterval: _ = LoopTimer(timeInterval: .infinity) { _ in }
            case .negativeTimeInterval: _ = LoopTimer(timeInterval: -1) { _ in }
            case .negativeTimerInterval: _ = LoopTimer(interval: .milliseconds(-1)) { _ in }
            case .repeatingTimerWithZeroInterval: _ = LoopTimer(interval: .zero, repeats: true) { _ in }
            case .repeatingTimerAtADateWithNoInterval: _ = LoopTimer(fireAt: loop.now, repeats: true) { _ in }
            case .negativeTimerTolerance:
                _ = LoopTimer(interval: .seconds(1), tolerance: .milliseconds(-1)) { _ in }
            case .negativeToleranceSetLater: timer.tolerance = .milliseconds(-1)
            case .timerInTwoLoops:
                loop.add(timer, forMode: .default)
                try Loop(clock: ManualLoopClock()).add(timer, forMode: .default)
            case .sourceInTwoLoops:
                let source = LoopSource { _ in }
                loop.add(source, forMode: .default)
                try Loop(clock: ManualLoopClock()).add(source, forMode: .default)
            case .observerInTwoLoops:
                let observer = LoopObserver(activities: .entry) { _, _ in }
                loop.add(observer, forMode: .default)
                try Loop(clock: ManualLoopClock()).add(observer, forMode: .default)
            case .performWithNoModes: loop.perform(inModes: []) {}
            case .performOnAnEndedLoop:
                loop.invalidate()
                loop.perform {}
            case .performOnAnEndedLoopThread:
                let thread = try LoopThread()
                thread.shutdownAndJoin()
                thread.perform {}
            case .performUnlessEndedWithNoModes: loop.performUnlessEnded(inModes: []) {}
            case .runningCommon: loop.run(mode: .common, before: loop.now)
            case .runningOnAnotherThread:
                onAnotherThread { loop.run(mode: .default, before: loop.now) }
            case .invalidatingFromInsideARun:
                loop.add(LoopTimer(interval: .zero) { _ in loop.invalidate() }, forMode: .default)
                loop.run(mode: .default, before: loop.now + .seconds(1))
            case .invalidatingOnAnotherThread: onAnotherThread { loop.invalidate() }
            case .addingCommonToItself: loop.addCommonMode(.common)
            case .signalSourceWithNoModes: _ = try? LoopSignalSource(signal: SIGUSR2, loop: loop, modes: []) { _ in }
            case .scheduleWithNoModes: _ = loop.schedule(at: loop.now, inModes: []) {}
            case .scheduleAfterWithNoModes: _ = loop.schedule(after: .seconds(1), inModes: []) {}
            case .submitWithNoModes, .submitAfterWithNoModes, .submitAtWithNoModes:
                Task { [self] in
                    switch self {
                    case .submitWithNoModes: _ = try? await loop.submit(inModes: []) { 0 }
                    case .submitAfterWithNoModes: _ = try? await loop.submit(after: .seconds(1), inModes: []) { 0 }
                    default: _ = try? await loop.submit(at: loop.now, inModes: []) { 0 }
                    }
                }
                sleep(60)  // the task traps long before this ends
            case .repeatingScheduleWithZeroInterval: _ = loop.scheduleRepeating(initialDelay: .zero, every: .zero) { _ in }
            case .repeatingScheduleWithNoModes:
                _ = loop.scheduleRepeating(initialDelay: .zero, every: .seconds(1), inModes: []) { _ in }
            case .fixedDelayScheduleWithNegativeDelay:
                _ = loop.scheduleRepeating(initialDelay: .zero, delay: .milliseconds(-1)) { _ in }
            case .fixedDelayScheduleWithNoModes:
                _ = loop.scheduleRepeating(initialDelay: .zero, delay: .seconds(1), inModes: []) { _ in }
            case .boundBoxReadDuringAChange:
                let box = LoopBoundBox([1, 2, 3], loop: loop)
                box.value.removeAll { $0 == box.value.first }
            case .nextTimerDateOfCommon: _ = loop.nextTimerDate(forMode: .common)
            case .hostDriverForCommon: _ = try LoopHostDriver(loop: loop, mode: .common)
            case .executorWithNoModes: _ = LoopExecutor(loop: loop, modes: [])
            case .executorCheckedOffItsThread:
                let executor = LoopExecutor(loop: loop)
                onAnotherThread { executor.checkIsolated() }
            case .assumeIsolatedOffTheThread: onAnotherThread { _ = loop.assumeIsolated() }
            case .isolatedItemMadeOffTheThread:
                let smuggled = SmuggledIsolatedView(view: loop.assumeIsolated())  // as a `Task` may take one
                onAnotherThread { _ = LoopTimer(interval: .seconds(1), on: smuggled.view) { _ in } }
            case .preconditionIsCurrentOffTheThread: onAnotherThread { loop.preconditionIsCurrent() }
            case .groupWithNoThreads: _ = try LoopGroup(threadCount: 0)
            case .groupShutDownFromItsOwnThread:
                let group = try LoopGroup(threadCount: 1)
                let finished = AtomicCounter()
                group.next().perform {
                    group.syncShutdownGracefully()
                    finished.increment()
                }
                _ = waitUntil { finished.current > 0 }
            case .actorOnAnEndedLoop:
                let thread = try LoopThread(name: "ended")
                thread.shutdownAndJoin()
                let actor = ActorOnALoop(executor: thread.loop.executor)
                Task.detached { print(await actor.touch()) }  // the result is used: the hop cannot be optimized away
                _ = waitUntil { false }
            case .isolatedPerformWithNoModes: loop.assumeIsolated().perform(inModes: []) {}
            case .isolatedScheduleWithNoModes: _ = loop.assumeIsolated().schedule(after: .seconds(1), inModes: []) {}
            case .loopThreadShuttingDownAndJoiningItself: try Self.onItsOwnThread { $0.shutdownAndJoin() }
            case .loopThreadJoiningItself: try Self.onItsOwnThread { $0.join() }
            case .displayRateOutOfRange: _ = LoopDisplay(maximumRate: 0)
            case .displayLinkNegativeRate: _ = LoopDisplayLink(preferredRate: -1) { _, _ in }
            case .displayLinkEmptyRange: _ = LoopDisplayLink(minimum: 60, maximum: 30, preferred: 60) { _, _ in }
            case .hitchMonitorZeroThreshold: _ = HitchMonitor(loop: loop, hangThreshold: .zero)
            case .hitchMonitorOnAnotherLoopsLink:
                let render = try LoopThread(name: "render")
                let monitor = HitchMonitor(loop: loop)
                let link = LoopDisplayLink(preferredRate: 120) { _, _ in }
                monitor.attach(to: link)
                render.loop.add(link, forMode: .default)
                sleep(60)  // the render thread traps at the link's first frame, long before this ends
            case .manualClockGoingBack: ManualLoopClock().advance(by: .milliseconds(-1))
            }
        }
    }

    @Test(arguments: Misuse.allCases)
    func theProcessEndsWithAMessageNamingTheCallAndTheProblem(_ misuse: Misuse) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [misuse] in
            try misuse.commit()
        }
        let message = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(message.contains(misuse.expectedMessage), "stderr: \(message.prefix(600))")
    }
}

/// An actor whose executor is a loop's.
private actor ActorOnALoop {
    let executor: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
    private var touches = 0
    init(executor: LoopExecutor) { self.executor = executor }
    func touch() -> Int {
        self.touches += 1
        return self.touches
    }
}

/// An isolated view moved to another thread, as Swift's region checks let a `Task` take one that is used no more.
private struct SmuggledIsolatedView: @unchecked Sendable {
    let view: Loop.Isolated
}
