import LoopKit

/// First version of the demo: a default-mode timer stops while the loop runs `tracking` (a drag); a common-mode
/// timer keeps firing.
final class TrackingDemo {
    let loop = Loop.current
    let start: LoopInstant
    var counts: [String: [String: Int]] = [:]
    var segment = "before"

    init() {
        self.start = self.loop.now
    }

    func stamp() -> String {
        let elapsed = (self.loop.now - self.start).components
        let millis = elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
        return String(repeating: " ", count: max(0, 5 - String(millis).count)) + "\(millis) ms"
    }

    func note(_ name: String) {
        self.counts[self.segment, default: [:]][name, default: 0] += 1
        print("\(self.stamp())  [\(self.loop.currentMode?.name ?? "-")]  \(name)")
    }

    func run() {
        let loop = self.loop
        loop.add(LoopTimer(interval: .milliseconds(100), repeats: true) { _ in self.note("default-mode timer") },
                 forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(100), repeats: true) { _ in self.note("common-mode timer") },
                 forMode: .common)
        loop.add(LoopTimer(interval: .milliseconds(450)) { _ in
            print("\(self.stamp())  touch down: the loop runs in tracking until touch up")
            self.segment = "drag"
            loop.add(LoopTimer(interval: .milliseconds(1000)) { _ in loop.stop() }, forMode: .tracking)
            loop.run(mode: .tracking, before: .distantFuture)
            self.segment = "after"
            print("\(self.stamp())  touch up: back in default")
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(2000)) { _ in loop.stop() }, forMode: .default)
        loop.run()

        print("")
        for name in ["before", "drag", "after"] {
            let fires = self.counts[name, default: [:]]
            print("\(name):\t default-mode timer \(fires["default-mode timer", default: 0]),"
                  + " common-mode timer \(fires["common-mode timer", default: 0])")
        }
        print("\nDuring the drag the default-mode timer fired \(self.counts["drag"]?["default-mode timer"] ?? 0) times;"
              + " the common-mode timer \(self.counts["drag"]?["common-mode timer"] ?? 0).")
    }
}

TrackingDemo().run()
