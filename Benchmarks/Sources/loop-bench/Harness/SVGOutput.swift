import Foundation

/// The `--svg` file: one panel per latency scenario, each the empirical CDF of every implementation's samples on a
/// log-scaled time axis, with a legend that gives each curve's p50 and p99, so the picture reads without the table.
enum SVGOutput {
    static let width = 1180.0
    static let panelHeight = 300.0
    static let margin = (left: 60.0, right: 470.0, top: 40.0, bottom: 45.0)
    static let colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]

    static func render(_ reports: [ScenarioReport], caption: String) -> String {
        let panels = reports.filter { $0.plotsCDF && $0.results.contains { !($0.distribution?.isEmpty ?? true) } }
        let height = Double(panels.count) * self.panelHeight + 40
        var svg = ["<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(self.width))\" height=\"\(Int(height))\" "
                   + "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">",
                   "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
                   "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">\(escape(caption))</text>"]
        for (index, report) in panels.enumerated() {
            svg += self.panel(report, top: 40 + Double(index) * self.panelHeight)
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    private static func panel(_ report: ScenarioReport, top: Double) -> [String] {
        let plotLeft = self.margin.left
        let plotRight = self.width - self.margin.right
        let plotTop = top + self.margin.top
        let plotBottom = top + self.panelHeight - self.margin.bottom
        let curves = report.results.compactMap { result in
            result.distribution.map { (result.implementation, $0) }
        }.filter { !$0.1.isEmpty }
        // Decades that cover every sample (values ≤ 0 are drawn at the left edge).
        let positives = curves.flatMap { [$0.1.min, $0.1.max] }.filter { $0 > 0 }
        let low = floor(log10(positives.min() ?? 1))
        let high = max(low + 1, ceil(log10(positives.max() ?? 10)))
        func x(_ value: Double) -> Double {
            let position = value > 0 ? (log10(value) - low) / (high - low) : 0
            return plotLeft + min(max(position, 0), 1) * (plotRight - plotLeft)
        }
        func y(_ fraction: Double) -> Double { plotBottom - fraction * (plotBottom - plotTop) }
        func f(_ value: Double) -> String { Format.fixed(value, digits: 1) }

        var lines = ["<text x=\"\(f(plotLeft))\" y=\"\(f(top + 25))\" font-size=\"13\" font-weight=\"bold\">"
                     + "\(escape(report.name)): \(escape(report.title))</text>"]
        // Grid: decades and their 2× and 5×, and quartiles of the CDF.
        var decade = low
        while decade <= high {
            let value = pow(10, decade)
            lines.append(line(x(value), plotTop, x(value), plotBottom, stroke: "#bbb"))
            lines.append("<text x=\"\(f(x(value)))\" y=\"\(f(plotBottom + 15))\" text-anchor=\"middle\">"
                         + "\(escape(label(value, unit: report.unit)))</text>")
            if decade < high {
                for minor in [2.0, 5.0] {
                    lines.append(line(x(value * minor), plotTop, x(value * minor), plotBottom, stroke: "#eee"))
                }
            }
            decade += 1
        }
        for (fraction, text) in [(0.0, "0"), (0.25, "0.25"), (0.5, "0.5"), (0.75, "0.75"), (0.9, "0.9"), (0.99, "")] {
            lines.append(line(plotLeft, y(fraction), plotRight, y(fraction), stroke: fraction == 0.99 ? "#f9c" : "#ddd"))
            lines.append("<text x=\"\(f(plotLeft - 6))\" y=\"\(f(y(fraction) + 4))\" text-anchor=\"end\">\(text)</text>")
        }
        lines.append("<text x=\"\(f(plotRight - 4))\" y=\"\(f(y(0.99) + 12))\" text-anchor=\"end\" fill=\"#c47\">"
                     + "p99</text>")
        lines.append("<text x=\"\(f((plotLeft + plotRight) / 2))\" y=\"\(f(plotBottom + 32))\" text-anchor=\"middle\">"
                     + "\(escape(report.unit.label)) (log scale) — fraction of samples at or below</text>")
        lines.append("<rect x=\"\(f(plotLeft))\" y=\"\(f(plotTop))\" width=\"\(f(plotRight - plotLeft))\" "
                     + "height=\"\(f(plotBottom - plotTop))\" fill=\"none\" stroke=\"#444\"/>")

        for (index, (name, distribution)) in curves.enumerated() {
            let color = self.colors[index % self.colors.count]
            // The CDF as a staircase through at most ~600 points, denser in the tail.
            var points: [String] = []
            var previousX = plotLeft
            for fraction in self.fractions(count: distribution.count) {
                let value = distribution.percentile(fraction * 100)
                let px = x(value)
                points.append("\(f(previousX)),\(f(y(fraction)))")
                points.append("\(f(px)),\(f(y(fraction)))")
                previousX = px
            }
            lines.append("<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.6\" "
                         + "points=\"\(points.joined(separator: " "))\"/>")
            let legendY = plotTop + 8 + Double(index) * 17
            lines.append(line(plotRight + 12, legendY, plotRight + 32, legendY, stroke: color, width: 3))
            lines.append("<text x=\"\(f(plotRight + 38))\" y=\"\(f(legendY + 4))\" font-size=\"11\">\(escape(name)) — p50 "
                         + "\(Format.number(distribution.p50)), p99 \(Format.number(distribution.p99)) \(escape(report.unit.label))</text>")
        }
        return lines
    }

    /// CDF levels to draw: evenly spaced, then ever closer to 1 for the tail.
    private static func fractions(count: Int) -> [Double] {
        var levels = stride(from: 0.0, through: 0.98, by: 0.002).map { $0 }
        var tail = 0.98
        while tail < 1 - 1 / Double(max(count, 2)) {
            tail = 1 - (1 - tail) * 0.85
            levels.append(tail)
        }
        levels.append(1)
        return levels.filter { $0 > 0 }
    }

    private static func label(_ value: Double, unit: MeasureUnit) -> String {
        value >= 1_000 && unit == .microseconds ? Format.number(value / 1_000) + " ms" : Format.number(value) + " "
            + (unit == .microseconds ? "µs" : unit.label)
    }

    private static func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String,
                             width: Double = 1) -> String {
        "<line x1=\"\(Format.fixed(x1, digits: 1))\" y1=\"\(Format.fixed(y1, digits: 1))\" "
            + "x2=\"\(Format.fixed(x2, digits: 1))\" y2=\"\(Format.fixed(y2, digits: 1))\" stroke=\"\(stroke)\" "
            + "stroke-width=\"\(Format.number(width))\"/>"
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
