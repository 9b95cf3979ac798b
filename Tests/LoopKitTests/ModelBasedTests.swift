#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

/// Random operation sequences, played on a real loop on virtual time and on the reference model (LoopModel.swift),
/// compared after every step: the trace (observer calls, timer fires, sources, blocks, run results, `add` results)
/// and the state (`contains` in every mode, `isValid`, `fireDate`, `isSignalled`, the clock).
///
/// Each sequence comes from its own seed. `LOOPKIT_MODEL_SEED=<n>` (decimal or 0x hex) replays one sequence. A
/// divergence is shrunk (operations removed, in ranges and one at a time, then callback actions) while it persists,
/// and reported with the seed and the shortest sequence found.
@Suite("Model-based: random operation sequences against a reference model")
struct ModelBasedTests {
    /// A fixed list of base seeds, plus one random one per run (printed in the test's name and in any failure).
    static let cases: [SeedCase] = {
        if let replay = ModelBasedTests.replaySeed {
            return [SeedCase(seed: replay, isReplay: true)]
        }
        let fixed: [UInt64] = [0x5EED_0000_0001, 0xC0FF_EE00_0042, 0x0BAD_CAFE_F00D]
        return (fixed + [UInt64.random(in: .min ... .max)]).map { SeedCase(seed: $0, isReplay: false) }
    }()

    /// 500 per case: about 2,000 sequences and 80,000 operations, a few seconds on two cores in a debug build.
    /// `LOOPKIT_MODEL_SEQUENCES=<n>` runs more (a soak) or fewer.
    static let sequencesPerCase = Self.environment("LOOPKIT_MODEL_SEQUENCES").flatMap { Int($0) } ?? 500

    static var replaySeed: UInt64? {
        guard let text = Self.environment("LOOPKIT_MODEL_SEED") else { return nil }
        return text.hasPrefix("0x") ? UInt64(String(text.dropFirst(2)), radix: 16) : UInt64(text)
    }

    private static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    @Test(arguments: ModelBasedTests.cases)
    func randomSequencesBehaveAsTheModelSays(_ seedCase: SeedCase) throws {
        var seeds = SplitMix64(seed: seedCase.seed)
        let count = seedCase.isReplay ? 1 : Self.sequencesPerCase
        for _ in 0..<count {
            let seed = seedCase.isReplay ? seedCase.seed : seeds.next()
            var generator = SequenceGenerator(seed: seed)
            let ops = generator.sequence()
            guard try Self.firstDivergence(ops) != nil else { continue }
            let shortest = try Self.shrink(ops)
            let divergence = try #require(try Self.firstDivergence(shortest))
            let steps = shortest.enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
            Issue.record("""
                The loop and the model diverge. Seed \(Self.hex(seed)) (replay: LOOPKIT_MODEL_SEED=\(Self.hex(seed))); \
                \(ops.count) operations shrunk to \(shortest.count):
                \(steps)
                After step \(divergence.step + 1):
                \(divergence.lines.map { "  " + $0 }.joined(separator: "\n"))
                """)
            return
        }
    }

    static func hex(_ seed: UInt64) -> String { "0x" + String(seed, radix: 16) }

    // MARK: Comparing

    struct Divergence {
        let step: Int
        let lines: [String]
    }

    /// Plays `ops` on a fresh loop and a fresh model; the first step after which they differ, if any.
    static func firstDivergence(_ ops: [ModelOp]) throws -> Divergence? {
        let driver = try ModelLoopDriver()
        defer { driver.finish() }
        let model = LoopModel()
        for (index, op) in ops.enumerated() {
            let (loopStart, modelStart) = (driver.events.count, model.events.count)
            driver.apply(op)
            model.apply(op)
            var lines = Self.traceDifference(model: Array(model.events[modelStart...]),
                                             loop: Array(driver.events[loopStart...]))
            if op.mayChangeState {
                let (modelState, loopState) = (model.state(), driver.state())
                if modelState != loopState {
                    lines += modelState.differences(from: loopState, selfName: "model", otherName: "loop")
                }
            }
            if !lines.isEmpty {
                return Divergence(step: index, lines: lines)
            }
        }
        return nil
    }

    /// The two traces of one step from a little before their first difference, or nothing if they are equal.
    static func traceDifference(model: [ModelEvent], loop: [ModelEvent]) -> [String] {
        guard model != loop else { return [] }
        let first = zip(model, loop).prefix { $0 == $1 }.count
        let from = max(0, first - 4)
        func excerpt(_ events: [ModelEvent]) -> String {
            let shown = events[from..<min(events.count, first + 10)].enumerated().map { offset, event in
                (from + offset == first ? "→ " : "") + event.description
            }
            return (from > 0 ? "… " : "") + shown.joined(separator: ", ") + (events.count > first + 10 ? ", …" : "")
        }
        return ["trace, first difference at event \(first + 1):", "model: \(excerpt(model))", "loop:  \(excerpt(loop))"]
    }

    // MARK: Shrinking

    /// The shortest sequence found that still diverges: ranges of operations removed while the divergence persists
    /// (halving the range), then single callback actions; repeated until nothing more can go.
    static func shrink(_ ops: [ModelOp]) throws -> [ModelOp] {
        var current = ops
        var trials = 0
        func stillDiverges(_ candidate: [ModelOp]) throws -> Bool {
            trials += 1
            return try Self.firstDivergence(candidate) != nil
        }
        var changed = true
        while changed && trials < 20_000 {
            changed = false
            var chunk = max(current.count / 2, 1)
            while true {
                var index = 0
                while index < current.count {
                    var candidate = current
                    candidate.removeSubrange(index..<min(index + chunk, current.count))
                    if try stillDiverges(candidate) {
                        current = candidate
                        changed = true
                    } else {
                        index += chunk
                    }
                }
                if chunk == 1 { break }
                chunk /= 2
            }
            for index in current.indices {
                for simpler in current[index].simplifications where try stillDiverges(
                    current[..<index] + [simpler] + current[(index + 1)...]) {
                    current[index] = simpler
                    changed = true
                    break
                }
            }
        }
        return current
    }
}

/// A base seed for a batch of sequences, or (with `LOOPKIT_MODEL_SEED`) the seed of the one sequence to replay.
struct SeedCase: Sendable, CustomTestStringConvertible {
    let seed: UInt64
    let isReplay: Bool

    var testDescription: String {
        (self.isReplay ? "replay of sequence " : "base seed ") + ModelBasedTests.hex(self.seed)
    }
}

// MARK: - Generating sequences

/// Makes one random sequence of 20–60 operations from a seed.
struct SequenceGenerator {
    private var rng: SplitMix64
    private var lastNumber = 0
    private var items: [ItemRef] = []
    private var sources: [Int] = []

    init(seed: UInt64) {
        self.rng = SplitMix64(seed: seed)
    }

    mutating func sequence() -> [ModelOp] {
        (0..<self.int(20...60)).map { _ in self.op() }
    }

    private mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self.rng) }
    private mutating func chance(_ percent: Int) -> Bool { self.int(0...99) < percent }
    private mutating func pick<T>(_ choices: [T]) -> T { choices[self.int(0...choices.count - 1)] }

    private mutating func number() -> Int {
        self.lastNumber += 1
        return self.lastNumber
    }

    private mutating func itemMode() -> LoopMode {
        self.pick([.default, .default, .default, .common, .common, .tracking, ModelModes.modal, ModelModes.modal,
                   ModelModes.panel])
    }

    private mutating func runMode() -> LoopMode {
        self.pick([.default, .default, .default, .tracking, .tracking, ModelModes.modal, ModelModes.panel])
    }

    private mutating func blockModes() -> [LoopMode] {
        let modes: [LoopMode] = [.default, .default, .common, .tracking, ModelModes.modal]
        let first = self.pick(modes)
        guard self.chance(30) else { return [first] }
        let second = self.pick(modes)
        return second == first ? [first] : [first, second]
    }

    private mutating func op() -> ModelOp {
        var roll = self.int(0...99)
        if self.items.isEmpty && (28..<54).contains(roll) || self.sources.isEmpty && (44..<54).contains(roll) {
            roll = 80  // nothing to act on yet: a run instead
        }
        switch roll {
        case ..<12:
            let ref = ItemRef.timer(self.number())
            let spec = TimerSpec(intervalMs: self.pick([2, 3, 5, 8, 13, 20]), repeats: self.chance(50),
                                 toleranceMs: self.chance(30) ? self.pick([1, 2, 5]) : 0,
                                 fireAtOffsetMs: self.chance(20) ? self.pick([-5, 0, 3, 10]) : nil)
            self.items.append(ref)
            return .addTimer(ref, spec, self.itemMode(), self.script(for: ref))
        case ..<20:
            let ref = ItemRef.observer(self.number())
            let all: [LoopActivity] = [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit]
            var activities: LoopActivity = []
            for activity in all where self.chance(45) { activities.insert(activity) }
            self.items.append(ref)
            return .addObserver(ref, activities: activities.isEmpty ? .allActivities : activities,
                                order: self.pick([-1, 0, 0, 1, 2]), repeats: self.chance(80), self.itemMode(),
                                self.script(for: ref))
        case ..<28:
            let ref = ItemRef.source(self.number())
            self.items.append(ref)
            self.sources.append(ref.number)
            return .addSource(ref, order: self.pick([0, 0, 1, 2]), self.itemMode(), self.script(for: ref))
        case ..<34: return .add(self.pick(self.items), self.itemMode())
        case ..<40: return .remove(self.pick(self.items), self.itemMode())
        case ..<44: return .invalidate(self.pick(self.items))
        case ..<54: return .signal(self.pick(self.sources))
        case ..<64:
            return .perform(id: self.number(), modes: self.blockModes(), actions: self.chance(40) ? self.actions() : [])
        case ..<67: return .addCommonMode(self.pick([ModelModes.modal, ModelModes.panel]))
        case ..<73: return .advance(ms: self.pick([1, 4, 10, 30]))
        case ..<99:
            return .run(self.runMode(), ms: self.pick([0, 1, 3, 10, 25, 50]), returnAfterSource: self.chance(20))
        default: return .stop
        }
    }

    private mutating func script(for ref: ItemRef) -> ModelScript {
        guard self.chance(55) else { return [:] }
        var script = ModelScript()
        for _ in 0..<self.int(1...2) {
            script[self.int(0...3)] = self.actions(for: ref)
        }
        return script
    }

    private mutating func actions(for ref: ItemRef? = nil, nesting: Int = 0) -> [ModelAction] {
        (0..<self.int(1...2)).map { _ in self.action(for: ref, nesting: nesting) }
    }

    private mutating func action(for ref: ItemRef?, nesting: Int) -> ModelAction {
        switch self.int(0...99) {
        case ..<12:
            return .stop
        case ..<34:
            return .run(self.runMode(), ms: self.pick([0, 2, 5, 15]), returnAfterSource: self.chance(25))
        case ..<52 where !self.sources.isEmpty:
            return .signal(self.pick(self.sources))
        case ..<66:
            let actions = nesting == 0 && self.chance(40) ? self.actions(nesting: nesting + 1) : []
            return .perform(id: self.number(), modes: self.blockModes(), actions: actions)
        case ..<74 where !self.items.isEmpty:
            if let ref, self.chance(50) {
                return .invalidate(ref)  // itself
            }
            return .invalidate(self.pick(self.items))
        case ..<80 where !self.items.isEmpty:
            return .remove(self.chance(30) ? ref ?? self.pick(self.items) : self.pick(self.items), self.itemMode())
        case ..<86 where !self.items.isEmpty:
            return .add(self.pick(self.items), self.itemMode())
        default:
            return .work(ms: self.pick([1, 2, 5, 12]))
        }
    }
}

// MARK: - Simplifying for the shrinker

extension ModelOp {
    /// Whether the step can change what `ModelState` holds: queuing a block, or a stop with no run active, cannot
    /// (their effects show in the trace of a later run), so the test saves the snapshots after them.
    var mayChangeState: Bool {
        switch self {
        case .perform, .stop: false
        default: true
        }
    }

    /// This operation with one callback action fewer, each way that can be done.
    var simplifications: [ModelOp] {
        switch self {
        case .addTimer(let ref, let spec, let mode, let script):
            return Self.simplifications(of: script).map { .addTimer(ref, spec, mode, $0) }
        case .addObserver(let ref, let activities, let order, let repeats, let mode, let script):
            return Self.simplifications(of: script).map {
                .addObserver(ref, activities: activities, order: order, repeats: repeats, mode, $0)
            }
        case .addSource(let ref, let order, let mode, let script):
            return Self.simplifications(of: script).map { .addSource(ref, order: order, mode, $0) }
        case .perform(let id, let modes, let actions):
            return Self.simplifications(of: actions).map { .perform(id: id, modes: modes, actions: $0) }
        default:
            return []
        }
    }

    private static func simplifications(of script: ModelScript) -> [ModelScript] {
        script.keys.sorted().flatMap { call in
            Self.simplifications(of: script[call]!).map { actions in
                var simpler = script
                simpler[call] = actions.isEmpty ? nil : actions
                return simpler
            }
        }
    }

    private static func simplifications(of actions: [ModelAction]) -> [[ModelAction]] {
        var result: [[ModelAction]] = []
        for index in actions.indices {
            var fewer = actions
            fewer.remove(at: index)
            result.append(fewer)
            if case .perform(let id, let modes, let inner) = actions[index] {
                for simpler in Self.simplifications(of: inner) {
                    var changed = actions
                    changed[index] = .perform(id: id, modes: modes, actions: simpler)
                    result.append(changed)
                }
            }
        }
        return result
    }
}
