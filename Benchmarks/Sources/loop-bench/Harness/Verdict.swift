/// One target of the benchmark, judged from the reports of one run.
///
/// Every target is put as `value ≤ bound` (`<` when `strictly`); an "at least" target puts the figure it requires as
/// the value and the figure reached as the bound. Its score is `value ÷ bound`, so ≤ 1 meets it whatever its kind,
/// and "misses by more than 10%" is a score above 1.1. A target whose bound is 0 (a count that must stay 0: missed
/// slots, skipped frames, empty passes) has no ratio: its score is the count itself, and any count above 0 misses it
/// by more than 10%.
struct Verdict: Sendable {
    /// How far a run may miss a target and still count towards a median that meets it (`--runs`).
    static let tolerance = 0.10

    let target: String
    /// The figure judged; `nil` when not measured in this run (`--only`, or unavailable here).
    let value: Double?
    /// What `value` must stay at or below; `nil` when not measured.
    let bound: Double?
    /// Whether `value` must stay strictly below `bound`.
    var strictly = false
    /// The two numbers, in words.
    let detail: String
    /// Whether its scenario ran but could not measure an implementation it needs (`met` is then `nil`): printed, as
    /// NOT RUN, even under `--only`.
    var wasNotRun = false
    /// Whether every run must meet it (`--runs`): no tolerance for a run that misses, whatever the median.
    var inEveryRun = false

    /// Whether the target is a count that must stay 0, scored by the count rather than by a ratio.
    var isCount: Bool { self.bound == 0 }

    /// `value ÷ bound`, or the count when the bound is 0; `nil` when not measured.
    var score: Double? {
        guard let value, let bound else { return nil }
        return bound == 0 ? value : value / bound
    }

    var met: Bool? { self.score.map { Self.meets($0, isCount: self.isCount, strictly: self.strictly) } }

    /// Whether `score` misses its target by more than `tolerance` (a count, or a target to meet in every run: by
    /// anything at all).
    var missesBeyondTolerance: Bool {
        self.score.map { score in
            self.inEveryRun ? !Self.meets(score, isCount: self.isCount, strictly: self.strictly)
                : Self.missesBeyondTolerance(score, isCount: self.isCount)
        } ?? false
    }

    /// A figure that could not be taken (a distribution with no samples reads NaN) is a miss, never a pass: NaN
    /// compares false with everything, so it is checked first.
    static func meets(_ score: Double, isCount: Bool, strictly: Bool) -> Bool {
        guard score.isFinite else { return false }
        return isCount ? score <= 0 : (strictly ? score < 1 : score <= 1)
    }

    static func missesBeyondTolerance(_ score: Double, isCount: Bool) -> Bool {
        guard score.isFinite else { return true }
        return isCount ? score > 0 : score > 1 + self.tolerance
    }

    /// A score as printed: "0.87×" for a ratio, the count for a count.
    static func scoreText(_ score: Double?, isCount: Bool) -> String {
        guard let score else { return "-" }
        return isCount ? Format.number(score) : Format.ratio(score)
    }

    /// The mark a result is printed with.
    static func mark(met: Bool?, wasNotRun: Bool) -> String {
        switch met {
        case true?: "MET"
        case false?: "NOT MET"
        case nil: wasNotRun ? "NOT RUN" : "n/a"
        }
    }

    var line: String {
        let mark = Self.mark(met: self.met, wasNotRun: self.wasNotRun).padding(toLength: 8, withPad: " ", startingAt: 0)
        let ratio = self.isCount || self.score == nil ? "" : " (ratio \(Self.scoreText(self.score, isCount: false)))"
        return mark + self.target + ": " + self.detail + ratio
    }
}
