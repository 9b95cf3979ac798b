import LoopKit

/// The live picture of a tracking session: one row per item, one column per tick of time, the drag marked.
///
/// ```
///               0s        0.5s      1s        1.5s      2s        2.5s      3s
/// mode          ──────────────────━━tracking━━━━━━━━━━━━━━━─────────────────
/// refresh feed  ··█·█·█·█·█·█·█·█·························█·█·█·█·█·█·█·█·█·   18
/// clock         ··█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·█·   29
/// animation     ████████████████████████████████████████████████████████████  180
/// ```
///
/// A column shows a full block when the item fired in it. While the session runs, the mode row's label names the
/// mode the loop is in. A session without a duration (interactive) scrolls: the
/// last `width` columns are shown. Counting is incremental (`record`), so drawing stays cheap however long it runs.
/// Loop-confined, like the session it draws.
final class Timeline {
    /// Time zero: the left edge of column 0.
    let origin: LoopInstant
    /// The time one column stands for.
    let tick: Duration
    /// How many columns are shown.
    let width: Int
    /// Whether the picture scrolls once time passes the last column (a session without a duration).
    let scrolls: Bool

    /// Fires per item per column, from column 0; grows as time passes.
    private var fires: [TrackingSession.Item: [Int]] = [:]
    private var totals: [TrackingSession.Item: Int] = [:]

    /// Width of the label column.
    static let labelWidth = 14

    init(origin: LoopInstant, tick: Duration, width: Int, scrolls: Bool) {
        precondition(tick > .zero && width > 0, "Timeline: need a positive tick and width")
        self.origin = origin
        self.tick = tick
        self.width = width
        self.scrolls = scrolls
    }

    /// A timeline of `width` columns spanning `duration`, not scrolling.
    convenience init(origin: LoopInstant, duration: Duration, width: Int = 60) {
        self.init(origin: origin, tick: duration / width, width: width, scrolls: false)
    }

    /// Counts a fire of `item` at `instant`.
    func record(_ item: TrackingSession.Item, at instant: LoopInstant) {
        let column = self.column(of: instant)
        var row = self.fires[item, default: []]
        if row.count <= column {
            row += repeatElement(0, count: column + 1 - row.count)
        }
        row[column] += 1
        self.fires[item] = row
        self.totals[item, default: 0] += 1
    }

    /// The column holding `instant`.
    func column(of instant: LoopInstant) -> Int {
        guard instant > self.origin else { return 0 }
        return Int((instant - self.origin) / self.tick)
    }

    /// The picture at `now`: a ruler, the mode row and one row per item (always the same number of lines, so that a
    /// live view can redraw in place).
    func lines(now: LoopInstant, segments: [TrackingSegment], palette: Palette) -> [String] {
        let current = self.scrolls ? self.column(of: now) : min(self.column(of: now), self.width - 1)
        let first = max(0, current - self.width + 1)
        let columns = first..<(first + self.width)
        let drags = segments.filter { $0.mode == .tracking }.map { ($0.start, $0.end) }
        // The columns a drag covers from their start for at least half their time (the one under way reaching to now
        // and on): the column where it began holds the default-mode timer's last fire before it, and one it only
        // touches at its end (the touch-up read a little after the column began) the first fire after it, neither of
        // which may show under the bar; a drag of about a column still shows.
        let inDrag = columns.map { column -> Bool in
            let start = self.origin + self.tick * column
            let end = start + self.tick
            return column <= current && drags.contains { dragStart, dragEnd in
                dragStart <= start && (min(dragEnd ?? end, end) - start) * 2 >= self.tick
            }
        }

        var lines = [self.ruler(columns)]
        var mode = ""
        var offset = 0
        while offset < self.width {
            guard columns.lowerBound + offset <= current else {
                mode += " "
                offset += 1
                continue
            }
            guard inDrag[offset] else {
                var length = 0
                while offset + length < self.width && !inDrag[offset + length]
                    && columns.lowerBound + offset + length <= current { length += 1 }
                mode += palette.paint(String(repeating: "─", count: length), .dim)
                offset += length
                continue
            }
            // A drag stretch: bars, with "tracking" written in when it fits.
            var length = 0
            while offset + length < self.width && inDrag[offset + length] { length += 1 }
            var stretch = Array(repeating: "━", count: length)
            if length >= 12 {
                stretch.replaceSubrange(2..<10, with: "tracking".map(String.init))
            }
            mode += palette.paint(stretch.joined(), .yellow + .bold)
            offset += length
        }
        // While the session runs, the label says the mode the loop is in now.
        let label = segments.last.map { $0.end == nil ? "mode " + $0.mode.name : "mode" } ?? "mode"
        lines.append(TextFormat.left(label, Timeline.labelWidth) + mode)

        for item in TrackingSession.Item.allCases {
            let row = self.fires[item, default: []]
            var cells: [(String, Palette.Style?)] = []
            for (offset, column) in columns.enumerated() {
                if column > current {
                    cells.append((" ", nil))
                } else if column < row.count && row[column] > 0 {
                    cells.append(("█", Timeline.style(of: item)))
                } else {
                    cells.append(("·", inDrag[offset] ? .yellow : .dim))
                }
            }
            let total = TextFormat.right(String(self.totals[item, default: 0]), 5)
            lines.append(TextFormat.left(item.label, Timeline.labelWidth) + palette.paintRuns(cells) + total)
        }
        return lines
    }

    /// The colour of an item's fires.
    static func style(of item: TrackingSession.Item) -> Palette.Style {
        switch item {
        case .defaultTimer: .cyan
        case .commonTimer: .green
        case .displayLink: .magenta
        }
    }

    /// Time labels over the columns, on a round step at least 8 columns wide.
    private func ruler(_ columns: Range<Int>) -> String {
        let steps: [Duration] = [.milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2),
                                 .seconds(5), .seconds(10), .seconds(30), .seconds(60)]
        let tick = TextFormat.nanoseconds(self.tick)
        let step = TextFormat.nanoseconds(steps.first { $0 / self.tick >= 8 } ?? .seconds(300))
        var characters = [Character](repeating: " ", count: self.width + 6)
        var next = 0
        // One column past the end too: its left edge is the end of the picture ("3s").
        for (offset, column) in (columns.lowerBound...columns.upperBound).enumerated() where offset >= next {
            // Label the column whose span holds a multiple of the step.
            let start = Int64(column) * tick
            let multiple = (start + step - 1) / step
            guard multiple * step < start + tick else { continue }
            let label = Array(TextFormat.secondsLabel(.nanoseconds(multiple * step)))
            guard offset + label.count <= characters.count else { break }
            characters.replaceSubrange(offset..<(offset + label.count), with: label)
            next = offset + label.count + 1
        }
        var ruler = String(repeating: " ", count: Timeline.labelWidth) + String(characters)
        while ruler.last == " " { ruler.removeLast() }
        return ruler
    }
}
