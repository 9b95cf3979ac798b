/// The end of `loop-demo tracking`: the table of fires per segment and the one-line verdict.
///
/// ```
///               before    drag      after
/// mode          default   tracking  default
/// seconds       0.90      1.20      0.90
/// refresh feed  8         0         9
/// clock         8         12        9
/// animation     54        72        54
///
/// Verdict: default-mode timer: 0 fires in the 1.2 s drag; common-mode timer: 12.
/// The display link drew 72 frames in the drag: in `common`, it keeps animating.
/// ```
struct TrackingReport {
    let summary: TrackingSummary
    let palette: Palette

    /// A column of the table: one segment, or several of the same name when there are many (interactive).
    private struct Column {
        var title: String
        var mode: String
        var seconds: Double
        var fires: [TrackingSession.Item: Int]
    }

    private static let columnWidth = 10

    /// The table, a blank line and the verdict.
    func text() -> String {
        let columns = self.columns()
        var lines: [String] = []
        lines.append(TextFormat.left("", Timeline.labelWidth)
            + columns.map { self.palette.paint(TextFormat.left($0.title, Self.columnWidth), .bold) }.joined())
        lines.append(TextFormat.left("mode", Timeline.labelWidth)
            + columns.map { TextFormat.left($0.mode, Self.columnWidth) }.joined())
        lines.append(TextFormat.left("seconds", Timeline.labelWidth)
            + columns.map { TextFormat.left(TextFormat.fixed($0.seconds, 2), Self.columnWidth) }.joined())
        for item in TrackingSession.Item.allCases {
            let cells = columns.map { column -> String in
                let count = column.fires[item, default: 0]
                let cell = TextFormat.left(String(count), Self.columnWidth)
                return item == .defaultTimer && column.mode == "tracking" && count == 0
                    ? self.palette.paint(cell, .red + .bold)
                    : cell
            }
            lines.append(self.palette.paint(TextFormat.left(item.label, Timeline.labelWidth), Timeline.style(of: item))
                + cells.joined())
        }
        let interrupted = self.summary.interruptingSignal.map {
            "\n" + self.palette.paint("Ended early by \(InterruptSignal.name(of: $0)) after "
                                      + "\(TextFormat.fixed(self.summary.seconds, 2)) s.", .yellow)
        } ?? ""
        return lines.map(Self.trimmed).joined(separator: "\n") + interrupted + "\n\n" + self.verdict() + "\n"
    }

    /// One line with the counts of the drag, then a line on what it means.
    func verdict() -> String {
        let summary = self.summary
        let title = self.palette.paint("Verdict:", .bold)
        guard !summary.drags.isEmpty else {
            return title + " no drag happened, so nothing to compare (with --interactive, press Enter to start one)."
        }
        let drags = summary.drags.count == 1
            ? "the \(TextFormat.fixed(summary.dragSeconds, 1)) s drag"
            : "\(summary.drags.count) drags (\(TextFormat.fixed(summary.dragSeconds, 1)) s)"
        let defaultFires = summary.dragFires(of: .defaultTimer)
        let facts = "default-mode timer: "
            + self.palette.paint("\(defaultFires) fires", defaultFires == 0 ? .red + .bold : .bold)
            + " in \(drags); common-mode timer: "
            + self.palette.paint("\(summary.dragFires(of: .commonTimer))", .green + .bold) + "."
        guard summary.hasATellingDrag else {
            return title + " " + facts + "\n"
                + "Too short to tell: the timers tick every \(TextFormat.fixed(TrackingSummary.telling, 1)) s. Hold a "
                + "drag longer than that to see the difference."
        }
        let link = "The display link drew "
            + self.palette.paint("\(summary.dragFires(of: .displayLink)) frames", .magenta + .bold)
            + " in the drag: in `common`, it keeps animating."
        guard summary.showsTheLesson else {
            return title + " " + facts + "\n" + link + "\n"
                + self.palette.paint("Unexpected: these counts break the run-loop rules; please report it.", .red)
        }
        let meaning = TextFormat.wrap("The loop ran `tracking` during the drag. The timer in `default` is not in that "
            + "mode, so it waited; items in `common` are in every common mode, `tracking` included. To keep a timer "
            + "firing while the user drags, add it to `.common`.", width: 80).joined(separator: "\n")
        return title + " " + facts + "\n" + link + "\n" + self.palette.paint(meaning, .dim)
    }

    private static func trimmed(_ line: String) -> String {
        var line = line
        while line.last == " " { line.removeLast() }
        return line
    }

    /// One column per segment; with more than six, one per kind of segment (before, drags, afters), summed.
    private func columns() -> [Column] {
        let segments = self.summary.segments
        let single = segments.map { Column(title: $0.name, mode: $0.mode.name, seconds: $0.seconds, fires: $0.fires) }
        guard single.count > 6 else { return single }
        var grouped: [Column] = []
        for name in ["before", "drag", "after"] {
            let group = segments.filter { $0.name == name }
            guard let first = group.first else { continue }
            var column = Column(title: group.count > 1 ? "\(name) ×\(group.count)" : name, mode: first.mode.name,
                                seconds: 0, fires: [:])
            for segment in group {
                column.seconds += segment.seconds
                column.fires.merge(segment.fires, uniquingKeysWith: +)
            }
            grouped.append(column)
        }
        return grouped
    }
}
