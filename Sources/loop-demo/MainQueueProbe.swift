import CoreFoundation
import Dispatch
import Foundation
import LoopKit

/// `loop-demo main-queue [--foundation | --host-driver]`: shows that `DispatchQueue.main`, `Task { @MainActor in }`
/// and `MainActor.run` work on a main thread that runs `Loop.main` (with `--foundation`: Foundation's `RunLoop.main`;
/// with `--host-driver`: `Loop.main` driven by a `poll(2)` host loop through a `LoopHostDriver`), and that main-queue
/// work waits while the loop runs a mode that is not common. Prints one line per check and exits 0 when all of them
/// ran; the tests compare the outputs.
enum MainQueueProbe {
    /// What runs the main thread.
    enum Runner {
        case loopKit
        case foundation
        case hostDriver
    }

    /// What ran, touched on the main thread only (main-queue work and the loop's callbacks run there).
    nonisolated(unsafe) private static var seen: Set<String> = []
    nonisolated(unsafe) private static var isInModalRun = false
    nonisolated(unsafe) private static var ranDuringModalRun = false
    nonisolated(unsafe) private static var isInAddedCommonRun = false
    nonisolated(unsafe) private static var ranDuringAddedCommonRun = false
    nonisolated(unsafe) private static var isInNestedRun = false
    nonisolated(unsafe) private static var ranDuringNestedRun = false
    /// Whether the nested run slept through its 100 ms rather than polling a handle that stayed readable: on
    /// LoopKit, by its waits (a handful, where a spin makes hundreds); on Foundation, by the thread's CPU time.
    nonisolated(unsafe) private static var nestedRunSlept = false
    /// Whether a run nested in a main-queue block, asked to return after a source, returned for one with more
    /// main-queue work queued and nothing else ready: CF leaves the main queue out of such a run (its work could not
    /// run there anyway), so it does not.
    nonisolated(unsafe) private static var returningRunHandledASource: Bool?
    /// What a run nested in a main-queue block returned, of a common mode that holds nothing but the main queue: CF
    /// counts that mode empty (the main queue's work waits for the block), so the run returns at once, finished.
    nonisolated(unsafe) private static var onlyTheMainQueueRunResult: String?

    private static let expected: Set<String> = ["DispatchQueue.main.async", "Task { @MainActor in }",
                                                "MainActor.run", "modal run ended", "nested run ended",
                                                "returning run ended", "only-the-main-queue run ended",
                                                "added common run ended"]

    /// Runs the probe on the main thread. Returns the exit status.
    static func run(_ runner: Runner) -> Int32 {
        let foundation = runner == .foundation
        let driver = runner == .hostDriver ? try? LoopHostDriver(loop: Loop.main) : nil
        if runner == .hostDriver && driver == nil {
            Terminal.writeError("loop-demo: no host driver on this system\n")
            return 1
        }
        // Keeps the default mode from being empty where the main queue is not one of Loop.main's sources (a
        // libdispatch without the main-queue hooks): its runs then sleep their 500 ms instead of returning at once.
        let keepAlive = LoopTimer(interval: .seconds(3600)) { _ in }
        if !foundation {
            Loop.main.add(keepAlive, forMode: .default)
        }
        defer { keepAlive.invalidate() }
        DispatchQueue.main.async { Self.seen.insert("DispatchQueue.main.async") }
        Task { @MainActor in Self.seen.insert("Task { @MainActor in }") }
        Task.detached {
            await MainActor.run { Self.seen.insert("MainActor.run") }
        }
        if foundation {
            RunLoop.main.perform { Self.modalRunOnFoundation() }
            RunLoop.main.perform { Self.addedCommonModeRun(foundation: true) }
        } else {
            Loop.main.perform { Self.modalRunOnLoopKit() }
            Loop.main.perform { Self.addedCommonModeRun(foundation: false) }
        }
        DispatchQueue.main.async { Self.nestedRunInAMainQueueBlock(foundation: foundation) }
        DispatchQueue.main.async { Self.returningRunInAMainQueueBlock(foundation: foundation) }
        DispatchQueue.main.async { Self.runOfOnlyTheMainQueueInAMainQueueBlock(foundation: foundation) }
        let deadline = Date().addingTimeInterval(20)
        while !Self.expected.isSubset(of: Self.seen), Date() < deadline {
            if foundation {
                _ = RunLoop.main.run(mode: .default, before: Date().addingTimeInterval(0.5))
            } else if let driver {
                Self.hostLoopCycle(driver)
            } else {
                Loop.main.run(mode: .default, before: Loop.main.now + .milliseconds(500))
            }
        }
        for line in Self.expected.sorted() {
            print("\(line): \(Self.seen.contains(line) ? "ran" : "did not run")")
        }
        print("main-queue work during a run of a mode that is not common: "
            + (Self.ranDuringModalRun ? "ran" : "waited"))
        print("main-queue work during a run of a mode added to the common modes: "
            + (Self.ranDuringAddedCommonRun ? "ran" : "waited"))
        print("main-queue work during a run nested in a main-queue block: "
            + (Self.ranDuringNestedRun ? "ran" : "waited"))
        // Half of its 100 ms: asleep uses next to nothing; polling a handle that stays readable uses all of it.
        print("the nested run meanwhile: " + (Self.nestedRunSlept ? "slept" : "spun"))
        print("a run nested in a main-queue block, returning after a source: "
            + (Self.returningRunHandledASource.map { $0 ? "returned for the main queue" : "the main queue is none" }
                ?? "did not run"))
        print("a run nested in a main-queue block, of a mode holding only the main queue: "
            + (Self.onlyTheMainQueueRunResult ?? "did not run"))
        fflush(nil)  // every stream, before exit: a sanitizer's report at exit must not lose the output
        return Self.expected.isSubset(of: Self.seen) ? 0 : 1
    }

    /// One cycle of a host loop that owns the main thread: `poll(2)` on the driver's descriptor (at most 500 ms),
    /// then one pass.
    private static func hostLoopCycle(_ driver: LoopHostDriver) {
        let timeout = driver.prepare().map { min($0, .milliseconds(500)) } ?? .milliseconds(500)
        let milliseconds = Int32((timeout / .milliseconds(1)).rounded(.up))  // never early
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&watched, 1, milliseconds)
        driver.dispatch()
    }

    /// Runs a custom mode for 100 ms with main-queue work pending.
    private static func modalRunOnLoopKit() {
        DispatchQueue.main.async { Self.noteMainQueueWork() }
        let loop = Loop.main
        let timer = LoopTimer(interval: .milliseconds(100)) { _ in }
        loop.add(timer, forMode: "modal")
        Self.isInModalRun = true
        loop.run(mode: "modal", before: loop.now + .milliseconds(100))
        Self.isInModalRun = false
        timer.invalidate()
        Self.seen.insert("modal run ended")
    }

    /// Adds a mode to the common modes (a drag's, say) and runs it, with main-queue work pending, until that work has
    /// run and stopped it (5 s at most): the main queue is a source of every common mode, those added later included.
    private static func addedCommonModeRun(foundation: Bool) {
        DispatchQueue.main.async {
            Self.ranDuringAddedCommonRun = Self.isInAddedCommonRun
            if foundation {
                CFRunLoopStop(CFRunLoopGetMain())
            } else {
                Loop.main.stop()
            }
        }
        Self.isInAddedCommonRun = true
        if foundation {
            let name = "added-common"
            CFRunLoopAddCommonMode(CFRunLoopGetMain(),
                                   CFStringCreateWithCString(nil, name, CFStringBuiltInEncodings.UTF8.rawValue))
            let mode = RunLoop.Mode(name)
            let timer = Timer(timeInterval: 5, repeats: false) { _ in }  // keeps the mode from being empty
            RunLoop.main.add(timer, forMode: mode)
            _ = RunLoop.main.run(mode: mode, before: Date().addingTimeInterval(5))
            timer.invalidate()
        } else {
            let mode: LoopMode = "added-common"
            let loop = Loop.main
            loop.addCommonMode(mode)
            let timer = LoopTimer(interval: .seconds(5)) { _ in }
            loop.add(timer, forMode: mode)
            loop.run(mode: mode, before: loop.now + .seconds(5))
            timer.invalidate()
        }
        Self.isInAddedCommonRun = false
        Self.seen.insert("added common run ended")
    }

    private static func modalRunOnFoundation() {
        DispatchQueue.main.async { Self.noteMainQueueWork() }
        let modal = RunLoop.Mode("modal")
        let timer = Timer(timeInterval: 0.1, repeats: false) { _ in }
        RunLoop.main.add(timer, forMode: modal)
        Self.isInModalRun = true
        _ = RunLoop.main.run(mode: modal, before: Date().addingTimeInterval(0.1))
        Self.isInModalRun = false
        timer.invalidate()
        Self.seen.insert("modal run ended")
    }

    /// From a main-queue block, runs the default mode for 100 ms with more main-queue work queued behind the block:
    /// as in CF, a run nested in a main-queue block does not serve the main queue.
    private static func nestedRunInAMainQueueBlock(foundation: Bool) {
        DispatchQueue.main.async {
            if Self.isInNestedRun {
                Self.ranDuringNestedRun = true
            }
        }
        Self.isInNestedRun = true
        let cpuBefore = Self.threadCPUTime()
        let countersBefore = Loop.main.counters
        defer {
            Self.nestedRunSlept = foundation
                ? Self.threadCPUTime() - cpuBefore < 50_000_000  // half of the 100 ms
                : Loop.main.counters.since(countersBefore).waits < 20
        }
        if foundation {
            let timer = Timer(timeInterval: 0.1, repeats: false) { _ in }
            RunLoop.main.add(timer, forMode: .default)
            _ = RunLoop.main.run(mode: .default, before: Date().addingTimeInterval(0.1))
            timer.invalidate()
        } else {
            let loop = Loop.main
            let timer = LoopTimer(interval: .milliseconds(100)) { _ in }
            loop.add(timer, forMode: .default)
            loop.run(mode: .default, before: loop.now + .milliseconds(100))
            timer.invalidate()
        }
        Self.isInNestedRun = false
        Self.seen.insert("nested run ended")
    }

    /// From a main-queue block, with more main-queue work queued, runs the default mode for 50 ms, returning after a
    /// source: the main queue is no source of such a run (its work waits for the block), so it does not return for it.
    private static func returningRunInAMainQueueBlock(foundation: Bool) {
        DispatchQueue.main.async {}
        if foundation {
            let timer = Timer(timeInterval: 1, repeats: false) { _ in }  // keeps the mode from being empty
            RunLoop.main.add(timer, forMode: .default)
            let result = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, true)
            timer.invalidate()
            Self.returningRunHandledASource = result == .handledSource  // timedOut, or finished: CF sees no source
        } else {
            let loop = Loop.main
            let timer = LoopTimer(interval: .seconds(1)) { _ in }
            loop.add(timer, forMode: .default)
            let result = loop.run(mode: .default, before: loop.now + .milliseconds(50), returnAfterSourceHandled: true)
            Self.returningRunHandledASource = result == .handledSource
            timer.invalidate()
        }
        Self.seen.insert("returning run ended")
    }

    /// From a main-queue block, with more main-queue work queued, runs for 5 s a common mode that holds nothing but
    /// the main queue: an empty mode, as CF counts it, so the run returns at once.
    private static func runOfOnlyTheMainQueueInAMainQueueBlock(foundation: Bool) {
        DispatchQueue.main.async {}
        let start = ContinuousClock.now
        let result: String
        if foundation {
            let mode = CFStringCreateWithCString(nil, "only-the-main-queue", CFStringBuiltInEncodings.UTF8.rawValue)
            CFRunLoopAddCommonMode(CFRunLoopGetMain(), mode)
            result = switch CFRunLoopRunInMode(mode, 5, false) {
            case .finished: "finished"
            case .timedOut: "timed out"
            case .handledSource: "handled a source"
            case .stopped: "stopped"
            default: "returned something else"
            }
        } else {
            let mode: LoopMode = "only-the-main-queue"
            Loop.main.addCommonMode(mode)
            result = switch Loop.main.run(mode: mode, before: Loop.main.now + .seconds(5)) {
            case .finished: "finished"
            case .timedOut: "timed out"
            case .handledSource: "handled a source"
            case .stopped: "stopped"
            }
        }
        let waited = ContinuousClock.now - start >= .seconds(1)
        Self.onlyTheMainQueueRunResult = waited ? "\(result), after waiting" : result
        Self.seen.insert("only-the-main-queue run ended")
    }

    /// The calling thread's CPU time in nanoseconds (clock_gettime(2), CLOCK_THREAD_CPUTIME_ID).
    private static func threadCPUTime() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    private static func noteMainQueueWork() {
        if Self.isInModalRun {
            Self.ranDuringModalRun = true
        }
    }
}
