/// The counts of a finished tracking session, and the facts its verdict states.
struct TrackingSummary: Equatable, Sendable {
    let segments: [TrackingSegment]
    let fps: Int
    /// The signal that ended the session early (Ctrl-C's SIGINT, SIGTERM), if one did.
    let interruptingSignal: CInt?

    /// Whether a signal ended the session early.
    var interrupted: Bool { self.interruptingSignal != nil }

    /// The whole session's length in seconds.
    var seconds: Double {
        self.segments.reduce(0) { $0 + $1.seconds }
    }

    /// The drag segments.
    var drags: [TrackingSegment] {
        self.segments.filter { $0.name == "drag" }
    }

    /// How long the loop ran `tracking`, in seconds.
    var dragSeconds: Double {
        self.drags.reduce(0) { $0 + $1.seconds }
    }

    /// Fires of `item` during drags.
    func dragFires(of item: TrackingSession.Item) -> Int {
        self.drags.reduce(0) { $0 + $1.fires(of: item) }
    }

    /// How long a segment must last for the timers to show in it: their interval, a tenth of a second.
    static let telling = 0.1

    /// Whether some drag lasted long enough for the timers to show what the mode does (`telling`). A shorter one
    /// (Enter pressed twice at once) proves nothing either way.
    var hasATellingDrag: Bool {
        self.drags.contains { $0.seconds >= Self.telling }
    }

    /// Whether the session shows the lesson: a drag long enough to tell, no default-mode fire in any drag, and the
    /// common timer and the display link firing in every segment long enough for them.
    var showsTheLesson: Bool {
        guard self.hasATellingDrag, self.dragFires(of: .defaultTimer) == 0 else { return false }
        return self.segments.allSatisfy { segment in
            segment.seconds < Self.telling
                || (segment.fires(of: .commonTimer) > 0 && segment.fires(of: .displayLink) > 0)
        }
    }

    /// The summary as JSON: `{"segments":[{"name","mode","seconds","fires":{...}}], "fps", "seconds",
    /// "interrupted"}`, one segment per line.
    func json() -> String {
        let segments = self.segments.map { segment in
            let fires = TrackingSession.Item.allCases
                .map { "\"\($0.jsonKey)\": \(segment.fires(of: $0))" }
                .joined(separator: ", ")
            return "    {\"name\": \"\(segment.name)\", \"mode\": \"\(segment.mode.name)\", "
                + "\"seconds\": \(TextFormat.fixed(segment.seconds, 3)), \"fires\": {\(fires)}}"
        }
        return "{\n  \"segments\": [\n" + segments.joined(separator: ",\n") + "\n  ],\n"
            + "  \"fps\": \(self.fps),\n"
            + "  \"seconds\": \(TextFormat.fixed(self.seconds, 3)),\n"
            + "  \"interrupted\": \(self.interrupted)\n}\n"
    }
}
