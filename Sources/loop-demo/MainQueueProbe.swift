import Dispatch
import Foundation
import LoopKit

/// `loop-demo main-queue [--foundation]`: shows that `DispatchQueue.main`, `Task { @MainActor in }` and
/// `MainActor.run` work on a main thread that runs `Loop.main` (or, with `--foundation`, Foundation's `RunLoop.main`),
/// and that main-queue work waits while the loop runs a mode that is not common. Prints one line per check and exits
/// 0 when all of them ran; the tests compare both loops' output.
enum MainQueueProbe {
    /// What ran, touched on the main thread only (main-queue work and the loop's callbacks run there).
    nonisolated(unsafe) private static var seen: Set<String> = []
    nonisolated(unsafe) private static var isInModalRun = false
    nonisolated(unsafe) private static var ranDuringModalRun = false

    private static let expected: Set<String> = ["DispatchQueue.main.async", "Task { @MainActor in }",
                                                "MainActor.run", "modal run ended"]

    /// Runs the probe on the main thread. Returns the exit status.
    static func run(foundation: Bool) -> Int32 {
        DispatchQueue.main.async { Self.seen.insert("DispatchQueue.main.async") }
        Task { @MainActor in Self.seen.insert("Task { @MainActor in }") }
        Task.detached {
            await MainActor.run { Self.seen.insert("MainActor.run") }
        }
        if foundation {
            RunLoop.main.perform { Self.modalRunOnFoundation() }
        } else {
            Loop.main.perform { Self.modalRunOnLoopKit() }
        }
        let deadline = Date().addingTimeInterval(20)
        while !Self.expected.isSubset(of: Self.seen), Date() < deadline {
            if foundation {
                _ = RunLoop.main.run(mode: .default, before: Date().addingTimeInterval(0.5))
            } else {
                Loop.main.run(mode: .default, before: Loop.main.now + .milliseconds(500))
            }
        }
        for line in Self.expected.sorted() {
            print("\(line): \(Self.seen.contains(line) ? "ran" : "did not run")")
        }
        print("main-queue work during a run of a mode that is not common: "
            + (Self.ranDuringModalRun ? "ran" : "waited"))
        return Self.expected.isSubset(of: Self.seen) ? 0 : 1
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

    private static func noteMainQueueWork() {
        if Self.isInModalRun {
            Self.ranDuringModalRun = true
        }
    }
}
