/// The unit of a scenario's samples.
enum MeasureUnit: String, Sendable {
    case microseconds = "us"
    case nanosecondsPerOperation = "ns/op"
    case blocksPerSecond = "blocks/s"
    /// Millions of bytes per second.
    case megabytesPerSecond = "MB/s"
    /// Reports of named figures only (no distribution).
    case figures = "figures"

    /// How the unit is spelled in table headers.
    var label: String {
        switch self {
        case .microseconds: "µs"
        case .nanosecondsPerOperation: "ns/op"
        case .blocksPerSecond: "blocks/s"
        case .megabytesPerSecond: "MB/s"
        case .figures: ""
        }
    }
}

/// A named number beside the distribution: missed slots, CPU time, system calls per wake-up.
struct Figure: Sendable {
    let name: String
    let value: Double
}

/// One implementation's result in one scenario.
struct ImplementationResult: Sendable {
    let implementation: String
    /// The samples; `nil` for a report of figures only.
    let distribution: Distribution?
    var figures: [Figure] = []
    /// Why the implementation was not measured although its scenario ran (a program missing, a server that failed);
    /// its row then shows "not run" (or "failed"), and its targets NOT RUN.
    var notRunReason: String?
    /// Whether the implementation started and then failed (a server that stopped or misbehaved), rather than could
    /// not be run here at all (a program not built, a descriptor limit). LoopKit's own failure fails its targets.
    var failed = false

    /// The figure named `name`, if any.
    func figure(_ name: String) -> Double? {
        self.figures.first { $0.name == name }?.value
    }
}

/// One table of the output: a scenario (or one part of it, such as `timer/1ms`) and every implementation measured.
struct ScenarioReport: Sendable {
    /// The name in the JSON output, such as "wakeup" or "timer/8.333ms".
    let name: String
    let title: String
    let unit: MeasureUnit
    /// Throughput: more is better. Everything else: less is better.
    var higherIsBetter = false
    var results: [ImplementationResult] = []
    /// The implementation the "vs floor" column divides by.
    var floor: String?
    /// The implementation the "vs Foundation" column divides by.
    var foundation: String?
    /// Lines printed under the table: how it was measured, and what could not be.
    var notes: [String] = []
    /// Whether the SVG output draws this report's distributions as CDFs (latency scenarios).
    var plotsCDF = false

    init(name: String, title: String, unit: MeasureUnit) {
        self.name = name
        self.title = title
        self.unit = unit
    }

    /// The result of `implementation`, if it was measured.
    func result(_ implementation: String) -> ImplementationResult? {
        self.results.first { $0.implementation == implementation }
    }

    /// The implementation's p50 divided by the reference's p50 (for throughput: the rate divided by the rate).
    func ratio(of implementation: String, to reference: String?) -> Double? {
        guard let reference, reference != implementation,
              let value = self.result(implementation)?.distribution?.p50,
              let base = self.result(reference)?.distribution?.p50, base > 0 else { return nil }
        return value / base
    }
}

/// Formats numbers for the tables: three significant figures or so, without exponent.
enum Format {
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "-" }
        let magnitude = abs(value)
        if magnitude >= 10_000_000 { return fixed(value / 1_000_000, digits: 1) + "M" }
        if magnitude >= 1_000_000 { return fixed(value / 1_000_000, digits: 2) + "M" }
        // Thresholds just under 100, 10 and 1, so that 99.97 prints as "100", not "100.0".
        if magnitude >= 99.95 || value == value.rounded() { return fixed(value, digits: 0) }
        if magnitude >= 9.995 { return fixed(value, digits: 1) }
        if magnitude >= 0.9995 { return fixed(value, digits: 2) }
        return fixed(value, digits: 3)
    }

    /// A whole number with its thousands grouped: "10,000".
    static func grouped(_ value: Int) -> String {
        let digits = Array(String(value.magnitude))
        let groups = stride(from: digits.count, to: 0, by: -3).reversed().map { end in
            String(digits[max(0, end - 3)..<end])
        }
        return (value < 0 ? "-" : "") + groups.joined(separator: ",")
    }

    static func ratio(_ value: Double?) -> String {
        guard let value, value.isFinite else { return "-" }
        return fixed(value, digits: value >= 100 ? 0 : 2) + "×"
    }

    /// `value` with `digits` decimals, rounded half away from zero.
    static func fixed(_ value: Double, digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = Int(scaled / scale)
        let sign = value < 0 && scaled > 0 ? "-" : ""
        guard digits > 0 else { return sign + String(whole) }
        let fraction = Int(scaled - Double(whole) * scale)
        let fractionText = String(fraction)
        return sign + String(whole) + "." + String(repeating: "0", count: digits - fractionText.count) + fractionText
    }
}

/// Prints reports as aligned text tables (also valid Markdown tables, for RESULTS.md).
enum TablePrinter {
    static func render(_ report: ScenarioReport) -> String {
        var header: [String] = ["implementation"]
        var rows: [[String]] = []
        let figureNames = orderedFigureNames(report)
        if report.unit != .figures {
            let unit = report.unit.label
            header += ["samples", "min \(unit)", "p50", "p90", "p99", "p99.9", "max"]
            if report.floor != nil { header.append("p50 vs floor") }
            if report.foundation != nil { header.append("p50 vs Foundation") }
        }
        header += figureNames
        for result in report.results {
            var row = [result.implementation]
            if let distribution = result.distribution {
                row += [String(distribution.count)]
                row += [distribution.min, distribution.p50, distribution.p90, distribution.p99, distribution.p999,
                        distribution.max].map(Format.number)
                if report.floor != nil { row.append(Format.ratio(report.ratio(of: result.implementation, to: report.floor))) }
                if report.foundation != nil {
                    row.append(Format.ratio(report.ratio(of: result.implementation, to: report.foundation)))
                }
            } else if report.unit != .figures {
                let cells = header.count - 1 - figureNames.count
                row += [result.notRunReason == nil ? "-" : (result.failed ? "failed" : "not run")] + Array(repeating: "-", count: cells - 1)
            }
            for name in figureNames {
                row.append(result.figure(name).map(Format.number) ?? "-")
            }
            rows.append(row)
        }
        var lines = ["### \(report.name): \(report.title)", ""]
        lines += table(header: header, rows: rows)
        if !report.notes.isEmpty {
            lines.append("")
            lines += report.notes.map { "- " + $0 }
        }
        return lines.joined(separator: "\n")
    }

    private static func orderedFigureNames(_ report: ScenarioReport) -> [String] {
        var names: [String] = []
        for result in report.results {
            for figure in result.figures where !names.contains(figure.name) {
                names.append(figure.name)
            }
        }
        return names
    }

    /// A Markdown table with padded columns: names left-aligned, numbers right-aligned.
    static func table(header: [String], rows: [[String]]) -> [String] {
        var widths = header.map(\.count)
        for row in rows {
            for (column, cell) in row.enumerated() where column < widths.count {
                widths[column] = max(widths[column], cell.count)
            }
        }
        func line(_ cells: [String]) -> String {
            let padded = cells.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: max(0, widths[column] - cell.count))
                return column == 0 ? cell + padding : padding + cell
            }
            return "| " + padded.joined(separator: " | ") + " |"
        }
        let rule = "|" + widths.enumerated().map { column, width in
            column == 0 ? String(repeating: "-", count: width + 2) : " " + String(repeating: "-", count: width) + ":"
        }.joined(separator: "|") + "|"
        return [line(header), rule] + rows.map(line)
    }
}
