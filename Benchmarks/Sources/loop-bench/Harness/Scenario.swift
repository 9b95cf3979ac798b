import Foundation

/// One benchmark scenario: it measures LoopKit and its peers side by side and returns one or more tables.
protocol Scenario {
    /// The name `--only` takes, such as "wakeup".
    var name: String { get }
    /// What it measures, in a line (for `--help` and the progress line).
    var summary: String { get }
    /// Runs the scenario, warm-up round included, and returns its reports.
    func run(_ context: BenchContext) -> [ScenarioReport]
}

/// What every scenario shares: the scale of the run and the progress output.
final class BenchContext {
    /// `--quick`: a tenth of the samples and of the durations.
    let isQuick: Bool
    /// The tables `--only` picked out of their scenarios ("scale/timers"); empty when whole scenarios run.
    let onlyReports: Set<String>

    init(isQuick: Bool, onlyReports: Set<String> = []) {
        self.isQuick = isQuick
        self.onlyReports = onlyReports
    }

    /// Whether a scenario should produce the table `report` ("scale/timers"): `--only` named no table of the
    /// scenario `scenario`, or named this one.
    func wants(_ report: String, of scenario: String) -> Bool {
        let picked = self.onlyReports.filter { $0.hasPrefix(scenario + "/") }
        return picked.isEmpty || picked.contains(report)
    }

    /// `count` samples, or a tenth of them (at least `minimum`) for a quick run.
    func samples(_ count: Int, minimum: Int = 10) -> Int {
        self.isQuick ? max(minimum, count / 10) : count
    }

    /// A duration in nanoseconds, or a tenth of it for a quick run.
    func duration(seconds: Double) -> UInt64 {
        UInt64((self.isQuick ? seconds / 10 : seconds) * 1e9)
    }

    /// Prints a progress line on standard error (the tables go to standard output). Standard output is flushed first:
    /// sent to a file it is buffered, and with both streams in one file (`> log 2>&1`) a progress line would otherwise
    /// land inside a table printed before it.
    func progress(_ line: String) {
        fflush(nil)  // every output stream: naming `stdout` is a global variable access Swift 6 rejects
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
