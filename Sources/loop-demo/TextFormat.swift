/// Small text helpers for tables and times; no Foundation needed.
enum TextFormat {
    /// `value` with exactly `decimals` digits after the point, e.g. `fixed(1.2345, 2)` is `"1.23"`.
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let sign = value < 0 && scaled > 0 ? "-" : ""
        let whole = Int(scaled / scale)
        guard decimals > 0 else { return sign + String(whole) }
        let fraction = String(Int(scaled - Double(whole) * scale))
        return sign + String(whole) + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    /// `duration` in seconds, as a `Double`.
    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// `duration` in milliseconds, as a `Double`.
    static func milliseconds(_ duration: Duration) -> Double {
        self.seconds(duration) * 1000
    }

    /// `text` padded with spaces on the right to `width` characters.
    static func left(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }

    /// `text` padded with spaces on the left to `width` characters.
    static func right(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    /// `duration` in whole nanoseconds.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// A time on a ruler: `0s`, `0.5s`, `1s`, `1.25s`.
    static func secondsLabel(_ duration: Duration) -> String {
        self.compact(self.seconds(duration)) + "s"
    }

    /// `value` with at most two decimals and no trailing zeros: `1`, `0.5`, `1.25`.
    static func compact(_ value: Double) -> String {
        var text = self.fixed(value, 2)
        while text.hasSuffix("0") && text.contains(".") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// `text` broken into lines of at most `width` characters, at spaces (a longer word gets a line of its own).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        return lines + (line.isEmpty && !lines.isEmpty ? [] : [line])
    }
}
