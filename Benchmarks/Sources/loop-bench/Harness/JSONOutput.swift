import Foundation

/// The `--json` file: every figure of the run, in the benchmark's schema
/// (`{"machine":{...},"scenarios":[{"name":...,"unit":"us","results":[{"impl":...,"samples":N,"p50":...}]}]}`),
/// plus each result's named figures, the notes, and the verdicts.
enum JSONOutput {
    struct Machine: Encodable {
        let cores: Int
        let kernel: String
        let date: String
        let build: String
        let quick: Bool
        let loadAverageAtStart: String
        let allocationCounting: String
        let syscallCounting: String
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
    }

    struct Scenario: Encodable {
        let name: String
        let title: String
        let unit: String
        let results: [Result]
        let notes: [String]
    }

    struct Target: Encodable {
        let target: String
        let met: Bool?
        let detail: String
    }

    struct Document: Encodable {
        let machine: Machine
        let scenarios: [Scenario]
        let verdicts: [Target]
    }

    static func write(to path: String, machine: Machine, reports: [ScenarioReport], verdicts: [Verdict]) throws {
        let scenarios = reports.map { report in
            Scenario(name: report.name, title: report.title, unit: report.unit.rawValue, results: report.results.map {
                let distribution = $0.distribution
                func finite(_ value: Double?) -> Double? { value.flatMap { $0.isFinite ? $0 : nil } }
                return Result(impl: $0.implementation, samples: distribution?.count, min: finite(distribution?.min),
                              p50: finite(distribution?.p50), p90: finite(distribution?.p90),
                              p99: finite(distribution?.p99), p999: finite(distribution?.p999),
                              max: finite(distribution?.max), mean: finite(distribution?.mean),
                              figures: $0.figures.isEmpty ? nil : Dictionary(
                                  $0.figures.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first }),
                              notRun: $0.notRunReason)
            }, notes: report.notes)
        }
        let document = Document(machine: machine, scenarios: scenarios,
                                verdicts: verdicts.map { Target(target: $0.target, met: $0.met, detail: $0.detail) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(document).write(to: URL(fileURLWithPath: path))
    }
}
