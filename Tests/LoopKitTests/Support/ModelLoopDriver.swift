@testable import LoopKit

/// Plays a generated sequence (ModelScript.swift) on a real loop on a `ManualLoopClock`, and reports the same trace
/// and state as `LoopModel`. Loop thread only: it is created, used and finished on the test's thread.
// @unchecked Sendable: the items' callbacks capture it, and they run on the loop's thread, which is this one.
final class ModelLoopDriver: @unchecked Sendable {
    let clock = ManualLoopClock()
    let loop: Loop
    private let start: LoopInstant
    private(set) var events: [ModelEvent] = []
    private var timers: [ItemRef: LoopTimer] = [:]
    private var observers: [ItemRef: LoopObserver] = [:]
    private var sources: [ItemRef: LoopSource] = [:]
    /// The items in the order they were made.
    private var made: [ItemRef] = []
    private var scripts: [ItemRef: ModelScript] = [:]
    private var calls: [ItemRef: Int] = [:]
    private var depth = 0

    init() throws {
        self.start = self.clock.now
        self.loop = try Loop(clock: self.clock)
    }

    /// Ends the loop and lets go of every item (their callbacks capture the driver).
    func finish() {
        self.loop.invalidate()
        self.timers = [:]
        self.observers = [:]
        self.sources = [:]
    }

    private func ms(_ instant: LoopInstant) -> Int {
        Int((instant - self.start) / .milliseconds(1))
    }

    private func instant(ms: Int) -> LoopInstant {
        self.start + .milliseconds(ms)
    }

    private var nowMs: Int { self.ms(self.clock.now) }

    // MARK: Operations

    func apply(_ op: ModelOp) {
        switch op {
        case .addTimer(let ref, let spec, let mode, let script):
            self.scripts[ref] = script
            self.made.append(ref)
            let callback: @Sendable (LoopTimer) -> Void = { [weak self] timer in self?.fired(ref, timer) }
            let tolerance = Duration.milliseconds(spec.toleranceMs)
            if let offset = spec.fireAtOffsetMs {
                self.timers[ref] = LoopTimer(fireAt: self.instant(ms: self.nowMs + offset),
                                             interval: .milliseconds(spec.intervalMs), repeats: spec.repeats,
                                             tolerance: tolerance, callback)
            } else {
                self.timers[ref] = LoopTimer(interval: .milliseconds(spec.intervalMs), repeats: spec.repeats,
                                             tolerance: tolerance, callback)
            }
            self.add(ref, to: mode)
        case .addObserver(let ref, let activities, let order, let repeats, let mode, let script):
            self.scripts[ref] = script
            self.made.append(ref)
            self.observers[ref] = LoopObserver(activities: activities, repeats: repeats, order: order) {
                [weak self] _, activity in self?.observed(ref, activity)
            }
            self.add(ref, to: mode)
        case .addSource(let ref, let order, let mode, let script):
            self.scripts[ref] = script
            self.made.append(ref)
            self.sources[ref] = LoopSource(order: order) { [weak self] _ in self?.performed(ref) }
            self.add(ref, to: mode)
        case .add(let ref, let mode):
            self.add(ref, to: mode)
        case .remove(let ref, let mode):
            self.remove(ref, from: mode)
        case .invalidate(let ref):
            self.invalidate(ref)
        case .signal(let n):
            self.sources[.source(n)]?.signal()
        case .perform(let id, let modes, let actions):
            self.perform(id, modes, actions)
        case .addCommonMode(let mode):
            self.loop.addCommonMode(mode)
        case .advance(let ms):
            self.clock.advance(by: .milliseconds(ms))
        case .run(let mode, let ms, let ras):
            self.run(mode, ms: ms, returnAfterSource: ras)
        case .stop:
            self.loop.stop()
        }
    }

    func state() -> ModelState {
        let items = self.made.map { ref -> (ref: ItemRef, state: ModelItemState) in
            if let timer = self.timers[ref] {
                let modes = ModelModes.mask { self.loop.contains(timer, inMode: $0) }
                let fireDate = timer.fireDate.map(self.ms)
                return (ref, ModelItemState(isValid: timer.isValid, modes: modes, fireDateMs: fireDate))
            }
            if let observer = self.observers[ref] {
                let modes = ModelModes.mask { self.loop.contains(observer, inMode: $0) }
                return (ref, ModelItemState(isValid: observer.isValid, modes: modes))
            }
            let source = self.sources[ref]!
            let modes = ModelModes.mask { self.loop.contains(source, inMode: $0) }
            return (ref, ModelItemState(isValid: source.isValid, modes: modes, isSignalled: source.isSignalled))
        }
        return ModelState(nowMs: self.nowMs, items: items)
    }

    private func add(_ ref: ItemRef, to mode: LoopMode) {
        var added: Bool?
        if let timer = self.timers[ref] { added = self.loop.add(timer, forMode: mode) }
        if let observer = self.observers[ref] { added = self.loop.add(observer, forMode: mode) }
        if let source = self.sources[ref] { added = self.loop.add(source, forMode: mode) }
        if let added { self.events.append(.added(ref, mode, added)) }
    }

    private func remove(_ ref: ItemRef, from mode: LoopMode) {
        if let timer = self.timers[ref] { self.loop.remove(timer, forMode: mode) }
        if let observer = self.observers[ref] { self.loop.remove(observer, forMode: mode) }
        if let source = self.sources[ref] { self.loop.remove(source, forMode: mode) }
    }

    private func invalidate(_ ref: ItemRef) {
        self.timers[ref]?.invalidate()
        self.observers[ref]?.invalidate()
        self.sources[ref]?.invalidate()
    }

    private func run(_ mode: LoopMode, ms: Int, returnAfterSource: Bool) {
        self.depth += 1
        let result = self.loop.run(mode: mode, before: self.clock.now + .milliseconds(ms),
                                   returnAfterSourceHandled: returnAfterSource)
        self.depth -= 1
        self.events.append(.ran(mode, result, depth: self.depth))
    }

    private func perform(_ id: Int, _ modes: [LoopMode], _ actions: [ModelAction]) {
        self.loop.perform(inModes: modes) { [weak self] in
            guard let self else { return }
            self.events.append(.block(id))
            self.perform(actions)
        }
    }

    // MARK: Callbacks

    private func fired(_ ref: ItemRef, _ timer: LoopTimer) {
        self.events.append(.timer(ref, atMs: self.nowMs, slotMs: timer.fireDate.map(self.ms) ?? -1))
        self.called(ref)
    }

    private func observed(_ ref: ItemRef, _ activity: LoopActivity) {
        self.events.append(.observer(ref, activity, self.loop.currentMode ?? "none"))
        self.called(ref)
    }

    private func performed(_ ref: ItemRef) {
        self.events.append(.source(ref.number))
        self.called(ref)
    }

    private func called(_ ref: ItemRef) {
        let call = self.calls[ref, default: 0]
        self.calls[ref] = call + 1
        self.perform(self.scripts[ref]?[call] ?? [])
    }

    private func perform(_ actions: [ModelAction]) {
        for action in actions {
            switch action {
            case .stop:
                self.loop.stop()
            case .run(let mode, let ms, let ras):
                guard self.depth < ModelAction.maxRunDepth else { continue }
                self.run(mode, ms: ms, returnAfterSource: ras)
            case .signal(let n):
                self.sources[.source(n)]?.signal()
            case .perform(let id, let modes, let actions):
                self.perform(id, modes, actions)
            case .invalidate(let ref):
                self.invalidate(ref)
            case .add(let ref, let mode):
                self.add(ref, to: mode)
            case .remove(let ref, let mode):
                self.remove(ref, from: mode)
            case .work(let ms):
                self.clock.advance(by: .milliseconds(ms))
            }
        }
    }
}
