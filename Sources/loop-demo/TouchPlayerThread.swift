import Dispatch
import Foundation
import LoopKit
import Synchronization

/// The input thread: plays a touch script into a pipe in real time, then closes the pipe.
///
/// It reads time from the loop's clock, so that "0.9 s" means 0.9 s after the session's time zero. It sleeps in
/// short steps so that `stopAndWait()` (Ctrl-C, or `q` before the script ends) is prompt.
final class TouchPlayerThread: Sendable {
    private let isStopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    private init() {}

    /// Starts a thread named "touch-input" playing `script` into `pipe` from `start` on `loop`'s clock.
    static func start(script: TouchScript, pipe: DemoPipe, loop: Loop, start: LoopInstant) -> TouchPlayerThread {
        let player = TouchPlayerThread()
        let thread = Thread {
            player.play(script, into: pipe, clock: loop, from: start)
            pipe.closeWriteEnd()
            player.finished.signal()
        }
        thread.name = "touch-input"
        thread.start()
        return player
    }

    /// Asks the thread to stop and waits until it has (at most one sleep step). Any thread but the player's.
    func stopAndWait() {
        self.isStopping.store(true, ordering: .releasing)
        self.finished.wait()
    }

    private func play(_ script: TouchScript, into pipe: DemoPipe, clock loop: Loop, from start: LoopInstant) {
        for step in script.steps {
            let due = start + step.offset
            while !self.isStopping.load(ordering: .acquiring) {
                let remaining = due - loop.now
                guard remaining > .zero else { break }
                Thread.sleep(forTimeInterval: min(TextFormat.seconds(remaining), 0.02))
            }
            guard !self.isStopping.load(ordering: .acquiring) else { return }
            pipe.write(step.event.record)
        }
    }
}
