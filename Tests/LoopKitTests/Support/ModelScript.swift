@testable import LoopKit

// The vocabulary of the model-based test (ModelBasedTests.swift): the operations a generated sequence is made of,
// the actions a callback performs, and the trace and state that the loop and the reference model (LoopModel.swift)
// both report. Times are whole milliseconds since the clock's start.

/// An item of a generated sequence: a timer, an observer or a signalled source, numbered once for the sequence.
enum ItemRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    case timer(Int)
    case observer(Int)
    case source(Int)

    var number: Int {
        switch self {
        case .timer(let n), .observer(let n), .source(let n): n
        }
    }

    static func < (lhs: ItemRef, rhs: ItemRef) -> Bool { lhs.number < rhs.number }

    var description: String {
        switch self {
        case .timer(let n): "t\(n)"
        case .observer(let n): "o\(n)"
        case .source(let n): "s\(n)"
        }
    }
}

/// What a callback does when it is called (a timer fire, an observer call, a source, a block).
indirect enum ModelAction: Hashable, Sendable, CustomStringConvertible {
    /// `loop.stop()`.
    case stop
    /// A nested `run(mode:before: now + ms, returnAfterSourceHandled:)`; skipped at `maxRunDepth` active runs.
    case run(LoopMode, ms: Int, returnAfterSource: Bool)
    case signal(Int)
    /// `perform(inModes:)` of block number `id`, which performs `actions` when it runs.
    case perform(id: Int, modes: [LoopMode], actions: [ModelAction])
    case invalidate(ItemRef)
    case add(ItemRef, LoopMode)
    case remove(ItemRef, LoopMode)
    /// The callback "works" for `ms`: the manual clock moves on.
    case work(ms: Int)

    /// Runs active at once, the outermost included: a nested run action beyond it does nothing.
    static let maxRunDepth = 3

    var description: String {
        switch self {
        case .stop: "stop"
        case .run(let mode, let ms, let ras): "run(\(mode), \(ms) ms\(ras ? ", returnAfterSourceHandled" : ""))"
        case .signal(let n): "signal s\(n)"
        case .perform(let id, let modes, let actions):
            "perform b\(id) in \(modes)"
                + (actions.isEmpty ? "" : " { \(actions.map(\.description).joined(separator: "; ")) }")
        case .invalidate(let ref): "invalidate \(ref)"
        case .add(let ref, let mode): "add \(ref) to \(mode)"
        case .remove(let ref, let mode): "remove \(ref) from \(mode)"
        case .work(let ms): "work \(ms) ms"
        }
    }
}

/// What an item's callback does on its n-th call (0-based); calls not listed do nothing but record themselves.
typealias ModelScript = [Int: [ModelAction]]

func describe(_ script: ModelScript) -> String {
    guard !script.isEmpty else { return "" }
    return script.keys.sorted().map { call in
        "; call #\(call + 1): [\(script[call]!.map(\.description).joined(separator: "; "))]"
    }.joined()
}

/// How a generated timer is made.
struct TimerSpec: Hashable {
    var intervalMs: Int
    var repeats: Bool
    var toleranceMs: Int
    /// A fire date relative to the moment of creation (`LoopTimer(fireAt:)`), or `nil` for `LoopTimer(interval:)`.
    var fireAtOffsetMs: Int?

    /// The tolerance the timer keeps: a repeating timer's is at most half its interval, as CF's (in whole ms, which
    /// gives the same wakes as the half against fire dates in whole ms).
    var keptToleranceMs: Int {
        self.repeats ? min(self.toleranceMs, self.intervalMs / 2) : self.toleranceMs
    }
}

/// One top-level step of a generated sequence.
enum ModelOp: Hashable, CustomStringConvertible {
    case addTimer(ItemRef, TimerSpec, LoopMode, ModelScript)
    case addObserver(ItemRef, activities: LoopActivity, order: Int, repeats: Bool, LoopMode, ModelScript)
    case addSource(ItemRef, order: Int, LoopMode, ModelScript)
    /// Adds an existing item to another mode (`add` returns `false` for an invalidated one).
    case add(ItemRef, LoopMode)
    case remove(ItemRef, LoopMode)
    case invalidate(ItemRef)
    case signal(Int)
    case perform(id: Int, modes: [LoopMode], actions: [ModelAction])
    case addCommonMode(LoopMode)
    case advance(ms: Int)
    case run(LoopMode, ms: Int, returnAfterSource: Bool)
    /// `stop()` with no run active: a no-op.
    case stop

    var description: String {
        switch self {
        case .addTimer(let ref, let spec, let mode, let script):
            let kind = spec.repeats ? "repeating every \(spec.intervalMs) ms" : "one-shot"
            let first = spec.fireAtOffsetMs.map { "fireAt now\($0 >= 0 ? "+" : "")\($0) ms" }
                ?? "first fire now+\(spec.intervalMs) ms"
            let tolerance = spec.toleranceMs > 0 ? ", tolerance \(spec.toleranceMs) ms" : ""
            return "\(ref) = timer(\(kind), \(first)\(tolerance)) added to \(mode)\(describe(script))"
        case .addObserver(let ref, let activities, let order, let repeats, let mode, let script):
            return "\(ref) = observer(\(activities), order \(order)\(repeats ? "" : ", repeats: false")) added to "
                + "\(mode)\(describe(script))"
        case .addSource(let ref, let order, let mode, let script):
            return "\(ref) = source(order \(order)) added to \(mode)\(describe(script))"
        case .add(let ref, let mode): return "add \(ref) to \(mode)"
        case .remove(let ref, let mode): return "remove \(ref) from \(mode)"
        case .invalidate(let ref): return "invalidate \(ref)"
        case .signal(let n): return "signal s\(n)"
        case .perform(let id, let modes, let actions):
            return ModelAction.perform(id: id, modes: modes, actions: actions).description
        case .addCommonMode(let mode): return "addCommonMode(\(mode))"
        case .advance(let ms): return "advance the clock \(ms) ms"
        case .run(let mode, let ms, let ras):
            return ModelAction.run(mode, ms: ms, returnAfterSource: ras).description
        case .stop: return "stop (no run active)"
        }
    }
}

/// One entry of the trace both the loop and the model record.
enum ModelEvent: Hashable, CustomStringConvertible {
    case observer(ItemRef, LoopActivity, LoopMode)
    case timer(ItemRef, atMs: Int, slotMs: Int)
    case source(Int)
    case block(Int)
    /// A run call returned; `depth` is the number of runs still active around it.
    case ran(LoopMode, RunResult, depth: Int)
    /// What `add` returned.
    case added(ItemRef, LoopMode, Bool)

    var description: String {
        switch self {
        case .observer(let ref, let activity, let mode): "\(ref) \(activity) in \(mode)"
        case .timer(let ref, let at, let slot): "\(ref) fired at \(at) ms (slot \(slot) ms)"
        case .source(let n): "s\(n) performed"
        case .block(let n): "b\(n) ran"
        case .ran(let mode, let result, let depth): "run(\(mode)) at depth \(depth) returned \(result)"
        case .added(let ref, let mode, let ok): "add \(ref) to \(mode) returned \(ok)"
        }
    }
}

/// What the test compares of one item after each step.
struct ModelItemState: Hashable, CustomStringConvertible {
    var isValid: Bool
    /// The modes `contains` answers `true` for, `common` included: bit `i` stands for `ModelModes.all[i]`.
    var modes: UInt8
    var fireDateMs: Int?
    var isSignalled: Bool?

    init(isValid: Bool, modes: UInt8, fireDateMs: Int? = nil, isSignalled: Bool? = nil) {
        (self.isValid, self.modes, self.fireDateMs, self.isSignalled) = (isValid, modes, fireDateMs, isSignalled)
    }

    var description: String {
        let names = ModelModes.all.indices.filter { self.modes & (1 << $0) != 0 }.map { ModelModes.all[$0].name }
        var text = "valid: \(self.isValid), in \(names)"
        if let fireDate = self.fireDateMs { text += ", fireDate \(fireDate) ms" }
        if let signalled = self.isSignalled { text += ", signalled: \(signalled)" }
        return text
    }
}

/// What the test compares after each step besides the trace.
struct ModelState: Hashable {
    var nowMs: Int
    /// Every item made so far, in the order the sequence made them.
    var items: [(ref: ItemRef, state: ModelItemState)]

    static func == (lhs: ModelState, rhs: ModelState) -> Bool {
        lhs.nowMs == rhs.nowMs && lhs.items.elementsEqual(rhs.items) { $0.ref == $1.ref && $0.state == $1.state }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(self.nowMs)
        for (ref, state) in self.items {
            hasher.combine(ref)
            hasher.combine(state)
        }
    }

    /// The differences from `other`, one line each.
    func differences(from other: ModelState, selfName: String, otherName: String) -> [String] {
        var lines: [String] = []
        if self.nowMs != other.nowMs {
            lines.append("now: \(selfName) \(self.nowMs) ms, \(otherName) \(other.nowMs) ms")
        }
        let mine = Dictionary(uniqueKeysWithValues: self.items.map { ($0.ref, $0.state) })
        let theirs = Dictionary(uniqueKeysWithValues: other.items.map { ($0.ref, $0.state) })
        for ref in Set(mine.keys).union(theirs.keys).sorted() where mine[ref] != theirs[ref] {
            lines.append("\(ref): \(selfName) {\(mine[ref].map(\.description) ?? "absent")}, "
                + "\(otherName) {\(theirs[ref].map(\.description) ?? "absent")}")
        }
        return lines
    }
}

/// The modes the generated sequences use: the two built-in ones, the common pseudo-mode and two custom modes.
enum ModelModes {
    static let modal: LoopMode = "modal"
    static let panel: LoopMode = "panel"
    /// Every mode `contains` is asked about.
    static let all: [LoopMode] = [.common, .default, modal, panel, .tracking]

    /// The bits of `ModelItemState.modes` for the modes in which `contains` holds.
    static func mask(_ contains: (LoopMode) -> Bool) -> UInt8 {
        // An index loop: a debug build spends most of this test's time in `enumerated()`'s generic metadata.
        var mask: UInt8 = 0
        var index = 0
        while index < Self.all.count {
            if contains(Self.all[index]) { mask |= 1 << index }
            index += 1
        }
        return mask
    }
}
