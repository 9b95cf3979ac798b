/// The counts of a finished tracking session, and the facts its verdict states.
struct TrackingSummary: Equatable, Sendable {
    let segments: [TrackingSegment]
    let fps: Int
    /// Whether Ctrl-C ended the session.
    let interrupted: Bool

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

    /// Whether the session shows the lesson: at least one drag, no default-mode fire in any drag, and the common
    /// timer and the display link firing in every segment long enough for them (a tenth of a second).
    var showsTheLesson: Bool {
        guard !self.drags.isEmpty, self.dragFires(of: .defaultTimer) == 0 else { return false }
        return self.segments.allSatisfy { segment in
            segment.seconds < 0.1
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
