#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Synchronization
import Testing
@testable import LoopKit

// A hostile user's round: every public initializer and method with odd values, misuse across threads, display-link
// and hitch-monitor lifecycles, and the lifetimes of what callbacks capture. Each case asserts what the project's
// rules promise (README, DESIGN.md and the doc comments): a clear trap naming the call for a documented
// precondition, a thrown error, or sane behaviour; never an undocumented crash, a hang, a spin, or a silent loss.

/// Hands out tokens and counts them, so that a test can wait until every one made was freed.
private final class HostileTokens: Sendable {
    let made = AtomicCounter()
    let freed = AtomicCounter()

    func make() -> DeinitCounter {
        self.made.increment()
        return DeinitCounter(self.freed)
    }

    /// Whether every token made so far has been freed (waits up to 20 s: a hang guard, not a measurement).
    func allFreed() -> Bool {
        waitUntil { self.freed.current == self.made.current }
    }
}

/// Ends an exit test's child with `code` unless `condition` holds (an `#expect` in the child is not reported).
private func hostileRequire(_ condition: Bool, _ code: Int32, _ what: String) {
    if !condition {
        let bytes = Array("hostile check failed: \(what)\n".utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
        exit(code)
    }
}

/// One item of every kind, added to `loop` in `mode`, each capturing a token; returns the items (for a caller that
/// keeps them) and a pipe the descriptor source watches.
private func addOneOfEach(
    to loop: Loop,
    mode: LoopMode,
    tokens: HostileTokens,
    pipe: TestPipe,
    withTasks: Bool = true
) -> [AnyObject] {
    let timerToken = tokens.make()
    let timer = LoopTimer(interval: .seconds(3_600), repeats: true) { _ in withExtendedLifetime(timerToken) {} }
    let performToken = tokens.make()
    let scheduleToken = tokens.make()
    let unscheduleToken = tokens.make()
    let source = LoopSource(
        onSchedule: { _, _ in withExtendedLifetime(scheduleToken) {} },
        onUnschedule: { _, _ in withExtendedLifetime(unscheduleToken) {} }
    ) { _ in withExtendedLifetime(performToken) {} }
    let descriptorToken = tokens.make()
    let descriptorSource = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
        withExtendedLifetime(descriptorToken) {}
    }
    let observerToken = tokens.make()
    let observer = LoopObserver(activities: .allActivities) { _, _ in withExtendedLifetime(observerToken) {} }
    let linkToken = tokens.make()
    let link = LoopDisplayLink(preferredRate: 1) { _, _ in withExtendedLifetime(linkToken) {} }
    loop.add(timer, forMode: mode)
    loop.add(source, forMode: mode)
    loop.add(descriptorSource, forMode: mode)
    loop.add(observer, forMode: mode)
    loop.add(link, forMode: mode)
    if withTasks {
        let onceToken = tokens.make()
        loop.schedule(after: .seconds(3_600), inModes: [mode]) { withExtendedLifetime(onceToken) {} }
        let repeatingToken = tokens.make()
        loop.scheduleRepeating(initialDelay: .seconds(3_600), every: .seconds(1), inModes: [mode]) { _ in
            withExtendedLifetime(repeatingToken) {}
        }
        let blockToken = tokens.make()
        loop.perform(inModes: ["nowhere"]) { withExtendedLifetime(blockToken) {} }  // a block that never runs
    }
    return [timer, source, descriptorSource, observer, link]
}

// MARK: - Odd values

@Suite("Hostile user: odd values", .timeLimit(.minutes(2)))
struct HostileOddValueTests {
    @Test func hugeTinyAndZeroTimerIntervalsNeitherTrapNorFireEarly() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let fires = Recorder<String>()
        let cases: [(String, Duration, Bool)] = [
            ("huge", .seconds(1e18), false),
            ("hugeRepeating", .seconds(1e18), true),
            ("int64MaxSeconds", .seconds(Int64.max), true),
            ("oneNanosecond", .nanoseconds(1), false),
            ("oneAttosecond", Duration(secondsComponent: 0, attosecondsComponent: 1), false),
            ("zero", .zero, false),
        ]
        var timers: [String: LoopTimer] = [:]
        for (name, interval, repeats) in cases {
            let timer = LoopTimer(interval: interval, repeats: repeats) { _ in
                fires.append(name)
                #expect(clock.now >= start + .nanoseconds(interval == .zero ? 0 : 1), "\(name) fired early")
            }
            timers[name] = timer
            loop.add(timer, forMode: .default)
        }
        // Saturated at the end of time, not wrapped around to the past.
        #expect(timers["huge"]?.fireDate == LoopInstant.distantFuture)
        #expect(timers["hugeRepeating"]?.fireDate == LoopInstant.distantFuture)
        #expect(timers["int64MaxSeconds"]?.fireDate == LoopInstant.distantFuture)
        #expect(timers["oneAttosecond"]?.fireDate == start + .nanoseconds(1))  // rounded up, never early
        #expect(loop.run(mode: .default, before: start + .milliseconds(10)) == .timedOut)
        let counts = Dictionary(grouping: fires.elements, by: { $0 }).mapValues(\.count)
        #expect(counts == ["oneNanosecond": 1, "oneAttosecond": 1, "zero": 1])
        for timer in timers.values { timer.invalidate() }
    }

    /// A `timeInterval` of 292 years or more is accepted, as Foundation accepts it, and saturates as the same length
    /// given as a `Duration` does.
    @Test func aHugeTimeIntervalInSecondsSaturatesInsteadOfTrapping() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        for seconds in [9.2e9, 1e10, 1e300, Double.greatestFiniteMagnitude] {
            let timer = LoopTimer(timeInterval: seconds, repeats: true) { _ in }
            #expect(timer.interval == .nanoseconds(Int64.max))
            loop.add(timer, forMode: .default)
            #expect(timer.fireDate! > loop.now + .seconds(9_000_000_000))
            timer.invalidate()
        }
    }

    /// A timer parked at `.distantFuture` (CF's way to keep a timer that does not fire), or pushed there by a huge
    /// interval, never fires, even on a virtual clock moved to the end of time.
    @Test func aTimerParkedAtTheEndOfTimeNeverFiresEvenWhenAVirtualClockGetsThere() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fires = Recorder<String>()
        let parked = LoopTimer(interval: .seconds(1), repeats: true) { _ in fires.append("parked") }
        let huge = LoopTimer(interval: .seconds(1e18), repeats: true) { _ in fires.append("huge") }
        loop.add(parked, forMode: .default)
        loop.add(huge, forMode: .default)
        parked.setNextFireDate(.distantFuture)
        let start = clock.now
        clock.advance(to: .distantFuture)
        for _ in 0..<3 {
            loop.run(mode: .default, before: .distantFuture)
        }
        #expect(fires.elements.isEmpty)
        #expect(loop.contains(parked, inMode: .default))
        parked.setNextFireDate(start)  // a date in the past fires as usual, once, then saturates again
        loop.run(mode: .default, before: .distantFuture)
        loop.run(mode: .default, before: .distantFuture)
        #expect(fires.elements == ["parked"])
        parked.invalidate()
        huge.invalidate()
    }

    @Test func aRepeatingTimerOfOneAttosecondFiresOncePerNanosecondOnItsGrid() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let slots = Recorder<LoopInstant>()
        let timer = LoopTimer(interval: Duration(secondsComponent: 0, attosecondsComponent: 1), repeats: true) { timer in
            slots.append(timer.fireDate!)
            #expect(clock.now >= timer.fireDate!)
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .microseconds(2)) == .timedOut)
        timer.invalidate()
        let fired = slots.elements
        #expect(fired.count >= 1 && fired.count <= 2_001)
        #expect(zip(fired, fired.dropFirst()).allSatisfy { $0 < $1 }, "one fire per slot, in order")
    }

    @Test func aToleranceFarLargerThanTheIntervalNeverFiresEarlyAndStillFires() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let late = Recorder<Bool>()
        let repeating = LoopTimer(interval: .milliseconds(1), repeats: true, tolerance: .seconds(1e18)) { timer in
            late.append(clock.now >= timer.fireDate!)
        }
        let oneShot = LoopTimer(interval: .milliseconds(5), tolerance: .seconds(Int64.max)) { timer in
            late.append(clock.now >= start + .milliseconds(5))
        }
        loop.add(repeating, forMode: .default)
        loop.add(oneShot, forMode: .default)
        #expect(loop.run(mode: .default, before: start + .milliseconds(20)) == .timedOut)
        #expect(!oneShot.isValid, "the one-shot timer fired within the run")
        #expect(late.count >= 2)
        #expect(late.elements.allSatisfy { $0 }, "no fire before its date")
        repeating.tolerance = .seconds(1e18)  // again, on a timer in a loop: no overflow
        repeating.invalidate()
    }

    @Test func instantArithmeticSaturatesForAnyDuration() {
        let zero = LoopInstant(nanoseconds: 0)
        #expect(LoopInstant.distantFuture + .seconds(1) == .distantFuture)
        #expect(LoopInstant.distantFuture + .seconds(Int64.max) == .distantFuture)
        #expect(LoopInstant.distantFuture + .seconds(1e20) == .distantFuture)
        #expect(zero - .seconds(1) == zero)
        #expect(zero + .seconds(Int64.min) == zero)
        #expect(zero - .seconds(-1e20) == .distantFuture)
        #expect(LoopInstant(nanoseconds: 5) + Duration(secondsComponent: 0, attosecondsComponent: 1)
                == LoopInstant(nanoseconds: 6))  // rounded up: never early
        #expect(LoopInstant.distantFuture - LoopInstant.distantFuture == .zero)
        #expect(LoopInstant.distantFuture - zero > .zero)
        #expect(zero - LoopInstant.distantFuture < .zero)
        #expect(LoopInstant.distantFuture.description == "distantFuture")
    }

    @Test func aDeadlineAtTheOriginMakesOneNonBlockingPass() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let fired = AtomicCounter()
        let timer = LoopTimer(fireAt: LoopInstant(nanoseconds: 0)) { _ in fired.increment() }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: LoopInstant(nanoseconds: 0)) == .timedOut)
        #expect(fired.current == 1)
        #expect(loop.run(mode: .default, before: LoopInstant(nanoseconds: 0)) == .finished)
    }

    @Test func aManualClockAtTheEndOfTimeEndsEveryRunInsteadOfSpinning() throws {
        let clock = ManualLoopClock(start: .distantFuture)
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fires = AtomicCounter()
        let timer = LoopTimer(interval: .seconds(1), repeats: true) { _ in fires.increment() }
        let link = LoopDisplayLink(preferredRate: 120) { _, _ in fires.increment() }
        loop.add(timer, forMode: .default)
        loop.add(link, forMode: .common)
        let task = loop.scheduleRepeating(initialDelay: .seconds(1), every: .nanoseconds(1)) { _ in fires.increment() }
        #expect(loop.run() == .timedOut)  // documented: a virtual clock moved to .distantFuture
        #expect(loop.run(mode: .default, before: clock.now) == .timedOut)
        #expect(loop.run(mode: .tracking, before: .distantFuture) == .timedOut)
        #expect(fires.current <= 6, "a bounded number of fires, not one per pass for ever")
        timer.invalidate()
        link.invalidate()
        task.cancel()
    }

    @Test func oddModeNamesAreOrdinaryCustomModes() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let names = ["", " ", "Common", "common ", "défaut\u{0}tracking", String(repeating: "m", count: 10_000)]
        let fired = Recorder<String>()
        for name in names {
            #expect(LoopMode(name) != .common)
            loop.add(LoopTimer(interval: .milliseconds(1)) { _ in fired.append(name) }, forMode: LoopMode(name))
        }
        #expect(LoopMode("common") == .common)
        for name in names {
            #expect(loop.run(mode: LoopMode(name), before: clock.now + .milliseconds(2)) == .finished)
        }
        #expect(fired.elements == names)
        // The empty name joins the common set like any other, and is back-filled.
        let common = AtomicCounter()
        let commonTimer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in common.increment() }
        loop.add(commonTimer, forMode: .common)
        loop.addCommonMode(LoopMode(""))
        #expect(loop.contains(commonTimer, inMode: LoopMode("")))
        #expect(loop.run(mode: LoopMode(""), before: clock.now + .milliseconds(3)) == .timedOut)
        #expect(common.current >= 1)
        commonTimer.invalidate()
    }

    @Test func displayLinkRatesForOddRequestsAreSupportedRates() {
        let display = LoopDisplay.default
        func rate(_ preferred: Double, on display: LoopDisplay = .default) -> Double {
            LoopDisplayLink(display: display, preferredRate: preferred) { _, _ in }.rate
        }
        func rate(_ minimum: Double, _ maximum: Double, _ preferred: Double) -> Double {
            LoopDisplayLink(display: display, minimum: minimum, maximum: maximum, preferred: preferred) { _, _ in }.rate
        }
        #expect(rate(0) == 120)
        #expect(rate(1e9) == 120)
        #expect(rate(.greatestFiniteMagnitude) == 120)
        #expect(rate(119.999) == 60)
        #expect(rate(0.5) == 1)  // below every supported rate: the slowest
        #expect(rate(.leastNonzeroMagnitude) == 1)
        #expect(rate(-0.0) == 120)
        #expect(rate(200, 300, 250) == 120)  // the whole range above the display: its maximum
        #expect(rate(1e-9, 1e-9, 1e-9) == 1)
        #expect(rate(30, 60, 10) == 30)  // preferred below the range
        #expect(rate(30, 60, 1e6) == 60)  // preferred above the range
        #expect(rate(30, 60, -5) == 60)  // preferred not positive: the range's highest
        #expect(rate(7, on: LoopDisplay(maximumRate: 1_000)) == 1_000.0 / 143)
        #expect(rate(0.5, on: LoopDisplay(maximumRate: 1)) == 1)
        #expect(LoopDisplay(maximumRate: 1_000).supportedRates(downTo: .nan).isEmpty)
        #expect(LoopDisplay(maximumRate: 7).supportedRates(downTo: -.infinity).count == 7)
    }

    @Test(arguments: [1, 7, 1_000])
    func aLinkOnAnOddDisplayTicksOnItsGrid(maximumRate: Int) throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let display = LoopDisplay(maximumRate: maximumRate, epoch: clock.now + .milliseconds(3))
        let frames = Recorder<DisplayFrame>()
        let link = LoopDisplayLink(display: display) { _, frame in
            frames.append(frame)
            #expect(clock.now >= frame.timestamp)
        }
        loop.add(link, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(2)) == .timedOut)
        link.invalidate()
        let seen = frames.elements
        // Frames at epoch + n / rate before the run's end, 2 s after the start and 1.997 s after the epoch.
        let expected = Int(1.997 * Double(maximumRate)) + 1
        #expect(seen.count >= expected - 1 && seen.count <= expected + 1, "\(seen.count) frames, expected \(expected)")
        #expect(seen.first?.timestamp ?? .distantFuture >= display.epoch)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $1.index == $0.index + 1 && $1.skippedFrames == 0 })
        #expect(seen.allSatisfy { $0.targetTimestamp > $0.timestamp })
    }

    @Test func aDisplayWhoseEpochIsTheEndOfTimeNeverTicksAndTheRunStillEnds() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = AtomicCounter()
        let link = LoopDisplayLink(display: LoopDisplay(maximumRate: 120, epoch: .distantFuture)) { _, _ in
            frames.increment()
        }
        loop.add(link, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .timedOut)
        #expect(frames.current == 0)
        link.invalidate()
    }

    @Test func hitchMonitorThresholdsFromOneAttosecondToTheEndOfTime() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tiny = HitchMonitor(loop: loop, hangThreshold: Duration(secondsComponent: 0, attosecondsComponent: 1))
        let huge = HitchMonitor(loop: loop, hangThreshold: .seconds(1e18))
        let hangs = AtomicCounter()
        tiny.onHang { _ in hangs.increment() }
        huge.onHang { _ in hangs.add(1_000) }
        let timer = LoopTimer(interval: .milliseconds(10), repeats: true) { _ in clock.advance(by: .milliseconds(1)) }
        loop.add(timer, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(55)) == .timedOut)
        timer.invalidate()
        #expect(tiny.report.hangs >= 5)
        #expect(huge.report.hangs == 0)
        #expect(hangs.current == tiny.report.hangs)
        tiny.invalidate()
        huge.invalidate()
    }

    /// A monitor attached to one link twice is still one monitor of that link: it must count each frame once, as
    /// adding an item to a mode it is already in adds nothing.
    @Test func aHitchMonitorAttachedTwiceToALinkCountsEachFrameOnce() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let callbacks = AtomicCounter()
        let link = LoopDisplayLink(preferredRate: 60) { _, _ in
            callbacks.increment()
            if callbacks.current == 3 {
                clock.advance(by: .milliseconds(30))  // one heavy frame: one hitch
            }
        }
        let once = HitchMonitor(loop: loop)
        let twice = HitchMonitor(loop: loop)
        once.attach(to: link)
        twice.attach(to: link)
        twice.attach(to: link)
        loop.add(link, forMode: .common)
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(500)) == .timedOut)
        link.invalidate()
        #expect(once.report.frames == callbacks.current)
        #expect(twice.report.frames == callbacks.current, "each frame counted once: \(twice.report)")
        #expect(twice.report.hitches == once.report.hitches)
        #expect(twice.report.totalHitchTime == once.report.totalHitchTime)
    }

    @Test func threadsTakeAnyNameAndGroupNamesFitTheKernelsFifteenBytes() throws {
        let names = ["", String(repeating: "x", count: 200), "a\u{0}b", "👨‍👩‍👧‍👦 family", "naïve-thread-name"]
        for name in names {
            let thread = try LoopThread(name: name)
            let ran = AtomicCounter()
            thread.perform { ran.increment() }
            #expect(waitUntil { ran.current == 1 }, "thread named \(name.debugDescription)")
            thread.shutdownAndJoin()
        }
        for name in names + [String(repeating: "é", count: 50), "👨‍👩‍👧‍👦"] {
            for index in [0, 7, 12_345] {
                let threadName = LoopGroup.threadName(name, index)
                #expect(threadName.utf8.count <= 15, "\(threadName.debugDescription)")
                #expect(threadName.hasSuffix("-\(index)"))
            }
        }
        let group = try LoopGroup(name: "", threadCount: 1)
        let ran = AtomicCounter()
        group.next().perform { ran.increment() }
        #expect(waitUntil { ran.current == 1 })
        group.syncShutdownGracefully()
    }

    /// A LoopThread's name is cut at a character, as LoopGroup's are, so that the kernel keeps valid UTF-8 (it was cut
    /// at byte 15, which may split a character, and tools then showed a broken name).
    @Test func aLoopThreadsNonASCIINameIsCutAtACharacterNotInsideOne() throws {
        let name = String(repeating: "é", count: 10)  // 20 bytes; byte 15 is in the middle of the eighth "é"
        let thread = try LoopThread(name: name)
        defer { thread.shutdownAndJoin() }
        let seen = Recorder<String>()
        thread.perform { seen.append(PlatformThread.currentName ?? "?") }
        #expect(waitUntil { seen.count == 1 })
        let kernelName = seen.elements.first ?? "?"
        #expect(kernelName.utf8.count <= 15)
        #expect(name.hasPrefix(kernelName), "the kernel's name \(kernelName.debugDescription) is not a prefix of the name")
    }

    @Test func scheduledTasksWithOddDelaysRunAtOnceNeverOrNotEarly() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let start = clock.now
        let ran = Recorder<String>()
        loop.schedule(after: .seconds(-1e18)) { ran.append("negative") }
        loop.schedule(at: LoopInstant(nanoseconds: 0)) { ran.append("origin") }
        let never = loop.schedule(after: .seconds(1e18)) { ran.append("never") }
        let neverAt = loop.schedule(at: .distantFuture) { ran.append("neverAt") }
        let repeating = loop.scheduleRepeating(initialDelay: .seconds(Int64.min), every: .seconds(1e18)) { _ in
            ran.append("repeating")
        }
        let tiny = loop.scheduleRepeating(initialDelay: .nanoseconds(1), every: .nanoseconds(1)) { _ in
            #expect(clock.now >= start + .nanoseconds(1))
        }
        #expect(loop.run(mode: .default, before: start + .microseconds(5)) == .timedOut)
        tiny.cancel()
        #expect(Array(ran.elements.prefix(2)).sorted() == ["negative", "origin"])
        #expect(ran.elements.dropFirst(2) == ["repeating"])
        for task in [never, neverAt, repeating] {
            #expect(!task.isCancelled)
            task.cancel()
        }
    }
}

// MARK: - Documented traps, in a process of their own

@Suite("Hostile user: documented traps name the call")
struct HostileTrapTests {
    enum Misuse: String, Codable, Sendable, CaseIterable, CustomTestStringConvertible {
        case displayLinkNaNRate
        case displayLinkInfiniteRate
        case displayLinkRangeWithNaNPreferred
        case displayLinkRangeWithZeroMinimum
        case displayLinkRangeWithInfiniteMaximum
        case displayOfIntMaxHertz
        case displayOfIntMinHertz
        case descriptorMinusOne
        case descriptorWatchingHangUp
        case descriptorEventsSetToInvalid
        case groupOfNegativeThreads
        case hitchMonitorNegativeThreshold
        case repeatingTaskNegativeInterval
        case timerHugeNegativeTolerance
        case datedTimerNegativeInterval
        case manualClockHugeNegativeAdvance
        case sendingSignalMinusOne
        case linkInTwoLoops
        case descriptorSourceInTwoLoops
        case runningCommonSpelledOut

        var testDescription: String { self.rawValue }

        var expectedMessage: String {
            switch self {
            case .displayLinkNaNRate, .displayLinkInfiniteRate:
                "LoopDisplayLink(display:preferredRate:): the rate must be finite"
            case .displayLinkRangeWithNaNPreferred, .displayLinkRangeWithZeroMinimum,
                 .displayLinkRangeWithInfiniteMaximum:
                "LoopDisplayLink(display:minimum:maximum:preferred:): need 0 < minimum <= maximum"
            case .displayOfIntMaxHertz, .displayOfIntMinHertz: "LoopDisplay(maximumRate:epoch:): the rate must be 1...1000"
            case .descriptorMinusOne: "LoopDescriptorSource(descriptor:events:): the descriptor is negative"
            case .descriptorWatchingHangUp:
                "LoopDescriptorSource(descriptor:events:): only .readable and .writable can be watched"
            case .descriptorEventsSetToInvalid: "LoopDescriptorSource.events: only .readable and .writable can be watched"
            case .groupOfNegativeThreads: "LoopGroup(name:threadCount:): threadCount must be at least 1"
            case .hitchMonitorNegativeThreshold: "HitchMonitor(loop:modes:hangThreshold:): the threshold must be positive"
            case .repeatingTaskNegativeInterval:
                "Loop.scheduleRepeating(initialDelay:every:inModes:_:): the interval must be greater than zero"
            case .timerHugeNegativeTolerance: "LoopTimer(interval:repeats:tolerance:): the tolerance is negative"
            case .datedTimerNegativeInterval: "LoopTimer(fireAt:interval:repeats:tolerance:): the interval is negative"
            case .manualClockHugeNegativeAdvance: "ManualLoopClock.advance(by:): the clock cannot go backwards"
            case .sendingSignalMinusOne: "LoopSignalSource.sendToThisProcess(_:)"
            case .linkInTwoLoops: "Loop.add(_:forMode:): this LoopDisplayLink already belongs to another loop"
            case .descriptorSourceInTwoLoops:
                "Loop.add(_:forMode:): this LoopDescriptorSource already belongs to another loop"
            case .runningCommonSpelledOut: "Loop.run(mode:before:): `common` is a pseudo-mode and cannot be run"
            }
        }

        func commit() throws {
            let loop = try Loop(clock: ManualLoopClock())
            switch self {
            case .displayLinkNaNRate: _ = LoopDisplayLink(preferredRate: .nan) { _, _ in }
            case .displayLinkInfiniteRate: _ = LoopDisplayLink(preferredRate: .infinity) { _, _ in }
            case .displayLinkRangeWithNaNPreferred:
                _ = LoopDisplayLink(minimum: 30, maximum: 60, preferred: .nan) { _, _ in }
            case .displayLinkRangeWithZeroMinimum: _ = LoopDisplayLink(minimum: 0, maximum: 60, preferred: 60) { _, _ in }
            case .displayLinkRangeWithInfiniteMaximum:
                _ = LoopDisplayLink(minimum: 30, maximum: .infinity, preferred: 60) { _, _ in }
            case .displayOfIntMaxHertz: _ = LoopDisplay(maximumRate: .max)
            case .displayOfIntMinHertz: _ = LoopDisplay(maximumRate: .min)
            case .descriptorMinusOne: _ = LoopDescriptorSource(descriptor: -1, events: .readable) { _, _ in }
            case .descriptorWatchingHangUp: _ = LoopDescriptorSource(descriptor: 0, events: .hangUp) { _, _ in }
            case .descriptorEventsSetToInvalid:
                LoopDescriptorSource(descriptor: 0, events: .readable) { _, _ in }.events = [.readable, .invalid]
            case .groupOfNegativeThreads: _ = try LoopGroup(threadCount: -5)
            case .hitchMonitorNegativeThreshold: _ = HitchMonitor(loop: loop, hangThreshold: .seconds(-1))
            case .repeatingTaskNegativeInterval:
                _ = loop.scheduleRepeating(initialDelay: .zero, every: .seconds(-1)) { _ in }
            case .timerHugeNegativeTolerance: _ = LoopTimer(interval: .seconds(1), tolerance: .seconds(-1e18)) { _ in }
            case .datedTimerNegativeInterval:
                _ = LoopTimer(fireAt: loop.now, interval: .seconds(-1), repeats: true) { _ in }
            case .manualClockHugeNegativeAdvance: ManualLoopClock().advance(by: .seconds(-1e18))
            case .sendingSignalMinusOne: LoopSignalSource.sendToThisProcess(-1)
            case .linkInTwoLoops:
                let link = LoopDisplayLink { _, _ in }
                loop.add(link, forMode: .default)
                try Loop(clock: ManualLoopClock()).add(link, forMode: .default)
            case .descriptorSourceInTwoLoops:
                let source = LoopDescriptorSource(descriptor: 0, events: []) { _, _ in }
                loop.add(source, forMode: .default)
                try Loop(clock: ManualLoopClock()).add(source, forMode: .default)
            case .runningCommonSpelledOut:
                loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .common)
                loop.run(mode: LoopMode("common"), before: loop.now)
            }
        }
    }

    @Test(arguments: Misuse.allCases)
    func theProcessEndsWithAMessageNamingTheCall(_ misuse: Misuse) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [misuse] in
            try misuse.commit()
        }
        let message = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(message.contains(misuse.expectedMessage), "stderr: \(message.prefix(600))")
    }

    @Test func aGroupLargerThanTheProcessCanHoldThrowsAndEndsTheThreadsItStarted() async {
        await #expect(processExitsWith: .success) {
            try Self.tooLargeAGroup()
        }
    }

    /// Everything a user may do with a loop that has ended: refused or a no-op, never a crash.
    @Test func anEndedLoopRefusesItemsAndIgnoresStopsWakeUpsAndRemovals() async {
        await #expect(processExitsWith: .success) {
            try Self.anEndedLoop()
        }
    }

    private static func tooLargeAGroup() throws {
        var limit = rlimit()
        hostileRequire(getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0, 10, "getrlimit")
        var lowered = limit
        lowered.rlim_cur = 96
        hostileRequire(setrlimit(RLIMIT_NOFILE_VALUE, &lowered) == 0, 11, "setrlimit")
        var threw = false
        do {
            _ = try LoopGroup(name: "too-many", threadCount: 100_000)
        } catch {
            threw = true
        }
        hostileRequire(threw, 12, "a group of 100,000 loops on 96 descriptors did not throw")
        hostileRequire(setrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0, 13, "setrlimit back")
        // The descriptors of the loops it started were given back: a small group fits again, and works.
        var lowerAgain = limit
        lowerAgain.rlim_cur = 96
        hostileRequire(setrlimit(RLIMIT_NOFILE_VALUE, &lowerAgain) == 0, 14, "setrlimit again")
        let group = try LoopGroup(name: "fits", threadCount: 4)
        let ran = AtomicCounter()
        for loop in group.loops { loop.perform { ran.increment() } }
        hostileRequire(waitUntil { ran.current == 4 }, 15, "the small group ran its blocks")
        group.syncShutdownGracefully()
    }

    private static func anEndedLoop() throws {
        let loop = try Loop(clock: ManualLoopClock())
        let timer = LoopTimer(interval: .seconds(1)) { _ in }
        loop.add(timer, forMode: .default)
        loop.invalidate()
        loop.invalidate()  // twice: nothing more to do
        hostileRequire(!loop.add(LoopTimer(interval: .seconds(1)) { _ in }, forMode: .default), 20, "timer refused")
        hostileRequire(!loop.add(LoopSource { _ in }, forMode: .common), 21, "source refused")
        hostileRequire(!loop.add(LoopObserver(activities: .entry) { _, _ in }, forMode: "x"), 22, "observer refused")
        hostileRequire(!loop.add(LoopDisplayLink { _, _ in }, forMode: .default), 23, "link refused")
        hostileRequire(loop.schedule(after: .zero) {}.isCancelled, 24, "task cancelled")
        loop.remove(timer, forMode: .default)
        loop.stop()
        loop.wakeUp()
        loop.addCommonMode("late")
        hostileRequire(loop.run(mode: .default, before: loop.now + .seconds(1)) == .finished, 25, "run finished")
        // The timer that was in it may join another loop.
        let other = try Loop(clock: ManualLoopClock())
        hostileRequire(other.add(timer, forMode: .default), 26, "the timer joins another loop")
        other.invalidate()
    }
}

// MARK: - Descriptors

@Suite("Hostile user: odd descriptors", .timeLimit(.minutes(2)))
struct HostileDescriptorTests {
    @Test(arguments: DescriptorWaitPath.allCases)
    func aNumberThatWasNeverOpenedIsReportedInvalidOnceAndCancelled(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let events = Recorder<DescriptorEvents>()
        let source = LoopDescriptorSource(descriptor: .max - 7, events: [.readable, .writable]) { _, reported in
            events.append(reported)
        }
        let pipe = try TestPipe()  // a healthy neighbour in the same mode keeps working
        let healthy = AtomicCounter()
        let neighbour = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            pipe.readAll()
            healthy.increment()
        }
        let keepAlive = LoopTimer(interval: .seconds(3_600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        loop.add(source, forMode: .default)
        loop.add(neighbour, forMode: .default)
        try loop.runBriefly { events.count >= 1 }
        #expect(events.elements.first?.contains(.invalid) == true)
        #expect(!source.isValid, "cancelled by the loop after the report")
        pipe.write()
        try loop.runBriefly { healthy.current >= 1 }
        #expect(events.count == 1, "reported once, not on every pass: \(events.elements)")
        neighbour.invalidate()
        keepAlive.invalidate()
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func regularFilesDirectoriesAndDevNullAreAlwaysReady(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        var template = Array("/tmp/loopkit-hostile-XXXXXX".utf8CString)
        let file = mkstemp(&template)
        try #require(file >= 0)
        _ = unlink(template)
        let directory = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        try #require(directory >= 0 && null >= 0)
        defer {
            _ = close(file)
            _ = close(directory)
            _ = close(null)
        }
        let seen = Recorder<String>()
        var sources: [LoopDescriptorSource] = []
        let watched: [(String, CInt, DescriptorEvents)] = [
            ("file", file, .readable), ("directory", directory, .readable), ("null", null, [.readable, .writable]),
        ]
        for (name, descriptor, events) in watched {
            let source = LoopDescriptorSource(descriptor: descriptor, events: events) { source, reported in
                if reported.contains(.readable) {
                    seen.append(name)
                }
                source.invalidate()  // seen once: enough (level-triggered, it would be called on every pass)
            }
            sources.append(source)
            loop.add(source, forMode: .default)
        }
        let keepAlive = LoopTimer(interval: .seconds(3_600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        try loop.runBriefly { seen.count == 3 }
        #expect(Set(seen.elements) == ["file", "directory", "null"])
        #expect(sources.allSatisfy { !$0.isValid })
        keepAlive.invalidate()
    }

    @Test(arguments: DescriptorWaitPath.allCases)
    func anEventfdAndAnEpollSetAreWatchedLikeAnyDescriptor(_ path: DescriptorWaitPath) throws {
        let loop = try path.makeLoop()
        defer { loop.invalidate() }
        let counter = try TestEventDescriptor()
        let epoll = try #require(EpollSet())
        let pipe = try TestPipe()
        #expect(epoll.add(pipe.readEnd, watching: .readable) == .done)
        let calls = Recorder<String>()
        let onCounter = LoopDescriptorSource(descriptor: counter.descriptor, events: .readable) { _, _ in
            _ = counter.take()
            calls.append("eventfd")
        }
        let onEpoll = LoopDescriptorSource(descriptor: epoll.descriptor, events: .readable) { _, _ in
            pipe.readAll()  // drained: the set is no longer readable
            calls.append("epoll")
        }
        let keepAlive = LoopTimer(interval: .seconds(3_600)) { _ in }
        loop.add(keepAlive, forMode: .default)
        loop.add(onCounter, forMode: .default)
        loop.add(onEpoll, forMode: .default)
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(5)) == .timedOut)
        #expect(calls.count == 0, "nothing ready yet")
        counter.add(3)
        pipe.write("abc")
        try loop.runBriefly { calls.count >= 2 }
        #expect(Set(calls.elements) == ["eventfd", "epoll"])
        #expect(loop.run(mode: .default, before: loop.now + .milliseconds(20)) == .timedOut)
        #expect(calls.count == 2, "level-triggered: drained, not called again: \(calls.elements)")
        onCounter.invalidate()
        onEpoll.invalidate()
        keepAlive.invalidate()
    }
}

// MARK: - Misuse across threads

@Suite("Hostile user: misuse across threads", .timeLimit(.minutes(2)))
struct HostileThreadTests {
    @Test func invalidatingALoopWhileOtherThreadsAddItemsFreesEveryCapture() throws {
        let tokens = HostileTokens()
        let pipe = try TestPipe()
        let started = AtomicCounter()
        let stopAdding = AtomicCounter()
        do {
            let loop = try Loop()
            let workers = (0..<4).map { _ in
                startThread {
                    started.increment()
                    // Bounded: adds to a loop that is not running queue up, and unbounded producers outran the test
                    // thread in an optimized build until the process ran out of memory.
                    var rounds = 0
                    while stopAdding.current == 0 && rounds < 2_000 {
                        _ = addOneOfEach(to: loop, mode: .default, tokens: tokens, pipe: pipe, withTasks: false)
                        let token = tokens.make()
                        let task = loop.schedule(after: .seconds(3_600)) { withExtendedLifetime(token) {} }
                        _ = task
                        rounds += 1
                        if rounds % 64 == 0 { sched_yield() }
                    }
                }
            }
            #expect(waitUntil { tokens.made.current > 400 })
            loop.run(mode: .default, before: loop.now + .milliseconds(2))  // applies some of the adds
            loop.invalidate()
            let madeAtTheEnd = tokens.made.current
            _ = waitUntil { tokens.made.current > madeAtTheEnd + 800 }  // adds after the end, unless all were made
            stopAdding.store(1)
            for worker in workers { worker.join() }
            #expect(loop.run(mode: .default, before: loop.now + .milliseconds(1)) == .finished)
        }
        #expect(tokens.allFreed(), "freed \(tokens.freed.current) of \(tokens.made.current)")
    }

    @Test func reAddingAnInvalidatedItemOfAnyKindIsRefusedAndNeverCalled() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        let other = try Loop(clock: clock)
        defer {
            loop.invalidate()
            other.invalidate()
        }
        let calls = AtomicCounter()
        let pipe = try TestPipe()
        pipe.write()
        let timer = LoopTimer(interval: .zero) { _ in calls.increment() }
        let source = LoopSource { _ in calls.increment() }
        let descriptorSource = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            calls.increment()
        }
        let observer = LoopObserver(activities: .allActivities) { _, _ in calls.increment() }
        let link = LoopDisplayLink { _, _ in calls.increment() }
        #expect(loop.add(timer, forMode: .default))
        #expect(loop.add(source, forMode: .default))
        #expect(loop.add(descriptorSource, forMode: .default))
        #expect(loop.add(observer, forMode: .default))
        #expect(loop.add(link, forMode: .default))
        timer.invalidate()
        source.invalidate()
        descriptorSource.invalidate()
        observer.invalidate()
        link.invalidate()
        source.signal()
        for target in [loop, other] {  // the same loop again, or another: refused, not a trap
            #expect(!target.add(timer, forMode: .default))
            #expect(!target.add(source, forMode: .common))
            #expect(!target.add(descriptorSource, forMode: "custom"))
            #expect(!target.add(observer, forMode: .default))
            #expect(!target.add(link, forMode: .tracking))
        }
        link.isPaused = true
        link.isPaused = false
        timer.setNextFireDate(clock.now)
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(other.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(calls.current == 0)
    }

    @Test func removingFromAModeItIsNotInOrFromALoopItIsNotInChangesNothing() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        let other = try Loop(clock: clock)
        defer {
            loop.invalidate()
            other.invalidate()
        }
        let fired = Recorder<String>()
        let timer = LoopTimer(interval: .milliseconds(1), repeats: true) { _ in fired.append("timer") }
        let source = LoopSource { _ in fired.append("source") }
        let neverAdded = LoopTimer(interval: .milliseconds(1)) { _ in fired.append("never") }
        loop.add(timer, forMode: .default)
        loop.add(timer, forMode: .tracking)
        loop.add(source, forMode: .default)
        loop.remove(timer, forMode: "nowhere")
        loop.remove(timer, forMode: .common)  // added to the real modes one by one: stays in them (as CF)
        loop.remove(neverAdded, forMode: .default)
        other.remove(timer, forMode: .default)  // another loop's item
        other.remove(source, forMode: .default)
        onAnotherThread {
            other.remove(timer, forMode: .default)
            loop.remove(source, forMode: "nowhere")
        }
        #expect(loop.contains(timer, inMode: .default) && loop.contains(timer, inMode: .tracking))
        #expect(!loop.contains(timer, inMode: .common))
        source.signal()
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(1)) == .timedOut)
        #expect(loop.run(mode: .tracking, before: clock.now + .milliseconds(1)) == .timedOut)
        #expect(fired.elements.filter { $0 == "timer" }.count == 2)
        #expect(fired.elements.contains("source"))
        #expect(!fired.elements.contains("never"))
        timer.invalidate()
        source.invalidate()
    }

    @Test func stopAndWakeUpStormsWhileTheLoopRunsNestedEndEveryRunAndNeverHang() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.addCommonMode("deep")
        let keepAlive = LoopSource { _ in }
        loop.add(keepAlive, forMode: .common)
        let levels = Recorder<String>()
        let done = AtomicCounter()
        let innerTimer = LoopTimer(interval: .zero) { _ in
            var result: RunResult
            repeat { result = loop.run(mode: "deep", before: .distantFuture) } while result != .stopped
            levels.append("deep")
        }
        let outerTimer = LoopTimer(interval: .zero) { _ in
            loop.add(innerTimer, forMode: .tracking)
            var result: RunResult
            // Until stopped after the inner timer's run: a storm's stop may end a tracking run before its first pass
            // reaches the inner timer (then nothing would ever run tracking again, and the outer loop below would
            // wait for "deep" for good).
            repeat {
                result = loop.run(mode: .tracking, before: .distantFuture)
            } while result != .stopped || levels.count == 0
            levels.append("tracking")
        }
        loop.add(outerTimer, forMode: .default)
        let stormers = (0..<4).map { index in
            startThread {
                while done.current == 0 {
                    if index % 2 == 0 { loop.stop() } else { loop.wakeUp() }
                }
            }
        }
        let giveUp = ContinuousClock.now + .seconds(120)  // a hang guard: the expectations below then fail
        while levels.count < 2 && ContinuousClock.now < giveUp {
            let result = loop.run(mode: .default, before: loop.now + .seconds(30))
            #expect(result != .finished)
        }
        done.store(1)
        for stormer in stormers { stormer.join() }
        #expect(levels.elements == ["deep", "tracking"])
        #expect(loop.currentMode == nil)
        keepAlive.invalidate()
    }

    @Test func aLoopThreadShutDownFromItsOwnCallbackStillRunsWhatItQueuedAndEnds() throws {
        let thread = try LoopThread(name: "self-shutdown")
        let order = Recorder<String>()
        let timer = LoopTimer(interval: .milliseconds(1)) { _ in
            thread.shutdown()
            thread.shutdown()  // twice: sticky, idempotent
            order.append("shutdown")
            thread.perform { order.append("queued after") }
            thread.loop.perform(inModes: [.tracking]) { order.append("tracking block") }
            let nested = thread.loop.run(mode: .default, before: .distantFuture)
            order.append("nested \(nested)")
        }
        thread.loop.add(timer, forMode: .default)
        thread.join()
        #expect(order.elements == ["shutdown", "nested stopped", "queued after", "tracking block"])
        #expect(!timer.isValid)
    }

    @Test func aGroupShutDownWhileOtherThreadsScheduleTasksRunsOrCancelsEachExactlyOnce() throws {
        let group = try LoopGroup(name: "hostile", threadCount: 2)
        let tokens = HostileTokens()
        let ran = Recorder<Int>()
        let tasks = Recorder<(id: Int, task: LoopScheduledTask)>()
        let workers = (0..<4).map { worker in
            startThread {
                for index in 0..<300 {
                    let id = worker * 1_000 + index
                    let token = tokens.make()
                    let delay: Duration = index % 3 == 0 ? .zero : .microseconds(index * 10)
                    let task = group.next().schedule(after: delay) {
                        withExtendedLifetime(token) {}
                        ran.append(id)
                    }
                    tasks.append((id, task))
                }
            }
        }
        _ = waitUntil { ran.count > 50 }
        group.syncShutdownGracefully()
        for worker in workers { worker.join() }
        let ranIDs = ran.elements
        #expect(Set(ranIDs).count == ranIDs.count, "no task ran twice")
        let ranSet = Set(ranIDs)
        let lost = tasks.elements.filter { ranSet.contains($0.id) == $0.task.isCancelled }
        #expect(lost.isEmpty, "\(lost.count) tasks neither ran nor were cancelled, or both")
        #expect(tasks.count == 1_200)
        #expect(tokens.allFreed(), "freed \(tokens.freed.current) of \(tokens.made.current)")
    }

    @Test func stopAndWakeUpOnALoopThatIsNotRunningAreNoOpsAsDocumented() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let fired = AtomicCounter()
        let timer = LoopTimer(interval: .milliseconds(5)) { _ in fired.increment() }
        loop.add(timer, forMode: .default)
        for _ in 0..<100 {
            loop.stop()
            loop.wakeUp()
        }
        onAnotherThread {
            loop.stop()
            loop.wakeUp()
        }
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(10)) == .finished)
        #expect(fired.current == 1)
    }
}

// MARK: - Display links and hitch monitors

@Suite("Hostile user: display link and hitch monitor lifecycles", .timeLimit(.minutes(2)))
struct HostileDisplayLinkTests {
    @Test func pauseAndResumeStormsFromOtherThreadsLeaveTheLinkInTheLastStateSet() throws {
        let thread = try LoopThread(name: "pause-storm")
        defer { thread.shutdownAndJoin() }
        let frames = AtomicCounter()
        let link = LoopDisplayLink(preferredRate: 120) { _, _ in frames.increment() }
        thread.loop.add(link, forMode: .common)
        #expect(waitUntil { frames.current >= 2 })
        let togglers = (0..<4).map { index in
            startThread {
                for round in 0..<2_000 {
                    link.isPaused = (round + index) % 2 == 0
                }
            }
        }
        for toggler in togglers { toggler.join() }
        link.isPaused = true
        let barrier = AtomicCounter()
        thread.perform { barrier.increment() }
        #expect(waitUntil { barrier.current == 1 })
        let pausedAt = frames.current
        usleep(60_000)
        #expect(frames.current == pausedAt, "a paused link does not tick")
        link.isPaused = false
        #expect(waitUntil { frames.current >= pausedAt + 3 }, "a resumed link ticks again")
        link.invalidate()
    }

    @Test func aLinkInvalidatedFromItsOwnCallbackTicksNoMoreAndFreesItsCaptures() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let tokens = HostileTokens()
        let frames = AtomicCounter()
        do {
            let token = tokens.make()
            let link = LoopDisplayLink(preferredRate: 60) { link, _ in
                withExtendedLifetime(token) {}
                if frames.current == 2 {
                    link.invalidate()
                    link.invalidate()
                    link.isPaused = true
                }
                frames.increment()
            }
            loop.add(link, forMode: .common)
        }
        #expect(loop.run(mode: .default, before: clock.now + .seconds(1)) == .finished)
        #expect(frames.current == 3)
        #expect(tokens.allFreed())
    }

    @Test func aCommonLinkRemovedFromOneCommonModeTicksInTheOthersAndInModesMadeCommonLater() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<LoopMode>()
        let link = LoopDisplayLink(preferredRate: 60) { _, _ in frames.append(loop.currentMode ?? "?") }
        loop.add(link, forMode: .common)
        loop.remove(link, forMode: .tracking)
        loop.remove(link, forMode: .tracking)
        let keepAlive = LoopTimer(interval: .seconds(3_600)) { _ in }
        loop.add(keepAlive, forMode: .common)
        loop.addCommonMode("modal")
        #expect(loop.contains(link, inMode: .common))
        #expect(!loop.contains(link, inMode: .tracking))
        #expect(loop.contains(link, inMode: "modal"))
        for mode: LoopMode in [.tracking, .default, "modal"] {
            #expect(loop.run(mode: mode, before: clock.now + .milliseconds(100)) == .timedOut)
        }
        let byMode = Dictionary(grouping: frames.elements, by: { $0 }).mapValues(\.count)
        #expect(byMode[.tracking] == nil)
        #expect((byMode[.default] ?? 0) >= 5)
        #expect((byMode["modal"] ?? 0) >= 5)
        loop.remove(link, forMode: .common)
        #expect(!loop.contains(link, inMode: .default) && !loop.contains(link, inMode: "modal"))
        frames.removeAll()
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(100)) == .timedOut)
        #expect(frames.count == 0)
        keepAlive.invalidate()
        link.invalidate()
    }

    @Test func aLinkKeepsItsGridThroughANestedRunAndIsNotReenteredFromItsOwnCallback() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        defer { loop.invalidate() }
        let frames = Recorder<(mode: LoopMode, frame: DisplayFrame)>()
        let depth = AtomicCounter()
        let reentered = AtomicCounter()
        let link = LoopDisplayLink(preferredRate: 120) { _, frame in
            depth.increment()
            defer { depth.add(-1) }
            if depth.current > 1 { reentered.increment() }
            frames.append((loop.currentMode ?? "?", frame))
            if frames.count == 3 {  // a nested run from its own callback: the link does not tick inside it
                loop.run(mode: .tracking, before: clock.now + .milliseconds(50))
            }
        }
        loop.add(link, forMode: .common)
        let drag = LoopTimer(interval: .milliseconds(200)) { _ in  // a drag from another callback: the link ticks
            loop.run(mode: .tracking, before: clock.now + .milliseconds(100))
        }
        loop.add(drag, forMode: .default)
        #expect(loop.run(mode: .default, before: clock.now + .milliseconds(400)) == .timedOut)
        link.invalidate()
        #expect(reentered.current == 0)
        let seen = frames.elements
        #expect(zip(seen, seen.dropFirst()).allSatisfy {
            $1.frame.index == $0.frame.index + 1 + Int64($1.frame.skippedFrames)
        }, "indices follow the grid, skipped frames counted")
        #expect(seen.dropFirst(3).first?.frame.skippedFrames ?? 0 >= 4, "the frames missed in its own callback")
        #expect(seen.filter { $0.mode == .tracking }.count >= 10, "ticking during the drag")
    }

    @Test func aMonitorMadeFromAnotherThreadWhileTheLoopRunsNestedCountsFramesAndStopsWhenInvalidated() throws {
        let thread = try LoopThread(name: "monitored")
        defer { thread.shutdownAndJoin() }
        let frames = AtomicCounter()
        let link = LoopDisplayLink(preferredRate: 120) { _, _ in frames.increment() }
        let nestedRuns = AtomicCounter()
        let dragging = AtomicCounter()
        dragging.store(1)  // here, not in the timer: a timer late past the end of the drag would start it for good
        let drag = LoopTimer(interval: .milliseconds(1)) { _ in
            while dragging.current == 1 {
                // A shutdown stops every run: the drag ends with it.
                if thread.loop.run(mode: .tracking, before: thread.loop.now + .milliseconds(20)) == .stopped { break }
                nestedRuns.increment()
            }
        }
        thread.loop.add(link, forMode: .common)
        thread.loop.add(drag, forMode: .default)
        #expect(waitUntil { nestedRuns.current >= 1 })
        let monitor = HitchMonitor(loop: thread.loop)
        monitor.attach(to: link)
        monitor.attach(to: link)
        let start = frames.current
        #expect(waitUntil { monitor.report.frames >= 5 })
        dragging.store(0)
        monitor.invalidate()
        let barrier = AtomicCounter()
        thread.perform { barrier.increment() }
        #expect(waitUntil { barrier.current == 1 && frames.current >= start + 10 })
        let counted = monitor.report.frames
        #expect(waitUntil { frames.current >= start + 20 })
        #expect(monitor.report.frames == counted, "an invalidated monitor counts no more")
        link.invalidate()
    }
}

// MARK: - Lifetimes

@Suite("Hostile user: what callbacks capture is let go of", .timeLimit(.minutes(2)))
struct HostileLifetimeTests {
    @Test func everyItemLetsGoOfItsCapturesWhenItsLoopIsFreedWithoutInvalidate() throws {
        let tokens = HostileTokens()
        let pipe = try TestPipe()
        weak var weakLoop: Loop?
        do {
            let clock = ManualLoopClock()
            let loop = try Loop(clock: clock)
            weakLoop = loop
            _ = addOneOfEach(to: loop, mode: .default, tokens: tokens, pipe: pipe)
            _ = addOneOfEach(to: loop, mode: .common, tokens: tokens, pipe: pipe)
            loop.run(mode: .default, before: clock.now + .milliseconds(10))
        }
        #expect(weakLoop == nil)
        #expect(tokens.allFreed(), "freed \(tokens.freed.current) of \(tokens.made.current)")
    }

    @Test func itemsTheUserKeepsLetGoOfTheirCapturesWhenInvalidatedAfterTheirLoopIsGone() throws {
        let tokens = HostileTokens()
        let pipe = try TestPipe()
        var items: [AnyObject] = []
        do {
            let loop = try Loop(clock: ManualLoopClock())
            items = addOneOfEach(to: loop, mode: .common, tokens: tokens, pipe: pipe, withTasks: false)
            loop.run(mode: .default, before: loop.now)
        }
        #expect(tokens.freed.current == 0, "kept: the items were not invalidated")
        for item in items {
            switch item {
            case let timer as LoopTimer: timer.invalidate()
            case let source as LoopSource: source.invalidate()
            case let source as LoopDescriptorSource: source.invalidate()
            case let observer as LoopObserver: observer.invalidate()
            case let link as LoopDisplayLink: link.invalidate()
            default: Issue.record("unexpected item \(item)")
            }
        }
        #expect(tokens.allFreed(), "freed \(tokens.freed.current) of \(tokens.made.current)")
        withExtendedLifetime(items) {}
    }

    @Test func everyItemLetsGoOfItsCapturesWhenItsThreadExits() throws {
        let tokens = HostileTokens()
        let pipe = try TestPipe()
        let thread = startThread {
            let loop = Loop.current
            _ = addOneOfEach(to: loop, mode: .default, tokens: tokens, pipe: pipe)
            _ = addOneOfEach(to: loop, mode: .common, tokens: tokens, pipe: pipe)
            loop.run(mode: .default, before: loop.now + .milliseconds(5))
        }
        thread.join()
        #expect(tokens.allFreed(), "freed \(tokens.freed.current) of \(tokens.made.current)")
    }

    @Test func everyItemLetsGoOfItsCapturesWhenItsGroupShutsDown() throws {
        let tokens = HostileTokens()
        let pipe = try TestPipe()
        let group = try LoopGroup(name: "lifetimes", threadCount: 2)
        for loop in group.loops {
            _ = addOneOfEach(to: loop, mode: .default, tokens: tokens, pipe: pipe)
            _ = addOneOfEach(to: loop, mode: .common, tokens: tokens, pipe: pipe)
            _ = addOneOfEach(to: loop, mode: "elsewhere", tokens: tokens, pipe: pipe)
        }
        let ran = AtomicCounter()
        for loop in group.loops { loop.perform { ran.increment() } }
        #expect(waitUntil { ran.current == 2 })
        group.syncShutdownGracefully()
        #expect(tokens.allFreed(), "freed \(tokens.freed.current) of \(tokens.made.current)")
    }

    @Test func aMonitorAndATracerDroppedWithoutInvalidateLetGoOfTheirLoop() throws {
        weak var weakLoop: Loop?
        let hangs = AtomicCounter()
        do {
            let clock = ManualLoopClock()
            let loop = try Loop(clock: clock)
            weakLoop = loop
            let monitor = HitchMonitor(loop: loop, hangThreshold: .nanoseconds(1))
            monitor.onHang { _ in hangs.increment() }
            let tracer = LoopTracer(loop: loop, threadName: "\"quoted\"\n\u{0}")
            let link = LoopDisplayLink { _, _ in clock.advance(by: .milliseconds(1)) }
            monitor.attach(to: link)
            loop.add(link, forMode: .common)
            loop.run(mode: .default, before: clock.now + .milliseconds(50))
            #expect(tracer.json().contains("\\\"quoted\\\"\\n\\u0000"))
            #expect(hangs.current >= 1)
        }
        #expect(weakLoop == nil, "the loop is freed with the monitor, tracer and link it held")
    }
}

// MARK: - Process signals (serialized with every other test that touches signals)

extension ProcessSignalTests {
    @Test func hostileOddSignalNumbersThrowAndLeaveTheLoopEmpty() throws {
        let loop = try Loop(clock: ManualLoopClock())
        defer { loop.invalidate() }
        for number: CInt in [0, -1, 32, 65, 1_000, .max, .min, SIGKILL, SIGSTOP] {
            #expect(throws: SystemCallError.self, "signal \(number)") {
                _ = try LoopSignalSource(signal: number, loop: loop) { _ in }
            }
        }
        #expect(loop.run(mode: .default, before: loop.now) == .finished)
    }

    @Test func hostileASignalSourceOnALoopFreedWithoutInvalidateGivesTheSignalBack() throws {
        let tokens = HostileTokens()
        var source: LoopSignalSource?
        do {
            let loop = try Loop(clock: ManualLoopClock())
            let token = tokens.make()
            source = try LoopSignalSource(signal: SIGUSR2, loop: loop) { _ in withExtendedLifetime(token) {} }
            #expect(source?.isValid == true)
        }
        #expect(source?.isValid == false, "ended with its loop")
        #expect(tokens.allFreed())
        var current = sigaction()
        sigaction(SIGUSR2, nil, &current)
        #expect(current.__sigaction_handler.sa_handler == nil, "SIGUSR2 is back to its default action")
        source = nil
    }
}
