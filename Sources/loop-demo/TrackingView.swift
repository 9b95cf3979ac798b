import LoopKit

/// Draws a session's timeline: redrawn in place every column while the session runs when the output is a
/// terminal, else drawn once at the end. Loop-confined.
final class TrackingView {
    private let session: TrackingSession
    private let palette: Palette
    private let isLive: Bool
    private var timeline: Timeline?
    private var redraw: LoopTimer?
    private var drawnLines = 0
    private var status = ""

    init(session: TrackingSession, palette: Palette, isLive: Bool) {
        self.session = session
        self.palette = palette
        self.isLive = isLive
        session.onFire = { [unowned self] item, instant in self.timeline?.record(item, at: instant) }
        session.onTouch = { [unowned self] event in self.touched(event) }
        session.onStart = { [unowned self] start in self.started(at: start) }
    }

    private func started(at start: LoopInstant) {
        let timeline = if let duration = self.session.configuration.duration {
            Timeline(origin: start, duration: duration)
        } else {
            // Interactive: no end, so the picture scrolls, showing the last 3 s.
            Timeline(origin: start, tick: .milliseconds(50), width: 60, scrolls: true)
        }
        self.timeline = timeline
        guard self.isLive else { return }
        Terminal.hideCursor()
        self.draw()
        // In `common`, so that the picture keeps moving during the drag (in `default` it would freeze: the lesson).
        let redraw = LoopTimer(interval: timeline.tick, repeats: true, on: self.session.loop.assumeIsolated()) {
            [unowned self] _ in self.draw()
        }
        self.session.loop.add(redraw, forMode: .common)
        self.redraw = redraw
    }

    private func touched(_ event: TouchEvent) {
        guard let start = self.session.start else { return }
        let time = TextFormat.fixed(TextFormat.seconds(self.session.loop.now - start), 2) + " s  "
        switch event.phase {
        case .down: self.status = time + "touch down: the handler runs the loop in `tracking`"
        case .moved: self.status = time + "\(event) (read in `tracking`)"
        case .up: self.status = time + "touch up: the nested run stops, back in `default`"
        }
    }

    /// The last drawing, at the session's end.
    func finish() {
        self.redraw?.invalidate()
        self.status = "█ a fire   · none   ━ the loop runs `tracking`"
        self.draw()
    }

    private func draw() {
        guard let timeline = self.timeline else { return }
        let now = min(self.session.loop.now, self.session.deadline)
        var lines = timeline.lines(now: now, segments: self.session.segments, palette: self.palette)
        lines.append(self.palette.paint(self.status, .dim))
        var text = self.isLive ? Terminal.cursorUp(self.drawnLines) : ""
        for line in lines {
            text += line + (self.isLive ? Terminal.clearToEndOfLine : "") + "\n"
        }
        self.drawnLines = lines.count
        Terminal.write(text)
    }
}
