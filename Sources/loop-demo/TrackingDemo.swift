import Foundation
import LoopKit

/// `loop-demo tracking`: runs a `TrackingSession` on the main loop and shows it: a live timeline on a terminal, then
/// the summary table and the verdict (or only the JSON summary with `--json`).
///
/// Main thread only (it runs `Loop.main`).
struct TrackingDemo {
    let options: DemoCommand.TrackingOptions

    /// The scripted session's length when `--duration` is not given.
    static let defaultDuration: Duration = .seconds(3)

    /// Runs the demo and returns the exit status: 0, or 130 after Ctrl-C.
    ///
    /// - Throws: `DemoError` when the input pipe or the trace file cannot be set up.
    @available(*, noasync)
    func run() throws(DemoError) -> Int32 {
        let loop = Loop.current
        let palette = self.options.json
            ? Palette(isEnabled: false)
            : Palette.forOutput(Terminal.standardOutput, noColor: self.options.common.noColor)
        let duration = self.options.interactive ? self.options.duration : self.options.duration ?? Self.defaultDuration
        let input: any TouchInput = if self.options.interactive {
            KeyboardTouchInput(descriptor: Terminal.standardInput)
        } else {
            ScriptedTouchInput(script: .standard(duration: duration ?? Self.defaultDuration))
        }
        let configuration = TrackingSession.Configuration(fps: self.options.fps, duration: duration)
        let session = TrackingSession(loop: loop, configuration: configuration, input: input)

        let trace = try DemoTrace.start(path: self.options.common.tracePath, loop: loop)
        // SIGHUP and SIGQUIT (Ctrl-\) too: the live view hides the cursor, which only the normal end shows again.
        let interrupt = try InterruptSignal(loop: loop, signals: [SIGINT, SIGTERM, SIGQUIT, SIGHUP]) {
            session.quit(interruptedBy: $0)
        }
        defer {
            interrupt.invalidate()
            Terminal.restore()
        }

        var view: TrackingView?
        if !self.options.json {
            Terminal.write(self.introduction(configuration, palette: palette) + "\n\n")
            let isLive = Terminal.isTerminal(Terminal.standardOutput)
            view = TrackingView(session: session, palette: palette, isLive: isLive)
        }
        let summary = try session.run()
        view?.finish()

        let traceNote = trace?.finish()
        if self.options.json {
            Terminal.write(summary.json())
            if let traceNote { Terminal.writeError(traceNote + "\n") }
        } else {
            var report = "\n" + TrackingReport(summary: summary, palette: palette).text()
            if let traceNote { report += "\n" + palette.paint(traceNote, .dim) + "\n" }
            Terminal.write(report)
        }
        return DemoMain.status(endedBy: summary.interruptingSignal, traceFailed: trace != nil && traceNote == nil)
    }

    private func introduction(_ configuration: TrackingSession.Configuration, palette: Palette) -> String {
        let interval = "every \(Int(TextFormat.milliseconds(configuration.timerInterval))) ms"
        let items = [
            (TrackingSession.Item.defaultTimer, "a timer in `default`, \(interval)"),
            (.commonTimer, "a timer in `common`, \(interval)"),
            (.displayLink, "a display link in `common`, \(configuration.fps) Hz"),
        ].map { item, text in
            "  " + palette.paint(TextFormat.left(item.label, 14), Timeline.style(of: item)) + text
        }
        let story: String
        if self.options.interactive {
            story = "you drive: Enter starts a drag, Enter ends it, q quits. During a drag, the key handler runs "
                + "the loop in `tracking`."
        } else {
            let duration = configuration.duration ?? Self.defaultDuration
            let script = TouchScript.standard(duration: duration)
            let down = TextFormat.compact(TextFormat.seconds(script.firstTouchDown ?? .zero))
            let up = TextFormat.compact(TextFormat.seconds(script.lastTouchUp ?? .zero))
            story = "\(TextFormat.compact(TextFormat.seconds(duration))) s on the main thread's loop. An input thread "
                + "drags from \(down) s to \(up) s; its touch-down handler runs the loop in `tracking` until touch-up."
        }
        let title = "loop-demo tracking"
        var lines = TextFormat.wrap(title + ": " + story, width: 80)
        lines[0] = palette.paint(title, .bold) + lines[0].dropFirst(title.count)
        return (lines + items).joined(separator: "\n")
    }
}
