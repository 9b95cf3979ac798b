import Foundation
// Foundation's block Timer, added to a mode, run and invalidated, then let go: LeakSanitizer reports the Timer and
// its CFRunLoopTimer, which keep each other alive.
func runModal() {
    let mode = RunLoop.Mode("modal")
    let timer = Timer(timeInterval: 0.01, repeats: false) { _ in }
    RunLoop.main.add(timer, forMode: mode)
    _ = RunLoop.main.run(mode: mode, before: Date().addingTimeInterval(0.05))
    timer.invalidate()
}
runModal()
