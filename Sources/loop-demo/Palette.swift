import Foundation

/// ANSI colours and styles, or none: the demo paints through a palette so that plain output is one flag away.
///
/// A disabled palette returns text unchanged, which is what a pipe, a file, `--no-color`, `NO_COLOR` and `--json`
/// get.
struct Palette: Sendable {
    /// A text style: an SGR parameter string.
    struct Style: Sendable {
        let code: String

        static let bold = Style(code: "1")
        static let dim = Style(code: "2")
        static let red = Style(code: "31")
        static let green = Style(code: "32")
        static let yellow = Style(code: "33")
        static let blue = Style(code: "34")
        static let magenta = Style(code: "35")
        static let cyan = Style(code: "36")
        /// A dark yellow background: the tracking stretch of the timeline.
        static let trackingBackground = Style(code: "48;5;58")

        /// Both styles at once.
        static func + (lhs: Style, rhs: Style) -> Style {
            Style(code: lhs.code + ";" + rhs.code)
        }
    }

    /// Whether escape sequences are emitted.
    let isEnabled: Bool

    /// A palette for a descriptor: colour only when it is a terminal and colour was not turned off, by `--no-color`
    /// or by a non-empty `NO_COLOR` in the environment (no-color.org's convention).
    static func forOutput(_ descriptor: CInt, noColor: Bool) -> Palette {
        let environmentSaysNoColor = getenv("NO_COLOR").map { $0.pointee != 0 } ?? false
        return Palette(isEnabled: !noColor && !environmentSaysNoColor && Terminal.isTerminal(descriptor))
    }

    /// `text` in `style`, reset afterwards.
    func paint(_ text: String, _ style: Style) -> String {
        guard self.isEnabled, !text.isEmpty else { return text }
        return "\u{1B}[\(style.code)m\(text)\u{1B}[0m"
    }

    /// The pieces joined, each painted in its style (`nil`: plain), with one escape sequence per run of equal style.
    func paintRuns(_ pieces: [(String, Style?)]) -> String {
        var result = ""
        var run = ""
        var runStyle: Style?
        for (text, style) in pieces {
            if style?.code != runStyle?.code {
                result += runStyle.map { self.paint(run, $0) } ?? run
                run = ""
                runStyle = style
            }
            run += text
        }
        return result + (runStyle.map { self.paint(run, $0) } ?? run)
    }
}
