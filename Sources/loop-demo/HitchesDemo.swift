import LoopKit

/// `loop-demo hitches`: runs a `HitchesSession` on the main loop, printing a bar per second as each one ends, then
/// the totals with their rating.
///
/// ```
/// second   frames  skipped  hitches  hitch time   ms/s
/// 0-1 s       119        1        1      3.2 ms    3.2 ███▏              good
/// 1-2 s       118        2        2      6.5 ms    6.5 ██████▌           warning
/// 2-3 s       118        2        1     15.2 ms   15.2 ███████████████▏  critical
/// ```
///
/// Main thread only.
struct HitchesDemo {
    let options: DemoCommand.HitchesOptions

    /// One character of bar per ms/s; longer bars are cut and end in an arrow.
    static let barWidth = 16

    /// Runs the demo and returns the exit status: 0, or 128 + the signal's number after Ctrl-C (130) or SIGTERM.
    ///
    /// - Throws: `DemoError` when the trace file cannot be written.
    @available(*, noasync)
    func run() throws(DemoError) -> Int32 {
        let loop = Loop.current
        let palette = Palette.forOutput(Terminal.standardOutput, noColor: self.options.common.noColor)
        let trace = try DemoTrace.start(path: self.options.common.tracePath, loop: loop)
        let session = HitchesSession(loop: loop, configuration: .init(duration: self.options.duration))
        var endedBy: CInt?
        let interrupt = try InterruptSignal(loop: loop) { signal in
            endedBy = signal
            session.stop()
        }
        defer { interrupt.invalidate() }

        let introduction = self.introduction(session.configuration, palette: palette)
        Terminal.write(introduction + "\n\n" + Self.header(palette) + "\n")
        session.onSecond = { second in Terminal.write(Self.row(second, palette: palette) + "\n") }
        let total = session.run()

        return DemoMain.finish("\n" + Self.totals(total, palette: palette), endedBy: endedBy, trace: trace,
                               palette: palette)
    }

    private func introduction(_ configuration: HitchesSession.Configuration, palette: Palette) -> String {
        let budget = TextFormat.fixed(1000 / Double(configuration.rate), 2)
        // Only the heavy frames a run this long reaches (a 1 s run has only the first).
        let heavy = configuration.heavyFrames.filter { $0.offset < configuration.duration }.map {
            TextFormat.compact(TextFormat.milliseconds($0.work)) + " ms at "
                + TextFormat.compact(TextFormat.seconds($0.offset)) + " s"
        }
        let seconds = { (duration: Duration) in TextFormat.compact(TextFormat.seconds(duration)) + " s" }
        let work = "Its work is \(TextFormat.compact(TextFormat.milliseconds(configuration.lightWork))) ms"
        let heavyText = heavy.isEmpty ? work + ". "
            : work + ", except heavy frames: " + heavy.joined(separator: ", ")
                + (configuration.duration > configuration.cycle ? " (every \(seconds(configuration.cycle)))" : "")
                + ". "
        let text = "A \(configuration.rate) Hz display link runs on the main thread's loop for "
            + "\(seconds(configuration.duration)); a frame lasts \(budget) ms. " + heavyText
            + "A hitch is a frame whose work ends after its target (the next frame's time); its hitch time is how "
            + "late. The ratio is ms of hitch per second: good below 5, warning 5 to 10, critical above 10."
        return palette.paint("loop-demo hitches", .bold) + ": frames that miss their deadline.\n\n"
            + TextFormat.wrap(text, width: 80).joined(separator: "\n")
    }

    static func header(_ palette: Palette) -> String {
        palette.paint("second   frames  skipped  hitches  hitch time   ms/s", .bold)
    }

    /// One second as a table row with a bar of its hitch time ratio, coloured by its rating.
    static func row(_ second: HitchesSession.Second, palette: Palette) -> String {
        let report = second.report
        let ratio = report.hitchTimeRatio
        let cells = TextFormat.left("\(second.index)-\(TextFormat.compact(TextFormat.seconds(second.end))) s", 7)
            + TextFormat.right(String(report.frames), 8)
            + TextFormat.right(String(report.skippedFrames), 9)
            + TextFormat.right(String(report.hitches), 9)
            + TextFormat.right(TextFormat.fixed(TextFormat.milliseconds(report.totalHitchTime), 1) + " ms", 12)
            + TextFormat.right(TextFormat.fixed(ratio, 1), 7) + " "
        let bar = TextFormat.left(self.bar(ratio), self.barWidth + 1)
        return cells + palette.paint(bar, self.style(report.rating)) + " " + palette.paint("\(report.rating)",
                                                                                           self.style(report.rating))
    }

    /// A bar of `value` characters, in eighths; cut at `barWidth` with an arrow.
    static func bar(_ value: Double) -> String {
        guard value > 0 else { return "" }
        if value > Double(self.barWidth) {
            return String(repeating: "█", count: self.barWidth) + "▶"
        }
        let eighths = Int((value * 8).rounded())
        let partial = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"][eighths % 8]
        let bar = String(repeating: "█", count: eighths / 8) + partial
        return bar.isEmpty ? "▏" : bar
    }

    static func totals(_ total: HitchReport, palette: Palette) -> String {
        let ratio = TextFormat.fixed(total.hitchTimeRatio, 1)
        let seconds = TextFormat.fixed(TextFormat.seconds(total.frameSpan), 2)
        let rating = palette.paint("\(total.rating)", self.style(total.rating) + .bold)
        return palette.paint("Total:", .bold) + " \(total.frames) frames, \(total.skippedFrames) skipped, "
            + "\(total.hitches) \(total.hitches == 1 ? "hitch" : "hitches"), "
            + "\(TextFormat.fixed(TextFormat.milliseconds(total.totalHitchTime), 1)) ms of hitch in \(seconds) s.\n"
            + palette.paint("Hitch time ratio:", .bold) + " \(ratio) ms/s, " + rating + ".\n"
            + palette.paint(TextFormat.wrap("Longest busy pass "
                + "\(TextFormat.fixed(TextFormat.milliseconds(total.longestBusyPass), 1)) ms, \(total.hangs) hangs "
                + "(busy > 250 ms). A skipped frame is never replayed: the link moves on to the next frame after now.",
                width: 80).joined(separator: "\n"), .dim)
    }

    static func style(_ rating: HitchRating) -> Palette.Style {
        switch rating {
        case .good: .green
        case .warning: .yellow
        case .critical: .red
        }
    }
}
