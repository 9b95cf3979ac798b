#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Synchronization
@testable import LoopKit

/// An atomic count that closures can capture (an `Atomic` itself cannot be copied into one).
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)

    func increment() {
        self.value.wrappingAdd(1, ordering: .acquiringAndReleasing)
    }

    func add(_ amount: Int) {
        self.value.wrappingAdd(amount, ordering: .acquiringAndReleasing)
    }

    func store(_ newValue: Int) {
        self.value.store(newValue, ordering: .releasing)
    }

    var current: Int { self.value.load(ordering: .acquiring) }
}

/// Counts its own deinit: captured by a callback, it tells when the callback (and what it captured) was let go of.
final class DeinitCounter: Sendable {
    private let freed: AtomicCounter

    init(_ freed: AtomicCounter) {
        self.freed = freed
    }

    deinit {
        self.freed.increment()
    }
}

/// Random cross-thread operations on a few running loops, from many threads at once, and the checks that nothing
/// was lost: blocks, signals, timer fires, stops and shutdowns.
///
/// Each worker thread draws operations from its own generator, seeded from the run's seed: perform, signal, add,
/// remove and invalidate timers and sources, descriptor sources on pipes that are closed (with or without cancelling
/// first) so that their numbers are reused, stops, nested runs from callbacks, and loop threads started and shut
/// down. A watchdog ends the process with every thread's state if progress stops. `run()` is called once, from one
/// thread.
final class StressHarness: Sendable {
    /// What a run did and found.
    struct Report: CustomStringConvertible {
        var seed: UInt64
        var seconds: Double
        var operations: Int
        var callbacks: Int
        var failures: [String]

        var description: String {
            let rate = Int(Double(self.operations) / max(self.seconds, 0.001))
            return "stress seed \(self.seed): \(self.operations) operations (\(rate)/s) and \(self.callbacks) callbacks "
                + "in \(String(format: "%.1f", self.seconds)) s, \(self.failures.count) failures"
        }
    }

    /// A signalled source that stays in the common modes for the whole run: every signal must be followed by a call.
    final class SignalProbe: Sendable {
        let signals = AtomicCounter()
        /// The signal count read at the start of the latest call.
        let handled = AtomicCounter()
        let source: LoopSource

        init() {
            let signals = self.signals
            let handled = self.handled
            self.source = LoopSource { _ in
                handled.store(signals.current)
            }
        }

        func signal() {
            self.signals.increment()  // before the signal it announces
            self.source.signal()
        }
    }

    /// A one-shot timer's record: it must fire once (at most once if invalidated), never before its date.
    final class OneShotProbe: Sendable {
        let due: LoopInstant
        let fires = Atomic<Int>(0)
        let early = Atomic<Bool>(false)
        let invalidated = Atomic<Bool>(false)

        init(due: LoopInstant) {
            self.due = due
        }
    }

    /// A repeating timer's record: fires land in distinct slots of its grid, none before its slot.
    final class RepeatingProbe: Sendable {
        let start: LoopInstant
        let interval: Duration
        private let lastSlot = Atomic<Int>(-1)
        let failures = LoopLock<[String]>([])

        init(start: LoopInstant, interval: Duration) {
            self.start = start
            self.interval = interval
        }

        /// Called on the loop's thread at a fire.
        func fired(at now: LoopInstant) {
            guard now >= self.start else {
                self.failures.withLock { $0.append("a repeating timer fired \(self.start - now) before its first slot") }
                return
            }
            let slot = Int((now - self.start) / self.interval)
            let last = self.lastSlot.exchange(slot, ordering: .relaxed)
            if slot <= last {
                self.failures.withLock { $0.append("a repeating timer fired twice in slot \(slot)") }
            }
        }
    }

    /// A pipe watched by a descriptor source. Kept ones must have every byte written read by the end.
    final class PipeProbe: Sendable {
        let pipe: TestPipe
        let written = AtomicCounter()
        let read = AtomicCounter()
        let source: LoopDescriptorSource

        /// `reads`: the source reads what arrives; otherwise (a pipe to be closed under its live source) it only
        /// cancels itself at its first call, so that a number reused by another worker's pipe is not read from.
        init(reads: Bool) throws {
            let pipe = try TestPipe()
            self.pipe = pipe
            let read = self.read
            self.source = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { source, events in
                guard reads else {
                    source.invalidate()
                    return
                }
                var buffer = [UInt8](repeating: 0, count: 64)
                let count = readNonBlocking(source.descriptor, &buffer)
                read.add(count)
                if !events.isDisjoint(with: [.error, .hangUp, .invalid]) {
                    source.invalidate()
                }
            }
        }

        func write() {
            self.written.increment()
            self.pipe.write()
        }
    }

    /// One of the long-lived loops, on its own `LoopThread`.
    final class Target: Sendable {
        let index: Int
        let thread: LoopThread
        var loop: Loop { self.thread.loop }
        let signalProbes: [SignalProbe]
        /// The blocks each worker's blocks ran in, by worker: their sequence numbers in the order they ran.
        let blockLog: LoopLock<[Int: [Int]]> = LoopLock([:])
        /// A mode outside the common set, with a keep-alive timer and an `entry` observer: a worker runs it nested
        /// and stops it from its own thread once it has begun.
        let stopMode: LoopMode
        let stopRunEntered = DispatchSemaphore(value: 0)
        let isStopRunBusy = Atomic<Bool>(false)
        let stopRunsBegun = Atomic<Int>(0)
        let stopRunsEnded = Atomic<Int>(0)
        let nestingDepth = Atomic<Int>(0)
        let failures = LoopLock<[String]>([])

        init(index: Int) throws {
            self.index = index
            self.thread = try LoopThread(name: "stress-\(index)")
            self.signalProbes = (0..<4).map { _ in SignalProbe() }
            self.stopMode = LoopMode("stress.stop.\(index)")
            let loop = self.thread.loop
            if index == 0 {
                // The first loop keeps its descriptors in epoll from four on, so both wait paths are stressed.
                let done = DispatchSemaphore(value: 0)
                self.thread.perform {
                    loop.pollWaiter?.largeModeThreshold = 4
                    done.signal()
                }
                done.wait()
            }
            for probe in self.signalProbes {
                loop.add(probe.source, forMode: .common)
            }
            loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: self.stopMode)
            let entered = self.stopRunEntered
            loop.add(LoopObserver(activities: .entry) { _, _ in entered.signal() }, forMode: self.stopMode)
        }

        func recordFailure(_ failure: String) {
            self.failures.withLock { $0.append("loop \(self.index): \(failure)") }
        }
    }

    let seed: UInt64
    let duration: Duration
    let workerCount: Int
    let targets: [Target]
    private let progress = Atomic<Int>(0)
    private let operations = AtomicCounter()
    private let callbacks = AtomicCounter()
    private let states: LoopLock<[String]>
    private let failures = LoopLock<[String]>([])
    private let isFinished = Atomic<Bool>(false)

    init(seed: UInt64, duration: Duration, loops: Int = 3, workers: Int = 8) throws {
        self.seed = seed
        self.duration = duration
        self.workerCount = workers
        self.targets = try (0..<loops).map { try Target(index: $0) }
        self.states = LoopLock(Array(repeating: "not started", count: workers))
    }

    private func setState(_ worker: Int, _ state: String) {
        self.states.withLock { $0[worker] = state }
        self.progress.wrappingAdd(1, ordering: .relaxed)
    }

    private func recordFailure(_ failure: String) {
        self.failures.withLock { $0.append(failure) }
    }

    /// Runs the workers for the harness's duration, waits for what they set in motion, checks, and shuts down.
    func run() -> Report {
        let clock = ContinuousClock()
        let began = clock.now
        let watchdog = startThread { self.watch() }
        let workers = (0..<self.workerCount).map { worker in
            startThread { self.work(worker) }
        }
        for worker in workers { worker.join() }
        let operations = self.operations.current
        let worked = clock.now - began
        let seconds = Double(worked.components.seconds) + Double(worked.components.attoseconds) / 1e18
        self.settleAndCheck()
        for target in self.targets {
            target.thread.shutdownAndJoin()  // every shutdown returns
        }
        self.isFinished.store(true, ordering: .releasing)
        watchdog.join()
        var failures = self.failures.withLock { $0 }
        for target in self.targets {
            failures += target.failures.withLock { $0 }
        }
        return Report(seed: self.seed, seconds: seconds, operations: operations,
                      callbacks: self.callbacks.current, failures: failures)
    }

    /// Ends the process with every thread's state when nothing has progressed for 30 s, or when the run goes on
    /// 150 s past its workers' time (a stuck worker while other workers' repeating timers still count as progress):
    /// a hang must not hang CI.
    private func watch() {
        var last = -1
        var stalledSince = ContinuousClock.now
        let giveUp = ContinuousClock.now + self.duration + .seconds(150)
        while !self.isFinished.load(ordering: .acquiring) {
            usleep(100_000)
            let now = self.progress.load(ordering: .relaxed) &+ self.callbacks.current
            if now != last {
                last = now
                stalledSince = ContinuousClock.now
            }
            if ContinuousClock.now - stalledSince > .seconds(30) || ContinuousClock.now > giveUp {
                let states = self.states.withLock { $0 }.enumerated().map { "  worker \($0.offset): \($0.element)" }
                let loops = self.targets.map {
                    "  loop \($0.index): waiting \($0.loop.isWaiting), nesting \($0.nestingDepth.load(ordering: .relaxed)), "
                        + "stop-mode runs begun \($0.stopRunsBegun.load(ordering: .relaxed)), "
                        + "ended \($0.stopRunsEnded.load(ordering: .relaxed))"
                }
                fatalError("stress seed \(self.seed): no progress for 30 s, or still running 150 s past its time\n"
                    + (states + loops).joined(separator: "\n"))
            }
        }
    }

    // MARK: The workers

    /// What one worker keeps between its operations. Worker thread only.
    private struct WorkerState {
        var generator: SplitMix64
        var sequenceByLoop: [Int]
        var oneShots: [(OneShotProbe, LoopTimer)] = []
        var repeating: [(RepeatingProbe, LoopTimer)] = []
        var churnSources: [(source: LoopSource, target: Target)] = []
        var pipes: [(probe: PipeProbe, target: Target)] = []
        var keptPipes: [PipeProbe] = []
    }

    private func work(_ worker: Int) {
        var state = WorkerState(
            generator: SplitMix64(seed: self.seed &+ UInt64(worker) &* 0x1_0000_0001),
            sequenceByLoop: Array(repeating: 0, count: self.targets.count))
        let end = ContinuousClock.now + self.duration
        var step = 0
        while ContinuousClock.now < end {
            step += 1
            self.operations.increment()
            let target = self.targets[Int.random(in: 0..<self.targets.count, using: &state.generator)]
            let roll = Int.random(in: 0..<100, using: &state.generator)
            switch roll {
            case 0..<30: self.performBlock(worker, on: target, &state)
            case 30..<45: self.signal(worker, on: target, &state)
            case 45..<55: self.addOneShotTimer(worker, on: target, &state)
            case 55..<60: self.churnRepeatingTimer(worker, on: target, &state)
            case 60..<68: self.churnSource(worker, on: target, &state)
            case 68..<78: self.churnPipe(worker, on: target, &state)
            case 78..<82: self.stop(worker, target)
            case 82..<88: self.nestRun(worker, on: target)
            case 88..<91: self.stopNestedRun(worker, on: target)
            case 91..<93: self.startAndShutDownLoopThread(worker, &state)
            default:
                self.setState(worker, "waking loop \(target.index)")
                target.loop.wakeUp()
            }
            if step % 64 == 0 {
                usleep(UInt32.random(in: 0..<200, using: &state.generator))  // let the loops catch up now and then
            }
        }
        // Leave nothing running that the checks do not count on.
        self.setState(worker, "cleaning up")
        for (probe, timer) in state.repeating {
            timer.invalidate()
            self.failures.withLock { $0 += probe.failures.withLock { $0 } }
        }
        for (source, _) in state.churnSources { source.invalidate() }
        for (probe, target) in state.pipes {
            self.retire(probe, on: target)
        }
        state.pipes.removeAll()
        self.keep(state.oneShots.map(\.0), state.keptPipes, sentByLoop: state.sequenceByLoop, worker: worker)
        self.setState(worker, "done")
    }

    /// What the checks need from each worker once it has finished.
    private let leftovers = LoopLock<(oneShots: [OneShotProbe], pipes: [PipeProbe], sent: [Int: [Int]])>(([], [], [:]))

    private func keep(_ oneShots: [OneShotProbe], _ pipes: [PipeProbe], sentByLoop: [Int], worker: Int) {
        self.leftovers.withLock { leftovers in
            leftovers.oneShots += oneShots
            leftovers.pipes += pipes
            leftovers.sent[worker] = sentByLoop
        }
    }

    private func performBlock(_ worker: Int, on target: Target, _ state: inout WorkerState) {
        let sequence = state.sequenceByLoop[target.index]
        state.sequenceByLoop[target.index] += 1
        self.setState(worker, "performing block \(sequence) on loop \(target.index)")
        let callbacks = self.callbacks
        target.loop.perform(inModes: [.common]) {
            target.blockLog.withLock { $0[worker, default: []].append(sequence) }
            callbacks.increment()
        }
    }

    private func signal(_ worker: Int, on target: Target, _ state: inout WorkerState) {
        let probe = target.signalProbes[Int.random(in: 0..<target.signalProbes.count, using: &state.generator)]
        self.setState(worker, "signalling a source of loop \(target.index)")
        probe.signal()
    }

    private func addOneShotTimer(_ worker: Int, on target: Target, _ state: inout WorkerState) {
        self.setState(worker, "adding a one-shot timer to loop \(target.index)")
        let due = target.loop.now + .microseconds(Int64.random(in: 0..<20_000, using: &state.generator))
        let probe = OneShotProbe(due: due)
        let loop = target.loop
        let callbacks = self.callbacks
        let timer = LoopTimer(fireAt: due) { _ in
            if loop.now < probe.due { probe.early.store(true, ordering: .relaxed) }
            probe.fires.wrappingAdd(1, ordering: .relaxed)
            callbacks.increment()
        }
        guard loop.add(timer, forMode: .common) else {
            target.recordFailure("adding a valid timer to a running loop returned false")
            return
        }
        state.oneShots.append((probe, timer))
        if Int.random(in: 0..<4, using: &state.generator) == 0 {
            // Invalidate one, perhaps as it fires: it may then have fired once, never twice.
            let index = Int.random(in: 0..<state.oneShots.count, using: &state.generator)
            state.oneShots[index].0.invalidated.store(true, ordering: .relaxed)
            state.oneShots[index].1.invalidate()
        }
        if state.oneShots.count > 256 {
            // Keep the list short: what has fired is checked now.
            state.oneShots.removeAll { probe, _ in
                let fires = probe.fires.load(ordering: .relaxed)
                if fires > 1 { self.recordFailure("a one-shot timer fired \(fires) times") }
                if probe.early.load(ordering: .relaxed) { self.recordFailure("a one-shot timer fired early") }
                return fires == 1
            }
        }
    }

    private func churnRepeatingTimer(_ worker: Int, on target: Target, _ state: inout WorkerState) {
        if !state.repeating.isEmpty && (state.repeating.count > 4 || Bool.random(using: &state.generator)) {
            let (probe, timer) = state.repeating.remove(at: Int.random(in: 0..<state.repeating.count,
                                                                       using: &state.generator))
            self.setState(worker, "invalidating a repeating timer")
            timer.invalidate()
            self.failures.withLock { $0 += probe.failures.withLock { $0 } }
            return
        }
        self.setState(worker, "adding a repeating timer to loop \(target.index)")
        let interval = Duration.microseconds(Int64.random(in: 1_000..<5_000, using: &state.generator))
        let start = target.loop.now + interval
        let probe = RepeatingProbe(start: start, interval: interval)
        let loop = target.loop
        let callbacks = self.callbacks
        let timer = LoopTimer(fireAt: start, interval: interval, repeats: true) { _ in
            probe.fired(at: loop.now)
            callbacks.increment()
        }
        let mode: LoopMode = Bool.random(using: &state.generator) ? .common : .default
        loop.add(timer, forMode: mode)
        if mode == .default {
            loop.add(timer, forMode: .tracking)  // two modes: still one fire per slot
        }
        state.repeating.append((probe, timer))
    }

    private func churnSource(_ worker: Int, on target: Target, _ state: inout WorkerState) {
        if !state.churnSources.isEmpty && (state.churnSources.count > 8 || Bool.random(using: &state.generator)) {
            let (source, owner) = state.churnSources.remove(at: Int.random(in: 0..<state.churnSources.count,
                                                                           using: &state.generator))
            self.setState(worker, "removing or invalidating a source of loop \(owner.index)")
            if Bool.random(using: &state.generator) {
                source.invalidate()
            } else {
                owner.loop.remove(source, forMode: .common)
            }
            return
        }
        self.setState(worker, "adding a source to loop \(target.index)")
        let callbacks = self.callbacks
        let source = LoopSource(order: Int.random(in: -2...2, using: &state.generator)) { _ in
            callbacks.increment()
        }
        target.loop.add(source, forMode: .common)
        source.signal()
        state.churnSources.append((source, target))
    }

    private func churnPipe(_ worker: Int, on target: Target, _ state: inout WorkerState) {
        let roll = Int.random(in: 0..<10, using: &state.generator)
        if !state.pipes.isEmpty && (state.pipes.count > 12 || roll < 4) {
            let (probe, owner) = state.pipes.remove(at: Int.random(in: 0..<state.pipes.count,
                                                                   using: &state.generator))
            if roll >= 2 && state.keptPipes.count < 8 {
                self.setState(worker, "keeping a pipe to the end")
                state.keptPipes.append(probe)
            } else {
                self.setState(worker, "retiring a pipe of loop \(owner.index)")
                self.retire(probe, on: owner)
            }
            return
        }
        if roll == 9 {
            // Closed under its live source: the loop reports it to the source, which cancels itself; the number is
            // soon reused by another worker's pipe.
            self.setState(worker, "closing a pipe under its live source on loop \(target.index)")
            guard let probe = try? PipeProbe(reads: false) else { return }
            target.loop.add(probe.source, forMode: .common)
            probe.pipe.closeReadEnd()
            probe.pipe.closeWriteEnd()
            return
        }
        self.setState(worker, "adding a descriptor source to loop \(target.index)")
        guard let probe = try? PipeProbe(reads: true) else {
            self.recordFailure("no descriptor left for a pipe")
            return
        }
        target.loop.add(probe.source, forMode: .common)
        probe.write()
        state.pipes.append((probe, target))
    }

    /// Cancels a reading pipe's source and closes the pipe on its loop's thread, the documented way: closed from
    /// another thread, a callback already under way could read from the number after another worker reused it.
    private func retire(_ probe: PipeProbe, on target: Target) {
        target.loop.perform(inModes: [.common]) {
            probe.source.invalidate()
            probe.pipe.closeReadEnd()
            probe.pipe.closeWriteEnd()
        }
    }

    private func stop(_ worker: Int, _ target: Target) {
        self.setState(worker, "stopping loop \(target.index)")
        target.loop.stop()  // ends whatever run is innermost; the loop thread runs again
    }

    private func nestRun(_ worker: Int, on target: Target) {
        self.setState(worker, "asking loop \(target.index) for a nested run")
        let callbacks = self.callbacks
        target.loop.perform(inModes: [.common]) {
            callbacks.increment()
            guard target.nestingDepth.load(ordering: .relaxed) < 3 else { return }
            target.nestingDepth.wrappingAdd(1, ordering: .relaxed)
            defer { target.nestingDepth.wrappingSubtract(1, ordering: .relaxed) }
            let mode: LoopMode = target.loop.currentMode == .tracking ? .default : .tracking
            let result = target.loop.run(mode: mode, before: target.loop.now + .milliseconds(2))
            if result != .timedOut && result != .stopped {
                target.recordFailure("a nested run of \(mode) returned \(result)")
            }
        }
    }

    /// Runs the target's stop mode nested and stops it from this thread once it has begun: the stop must end it.
    private func stopNestedRun(_ worker: Int, on target: Target) {
        guard target.isStopRunBusy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        else { return }
        defer { target.isStopRunBusy.store(false, ordering: .releasing) }
        self.setState(worker, "asking loop \(target.index) for a run to stop")
        let callbacks = self.callbacks
        target.loop.perform(inModes: [.common]) {
            target.stopRunsBegun.wrappingAdd(1, ordering: .relaxed)
            let result = target.loop.run(mode: target.stopMode, before: .distantFuture)
            target.stopRunsEnded.wrappingAdd(1, ordering: .relaxed)
            callbacks.increment()
            if result != .stopped {
                target.recordFailure("a run of its stop mode returned \(result)")
            }
        }
        self.setState(worker, "waiting for loop \(target.index) to enter its stop mode")
        target.stopRunEntered.wait()
        self.setState(worker, "stopping loop \(target.index)'s stop-mode run")
        target.loop.stop()
        self.setState(worker, "waiting for loop \(target.index)'s stop-mode run to end")
        while target.stopRunsEnded.load(ordering: .relaxed) < target.stopRunsBegun.load(ordering: .relaxed) {
            usleep(50)
        }
    }

    private func startAndShutDownLoopThread(_ worker: Int, _ state: inout WorkerState) {
        self.setState(worker, "starting a loop thread")
        guard let thread = try? LoopThread(name: "stress-short-\(worker)") else {
            self.recordFailure("a loop thread could not start")
            return
        }
        let ran = Atomic<Int>(0)
        let count = Int.random(in: 0...5, using: &state.generator)
        for _ in 0..<count {
            thread.perform { ran.wrappingAdd(1, ordering: .relaxed) }
        }
        if Bool.random(using: &state.generator) {
            thread.shutdown()  // sticky, perhaps before the loop first runs
        }
        self.setState(worker, "shutting a loop thread down")
        thread.shutdownAndJoin()
        if ran.load(ordering: .relaxed) != count {
            self.recordFailure("a loop thread ran \(ran.load(ordering: .relaxed)) of \(count) blocks before it ended")
        }
    }

    // MARK: The checks

    /// Waits for what the workers set in motion (due timers, signals, blocks, bytes), then checks it all. Each wait
    /// gives up after 20 s, inside the watchdog's 30, and counts as progress.
    private func settleAndCheck() {
        self.states.withLock { $0 = $0.map { _ in "settling" } }
        let (oneShots, pipes, sent) = self.leftovers.withLock { $0 }
        let callbacks = self.callbacks
        // A block queued last on each loop runs after every earlier one (FIFO per producer only orders one
        // producer's blocks, so wait for the counts instead).
        let allBlocksRan = waitUntil(limit: .seconds(20)) {
            self.targets.allSatisfy { target in
                let log = target.blockLog.withLock { $0 }
                return sent.allSatisfy { worker, counts in (log[worker]?.count ?? 0) >= counts[target.index] }
            }
        }
        self.progress.wrappingAdd(1, ordering: .relaxed)
        if !allBlocksRan { self.recordFailure("blocks did not all run within 20 s") }
        for target in self.targets {
            let log = target.blockLog.withLock { $0 }
            for (worker, counts) in sent {
                let ran = log[worker] ?? []
                if ran != Array(0..<counts[target.index]) {
                    let firstWrong = zip(ran, 0...).first { $0.0 != $0.1 }.map { "first out of place: \($0.0)" } ?? ""
                    target.recordFailure("worker \(worker) sent \(counts[target.index]) blocks; \(ran.count) ran, "
                        + "not exactly once each in order \(firstWrong)")
                }
            }
        }

        let signalsHandled = waitUntil(limit: .seconds(20)) {
            self.targets.allSatisfy { target in
                target.signalProbes.allSatisfy {
                    $0.handled.current == $0.signals.current
                }
            }
        }
        self.progress.wrappingAdd(1, ordering: .relaxed)
        if !signalsHandled { self.recordFailure("a signal was not followed by a call within 20 s") }

        let timersFired = waitUntil(limit: .seconds(20)) {
            oneShots.allSatisfy { $0.invalidated.load(ordering: .relaxed) || $0.fires.load(ordering: .relaxed) >= 1 }
        }
        self.progress.wrappingAdd(1, ordering: .relaxed)
        if !timersFired { self.recordFailure("a one-shot timer did not fire within 20 s of its date") }
        for probe in oneShots {
            let fires = probe.fires.load(ordering: .relaxed)
            if fires > 1 { self.recordFailure("a one-shot timer fired \(fires) times") }
            if probe.early.load(ordering: .relaxed) { self.recordFailure("a one-shot timer fired early") }
        }

        let bytesRead = waitUntil(limit: .seconds(20)) {
            pipes.allSatisfy { $0.read.current >= $0.written.current }
        }
        self.progress.wrappingAdd(1, ordering: .relaxed)
        if !bytesRead { self.recordFailure("bytes written to a watched pipe were not read within 20 s") }
        for probe in pipes { probe.source.invalidate() }

        for target in self.targets where target.stopRunsBegun.load(ordering: .relaxed)
            != target.stopRunsEnded.load(ordering: .relaxed) {
            target.recordFailure("a stopped run did not end")
        }
        _ = callbacks
    }
}
