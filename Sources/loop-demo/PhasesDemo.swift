import LoopKit

/// `loop-demo phases`: runs a `PhasesTour` on the main loop and prints its record as an annotated table.
///
/// ```
///       ms  activity        what happened
///    0.000  entry           run(mode: .default) begins
///    0.004  beforeTimers    pass 1
///    0.006  beforeSources   then: blocks, signalled sources, blocks again
///    0.009    ▸ block       queued with perform before the run
///    0.012  beforeWaiting   no source was handled (blocks do not count): sleep
///                           until a descriptor is ready, a timer is due or the
///                           loop is woken
///   20.071  afterWaiting    slept 20.059 ms; woken because the timer is due
/// ```
///
/// Main thread only.
struct PhasesDemo {
    let options: DemoCommand.CommonOptions

    /// Runs the demo and returns the exit status: 0, or 128 + the signal's number after Ctrl-C (130) or SIGTERM.
    ///
    /// - Throws: `DemoError` when the pipe or the trace file cannot be set up.
    @available(*, noasync)
    func run() throws(DemoError) -> Int32 {
        let loop = Loop.current
        let palette = Palette.forOutput(Terminal.standardOutput, noColor: self.options.noColor)
        let trace = try DemoTrace.start(path: self.options.tracePath, loop: loop)
        let tour = PhasesTour(loop: loop)
        var endedBy: CInt?
        let interrupt = try InterruptSignal(loop: loop) { signal in
            endedBy = signal
            tour.stop(becauseOf: signal)
        }
        defer { interrupt.invalidate() }

        let events = try tour.run()
        let text = self.introduction(palette) + "\n\n" + self.table(events, result: tour.result, palette: palette)
        return DemoMain.finish(text, endedBy: endedBy, trace: trace, palette: palette)
    }

    private func introduction(_ palette: Palette) -> String {
        let title = "loop-demo phases"
        let paragraphs = [
            title + ": the anatomy of a pass, seen by an observer of every activity.",
            "A run: entry, passes, exit. One pass: beforeTimers, beforeSources, then blocks, signalled sources, "
                + "blocks again; if no source was handled (blocks do not count), beforeWaiting, the sleep, "
                + "afterWaiting; then due timers, "
                + "ready descriptor sources, and blocks again.",
            "On the main thread's loop: a timer, a signalled source and a descriptor source on a pipe (another "
                + "thread signals the one and writes into the other), and blocks queued with perform.",
        ]
        var text = paragraphs.map { TextFormat.wrap($0, width: 80).joined(separator: "\n") }.joined(separator: "\n\n")
        text.removeFirst(title.count)
        return palette.paint(title, .bold) + text
    }

    /// Where the "what happened" column starts, and how wide it is, for 80 columns.
    private static let indent = String(repeating: " ", count: 27)
    private static let detailWidth = 80 - 27

    /// The record as a table, with what each activity means and why each sleep ended.
    func table(_ events: [PhasesTour.Event], result: RunResult?, palette: Palette) -> String {
        var lines = [palette.paint(TextFormat.right("ms", 9) + "  " + TextFormat.left("activity", 16) + "what happened",
                                   .bold)]
        var pass = 0
        var sleptAt: Duration?
        var passSlept = false
        var saidSources = false
        for (index, event) in events.enumerated() {
            let time = TextFormat.right(TextFormat.fixed(TextFormat.milliseconds(event.time), 3), 9) + "  "
            switch event.kind {
            case .handled(let item, let detail):
                let wrapped = TextFormat.wrap(detail, width: Self.detailWidth)
                lines.append(time + palette.paint(TextFormat.left("  ▸ " + item, 16), .yellow) + wrapped[0])
                lines += wrapped.dropFirst().map { Self.indent + $0 }
            case .activity(let activity):
                var note = ""
                switch activity {
                case .entry:
                    note = "run(mode: .default) begins"
                case .beforeTimers:
                    if pass > 0 && !passSlept {
                        let note = "(pass \(pass) handled a source, so it did not sleep)"
                        lines.append(Self.indent + palette.paint(note, .dim))
                    }
                    pass += 1
                    passSlept = false
                    note = "pass \(pass)"
                case .beforeSources:
                    note = saidSources ? "" : "then: blocks, signalled sources, blocks again"
                    saidSources = true
                case .beforeWaiting:
                    sleptAt = event.time
                    passSlept = true
                    note = "no source was handled (blocks do not count): sleep until a descriptor is ready, a timer "
                        + "is due or the loop is woken"
                case .afterWaiting:
                    let slept = sleptAt.map { TextFormat.fixed(TextFormat.milliseconds(event.time - $0), 3) } ?? "?"
                    note = "slept \(slept) ms; " + Self.wakeReason(after: index, in: events)
                case .exit:
                    note = "run returns .\(result.map { "\($0)" } ?? "?")"
                default:
                    note = ""
                }
                let wrapped = TextFormat.wrap(note, width: Self.detailWidth)
                lines.append(time + palette.paint(TextFormat.left("\(activity)", 16), .cyan) + wrapped[0])
                lines += wrapped.dropFirst().map { Self.indent + palette.paint($0, .dim) }
            }
        }
        return lines.map { line in
            var line = line
            while line.last == " " { line.removeLast() }
            return line
        }.joined(separator: "\n")
    }

    /// Why the sleep that ended at `events[index]` ended, judged by what the loop handled next.
    private static func wakeReason(after index: Int, in events: [PhasesTour.Event]) -> String {
        var passes = 0
        for event in events[(index + 1)...] {
            switch event.kind {
            case .handled(item: "timer", _): return "woken because the timer is due"
            case .handled(item: "descriptor", _): return "woken because the pipe is readable"
            case .handled(item: "source", _) where passes == 1:
                return "woken by signal() from another thread; the source runs in the next pass"
            case .handled(item: "signal", _): return "woken by the signal that ends the demo"
            case .activity(.beforeTimers): passes += 1
            case .activity(.exit): return "woken because the run's time limit passed"
            case .activity(.beforeWaiting): return "woken with nothing to do"
            default: continue
            }
        }
        return "woken"
    }
}
