/// One target judged over every run of `--runs N`: met when the median of its runs' scores meets it and no run misses
/// it by more than `Verdict.tolerance` (a count that must stay 0: when no run counts more than 0). A target measured in
/// some runs must be measured in all: a run that could not measure it (a server that failed, a figure with no samples)
/// counts as a miss beyond the tolerance, not as a run left out.
struct TargetAcrossRuns: Sendable {
    let target: String
    /// Its verdict in each run, in order; `nil` for a run that did not judge it.
    let runs: [Verdict?]

    /// Groups the verdicts of every run by target, in the order the targets first appear.
    static func collect(_ runs: [[Verdict]]) -> [TargetAcrossRuns] {
        var targets: [String] = []
        for verdict in runs.joined() where !targets.contains(verdict.target) {
            targets.append(verdict.target)
        }
        return targets.map { target in
            TargetAcrossRuns(target: target, runs: runs.map { run in run.first { $0.target == target } })
        }
    }

    private var measured: [Verdict] { self.runs.compactMap { $0 }.filter { $0.score != nil } }
    var isCount: Bool { self.measured.first?.isCount ?? false }
    var wasNotRun: Bool { self.measured.isEmpty && self.runs.contains { $0?.wasNotRun ?? false } }

    /// The median of the measured runs' scores (the mean of the middle two for an even count).
    var medianScore: Double? {
        let scores = self.measured.compactMap(\.score).sorted()
        guard !scores.isEmpty else { return nil }
        let middle = scores.count / 2
        return scores.count % 2 == 1 ? scores[middle] : (scores[middle - 1] + scores[middle]) / 2
    }

    /// Runs that did not measure a target the others measured.
    var unmeasuredRuns: Int {
        self.measured.isEmpty ? 0 : self.runs.count - self.measured.count
    }

    var met: Bool? {
        guard let median = self.medianScore else { return nil }
        let strictly = self.measured.first?.strictly ?? false
        return Verdict.meets(median, isCount: self.isCount, strictly: strictly)
            && !self.measured.contains { $0.missesBeyondTolerance } && self.unmeasuredRuns == 0
    }

    /// A run's cell: its score, then "(miss)" when it missed within the tolerance and "(MISS)" beyond it.
    static func cell(_ verdict: Verdict?, isRequired: Bool) -> String {
        guard let verdict else { return isRequired ? "- (MISS)" : "-" }
        guard let met = verdict.met else {
            return Verdict.mark(met: nil, wasNotRun: verdict.wasNotRun) + (isRequired ? " (MISS)" : "")
        }
        let text = Verdict.scoreText(verdict.score, isCount: verdict.isCount)
        return met ? text : text + (verdict.missesBeyondTolerance ? " (MISS)" : " (miss)")
    }

    /// The final verdict table of `--runs N`, with how it is judged.
    static func render(_ targets: [TargetAcrossRuns], runs: Int) -> [String] {
        let header = ["target"] + (1...runs).map { "run \($0)" } + ["median", "verdict"]
        let rows = targets.map { target in
            [target.target] + target.runs.map { Self.cell($0, isRequired: target.unmeasuredRuns > 0) }
                + [Verdict.scoreText(target.medianScore, isCount: target.isCount),
                   Verdict.mark(met: target.met, wasNotRun: target.wasNotRun)]
        }
        let judged = targets.filter { $0.met != nil }
        let tolerance = Format.number(Verdict.tolerance * 100)
        return ["## Verdicts over \(runs) runs", ""] + TablePrinter.table(header: header, rows: rows) + [
            "",
            "- Met \(judged.filter { $0.met == true }.count) of the \(judged.count) targets judged.",
            "- A cell is the run's ratio: the figure ÷ its bound (for an \"at least\" target, the figure required ÷ "
                + "the figure reached), so ≤ 1.00× meets it (< 1.00× for a strict target). A count that must stay 0 "
                + "(missed slots, skipped frames, empty passes, allocations) shows the count instead.",
            "- A target is met when its median meets it and no run misses it by more than \(tolerance)% (a ratio "
                + "above \(Format.ratio(1 + Verdict.tolerance))), or, for a count, when no run counts more than 0. "
                + "'(miss)': a run that missed within the tolerance; '(MISS)': one beyond it, which fails the target. "
                + "A run that could not measure a target the other runs measured is a MISS; a target marked 'in "
                + "every run' fails on any run that misses it.",
        ]
    }
}
