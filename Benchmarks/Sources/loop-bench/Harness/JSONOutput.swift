import Foundation

/// The `--json` file: every figure of every run, in the benchmark's schema
/// (`{"machine":{...},"runs":[{"run":1,"scenarios":[{"name":...,"unit":"us","results":[{"impl":...,"p50":...}]}],
/// "verdicts":[...]}],"verdicts":[...]}`), with each result's named figures, the notes, each run's verdicts (value,
/// bound, ratio) and, at the top, each target over all runs (its ratio per run, the median, met or not).
enum JSONOutput {
    /// One run of `--runs N`, as measured and judged.
    struct Run {
        let run: Int
        let seconds: Double
        let reports: [ScenarioReport]
        let verdicts: [Verdict]
    }

    struct Machine: Encodable {
        let cores: Int
        let processor: String
        let kernel: String
        let date: String
        let build: String
        let quick: Bool
        let runs: Int
        let loadAverageAtStart: String
        let allocationCounting: String
        let syscallCounting: String
        /// The kernel's DAMON monitors running during the run, or "none running" (`System.runningMemoryMonitors`).
        let memoryMonitoring: String
        /// The package's commit when the run began (`BuildProvenance`), "+changes" when its tree differed from it.
        let treeCommit: String?
        /// Sources modified after the binary was built: a non-empty list means the figures may be of other code.
        let sourcesNewerThanBuild: [String]
    }

    struct Result: Encodable {
        let impl: String
        let samples: Int?
        let min: Double?
        let p50: Double?
        let p90: Double?
        let p99: Double?
        let p999: Double?
        let max: Double?
        let mean: Double?
        let figures: [String: Double]?
        /// Why the implementation was not measured, when its scenario ran without it.
        let notRun: String?
        /// `true` when it was not measured because it started and then failed (see `notRun`).
        let failed: Bool?
    }

    struct Scenario: Encodable {
        let name: String
        let title: String
        let unit: String
        let results: [Result]
        let notes: [String]
    }

    /// A target as judged in one run. `ratio`: value ÷ bound, or the count when the bound is 0 (`isCount`).
    struct Target: Encodable {
        let target: String
        let met: Bool?
        let value: Double?
        let bound: Double?
        let strictly: Bool
        let isCount: Bool
        let ratio: Double?
        let missesBeyondTolerance: Bool
        let notRun: Bool
        let detail: String
    }

    struct RunDocument: Encodable {
        let run: Int
        let seconds: Double
        let scenarios: [Scenario]
        let verdicts: [Target]
    }

    /// A target over every run: met when the median ratio meets it and no run misses it by more than the tolerance.
    struct Summary: Encodable {
        let target: String
        let ratios: [Double?]
        let metInRun: [Bool?]
        let medianRatio: Double?
        let isCount: Bool
        let met: Bool?
        let tolerance: Double
    }

    struct Document: Encodable {
        let machine: Machine
        let runs: [RunDocument]
        let verdicts: [Summary]
    }

    static func write(to path: String, machine: Machine, runs: [Run], targets: [TargetAcrossRuns]) throws {
        let runs = runs.map { run in
            RunDocument(run: run.run, seconds: run.seconds, scenarios: self.scenarios(run.reports),
                        verdicts: run.verdicts.map(self.target))
        }
        let summaries = targets.map {
            Summary(target: $0.target, ratios: $0.runs.map { finite($0?.score) }, metInRun: $0.runs.map { $0?.met },
                    medianRatio: finite($0.medianScore), isCount: $0.isCount, met: $0.met, tolerance: Verdict.tolerance)
        }
        let document = Document(machine: machine, runs: runs, verdicts: summaries)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(document).write(to: URL(fileURLWithPath: path))
    }

    /// JSON has no NaN or infinity: such a figure is left out.
    private static func finite(_ value: Double?) -> Double? { value.flatMap { $0.isFinite ? $0 : nil } }

    private static func target(_ verdict: Verdict) -> Target {
        Target(target: verdict.target, met: verdict.met, value: finite(verdict.value), bound: finite(verdict.bound),
               strictly: verdict.strictly, isCount: verdict.isCount, ratio: finite(verdict.score),
               missesBeyondTolerance: verdict.missesBeyondTolerance, notRun: verdict.wasNotRun, detail: verdict.detail)
    }

    private static func scenarios(_ reports: [ScenarioReport]) -> [Scenario] {
        reports.map { report in
            Scenario(name: report.name, title: report.title, unit: report.unit.rawValue, results: report.results.map {
                let distribution = $0.distribution
                return Result(impl: $0.implementation, samples: distribution?.count, min: finite(distribution?.min),
                              p50: finite(distribution?.p50), p90: finite(distribution?.p90),
                              p99: finite(distribution?.p99), p999: finite(distribution?.p999),
                              max: finite(distribution?.max), mean: finite(distribution?.mean),
                              // JSON has no infinity: a figure that is not finite (a miss) is left out.
                              figures: $0.figures.isEmpty ? nil : Dictionary(
                                  $0.figures.compactMap { figure in finite(figure.value).map { (figure.name, $0) } },
                                  uniquingKeysWith: { first, _ in first }),
                              notRun: $0.notRunReason, failed: $0.failed ? true : nil)
            }, notes: report.notes)
        }
    }
}
