/// A touch sequence to play, each event at an offset from the start of the session.
struct TouchScript: Sendable {
    /// One scripted event.
    struct Step: Sendable {
        let offset: Duration
        let event: TouchEvent
    }

    let steps: [Step]

    /// A drag: touch-down at `start`, a move every `moveInterval`, touch-up at `end`, sliding from left to right.
    ///
    /// - Precondition: `start < end`, `moveInterval > 0`.
    static func drag(from start: Duration, to end: Duration,
                     moveInterval: Duration = .milliseconds(50)) -> TouchScript {
        precondition(start < end && moveInterval > .zero, "TouchScript.drag: need start < end and a positive interval")
        let y = 300
        var steps = [Step(offset: start, event: TouchEvent(phase: .down, x: 100, y: y))]
        var offset = start + moveInterval
        var x = 100
        while offset < end {
            x += 15
            steps.append(Step(offset: offset, event: TouchEvent(phase: .moved, x: x, y: y)))
            offset += moveInterval
        }
        steps.append(Step(offset: end, event: TouchEvent(phase: .up, x: x, y: y)))
        return TouchScript(steps: steps)
    }

    /// The demo's session: idle for the first 30 % of `duration`, a drag for the next 40 %, idle again.
    ///
    /// For 3 s: touch-down at 0.9 s, touch-up at 2.1 s.
    static func standard(duration: Duration) -> TouchScript {
        .drag(from: duration * 3 / 10, to: duration * 7 / 10)  // exact: no rounding of a Double factor
    }

    /// When the finger goes down first, if it does.
    var firstTouchDown: Duration? {
        self.steps.first { $0.event.phase == .down }?.offset
    }

    /// When the finger lifts last, if it does.
    var lastTouchUp: Duration? {
        self.steps.last { $0.event.phase == .up }?.offset
    }
}
