@testable import LoopKit

/// A reference model of the loop's contract (/work/shared/DESIGN.md), on virtual time, for the model-based test.
///
/// It is written from the contract, not from LoopKit's code: plain sets and lists scanned on every step, without
/// LoopKit's heaps, slot tables, candidate lists or state machine. Where the contract is silent, it follows LoopKit's
/// documented choice, and says so in a `Choice:` comment naming where that choice is written down. Times are whole
/// milliseconds since the clock's start.
final class LoopModel {
    class Item {
        let ref: ItemRef
        let script: ModelScript
        var modes: Set<LoopMode> = []
        var isValid = true
        /// The order of the first addition to the loop: breaks ties of `order` (observers) and orders back-fill.
        var sequence = 0
        var calls = 0

        init(_ ref: ItemRef, _ script: ModelScript) {
            self.ref = ref
            self.script = script
        }

        /// What `state()` reports besides validity and modes.
        var fireDateMs: Int? { nil }
        var signalled: Bool? { nil }
    }

    final class Timer: Item {
        let spec: TimerSpec
        var fireDate: Int?
        /// When the timer was last (re)scheduled in each of its modes: equal fire dates fire in that order (DESIGN:
        /// "in the order added"; Choice: a timer moved to a new slot goes behind the timers already there, as in CF
        /// and `TimerEntry.push`'s doc).
        var scheduled: [LoopMode: Int] = [:]
        var isFiring = false

        init(_ ref: ItemRef, _ spec: TimerSpec, _ script: ModelScript) {
            self.spec = spec
            super.init(ref, script)
        }

        override var fireDateMs: Int? { self.fireDate }
    }

    final class Observer: Item {
        let activities: LoopActivity
        let order: Int
        let repeats: Bool
        var isCalling = false

        init(_ ref: ItemRef, _ activities: LoopActivity, _ order: Int, _ repeats: Bool, _ script: ModelScript) {
            (self.activities, self.order, self.repeats) = (activities, order, repeats)
            super.init(ref, script)
        }
    }

    final class Source: Item {
        let order: Int
        var isSignalled = false
        /// Where the source stands among the signalled ones ("then first signalled first"), once the loop has
        /// seen its signal; `nil` before that and once it ran.
        var signalRank: Int?

        init(_ ref: ItemRef, _ order: Int, _ script: ModelScript) {
            self.order = order
            super.init(ref, script)
        }

        override var signalled: Bool? { self.isSignalled }
    }

    /// A due timer a pass took: its slot, and when it had been (re)scheduled in the mode then.
    struct BatchEntry {
        let timer: Timer
        let slot: Int
        let scheduled: Int
    }

    struct Block {
        let id: Int
        let number: Int
        let modes: [LoopMode]
        let actions: [ModelAction]
        /// A drain point has seen the block (it ran, or waits for another mode).
        var seen = false
    }

    private(set) var now = 0
    private(set) var events: [ModelEvent] = []
    private var items: [ItemRef: Item] = [:]
    /// The items in the order they were made.
    private var made: [Item] = []
    private var timers: [Timer] = []
    private var observers: [Observer] = []
    private var sources: [Source] = []
    private var commonModes: Set<LoopMode> = [.default, .tracking]
    private var commonItems: Set<ItemRef> = []
    private var runs: [LoopMode] = []
    /// The runs (by depth: 1 is the outermost) a stop was made for and that have not ended since. A stop belongs to
    /// the run innermost when it was made, not to one nested later (StopAndNesting.md); a run that ends for another
    /// reason passes its stop to the run outside it, and the outermost spends it.
    private var stoppedRuns: Set<Int> = []
    private var blocks: [Block] = []
    /// Signals the loop has not looked at yet (a pass looks at them when it performs signalled sources).
    private var unseenSignals: [Source] = []
    /// The due timers a pass took and has not fired yet, with their slots, per mode: a run nested in one of their
    /// callbacks, in the same mode, fires the rest first (StopAndNesting.md, "What other items do ...").
    private var batches: [LoopMode: [BatchEntry]] = [:]
    private var counter = 0

    private func next() -> Int {
        self.counter += 1
        return self.counter
    }

    // MARK: Top-level operations

    func apply(_ op: ModelOp) {
        switch op {
        case .addTimer(let ref, let spec, let mode, let script):
            let timer = Timer(ref, spec, script)
            if let offset = spec.fireAtOffsetMs { timer.fireDate = self.now + offset }
            self.timers.append(timer)
            self.add(self.made(timer), to: mode)
        case .addObserver(let ref, let activities, let order, let repeats, let mode, let script):
            // Kept sorted by order, then by when first added (which is now): the order observers are called in.
            let observer = Observer(ref, activities, order, repeats, script)
            let index = self.observers.firstIndex { $0.order > order } ?? self.observers.endIndex
            self.observers.insert(observer, at: index)
            self.add(self.made(observer), to: mode)
        case .addSource(let ref, let order, let mode, let script):
            let source = Source(ref, order, script)
            self.sources.append(source)
            self.add(self.made(source), to: mode)
        case .add(let ref, let mode):
            if let item = self.items[ref] { self.add(item, to: mode) }
        case .remove(let ref, let mode):
            if let item = self.items[ref] { self.remove(item, from: mode) }
        case .invalidate(let ref):
            if let item = self.items[ref] { self.invalidate(item) }
        case .signal(let n):
            self.signal(n)
        case .perform(let id, let modes, let actions):
            self.blocks.append(Block(id: id, number: self.next(), modes: modes, actions: actions))
        case .addCommonMode(let mode):
            // Back-fill: every item already in `common` joins the new member (Choice: in the order they were first
            // added, `Loop.addCommonMode`'s order).
            guard self.commonModes.insert(mode).inserted else { return }
            for ref in self.commonItems.sorted(by: { self.items[$0]!.sequence < self.items[$1]!.sequence }) {
                self.attach(self.items[ref]!, toRealMode: mode)
            }
        case .advance(let ms):
            self.now += ms
        case .run(let mode, let ms, let ras):
            let result = self.run(mode, deadline: self.now + ms, returnAfterSource: ras)
            self.events.append(.ran(mode, result, depth: self.runs.count))
        case .stop:
            self.stop()
        }
    }

    func state() -> ModelState {
        let items = self.made.map { item in
            let modes = ModelModes.mask { mode in
                mode == .common ? self.commonItems.contains(item.ref) : item.modes.contains(mode)
            }
            let state = ModelItemState(isValid: item.isValid, modes: modes, fireDateMs: item.fireDateMs,
                                       isSignalled: item.signalled)
            return (item.ref, state)
        }
        return ModelState(nowMs: self.now, items: items)
    }

    // MARK: Items and modes

    private func made(_ item: Item) -> Item {
        self.items[item.ref] = item
        self.made.append(item)
        return item
    }

    private func add(_ item: Item, to mode: LoopMode) {
        // Choice: `add` of an invalidated item adds nothing and returns false (Loop+Items.swift, as CF).
        self.events.append(.added(item.ref, mode, item.isValid))
        guard item.isValid else { return }
        if item.sequence == 0 { item.sequence = self.next() }
        if let timer = item as? Timer, timer.fireDate == nil {
            timer.fireDate = self.now + timer.spec.intervalMs  // first fire at now + interval, never at once
        }
        guard mode == .common else {
            self.attach(item, toRealMode: mode)
            return
        }
        self.commonItems.insert(item.ref)
        for member in self.commonModes { self.attach(item, toRealMode: member) }
    }

    private func attach(_ item: Item, toRealMode mode: LoopMode) {
        guard item.modes.insert(mode).inserted else { return }
        if let timer = item as? Timer {
            timer.scheduled[mode] = self.next()
        }
        if let source = item as? Source, source.isSignalled {
            self.unseenSignals.append(source)  // a signal made while it was in no mode is kept (LoopSource's doc)
        }
    }

    private func remove(_ item: Item, from mode: LoopMode) {
        guard mode == .common else {
            item.modes.remove(mode)
            return
        }
        // Removing from `common` removes an item added to `common` from every member of the common set; an item added
        // to the members one by one stays in them (Modes.md, as CFRunLoopRemoveSource with kCFRunLoopCommonModes).
        guard self.commonItems.remove(item.ref) != nil else { return }
        item.modes.subtract(self.commonModes)
    }

    private func invalidate(_ item: Item) {
        guard item.isValid else { return }
        item.isValid = false
        item.modes = []
        self.commonItems.remove(item.ref)
        if let source = item as? Source {
            source.signalRank = nil
            self.unseenSignals.removeAll { $0 === source }
        }
    }

    private func signal(_ n: Int) {
        guard let source = self.items[.source(n)] as? Source, source.isValid, !source.isSignalled else { return }
        source.isSignalled = true  // several signals before the callback coalesce into one call
        self.unseenSignals.append(source)
    }

    private func stop() {
        if !self.runs.isEmpty { self.stoppedRuns.insert(self.runs.count) }  // a no-op while not running (as in CF)
    }

    // MARK: One run

    private func isEmpty(_ mode: LoopMode) -> Bool {
        // Sources, timers and pending blocks keep a mode alive; observers do not.
        !self.timers.contains { $0.modes.contains(mode) } && !self.sources.contains { $0.modes.contains(mode) }
            && !self.blocks.contains { self.admits($0, mode) }
    }

    private func admits(_ block: Block, _ mode: LoopMode) -> Bool {
        block.modes.contains(mode) || (block.modes.contains(.common) && self.commonModes.contains(mode))
    }

    private func takeStop() -> Bool {
        self.stoppedRuns.remove(self.runs.count) != nil
    }

    func run(_ mode: LoopMode, deadline: Int, returnAfterSource: Bool) -> RunResult {
        if self.isEmpty(mode) { return .finished }  // at once, no observer called
        self.runs.append(mode)
        self.notify(.entry, mode)
        // Choice: a stop made for this run before its first pass (by an `entry` observer) ends it right after `entry`,
        // as CF checks its stop flag before the first pass.
        var result: RunResult? = self.takeStop() ? .stopped : nil
        while result == nil {
            result = self.pass(mode, deadline: deadline, returnAfterSource: returnAfterSource)
        }
        self.notify(.exit, mode)
        if self.stoppedRuns.remove(self.runs.count) != nil && self.runs.count > 1 {
            self.stoppedRuns.insert(self.runs.count - 1)  // a stop that lost to another result passes outward
        }
        self.runs.removeLast()
        return result!
    }

    private func pass(_ mode: LoopMode, deadline: Int, returnAfterSource: Bool) -> RunResult? {
        self.notify(.beforeTimers, mode)
        self.notify(.beforeSources, mode)
        self.drainBlocks(mode)
        let handled = self.performSignalledSources(mode, returnAfterSource: returnAfterSource)
        self.drainBlocks(mode)
        if !handled && self.now < deadline && !self.isEmpty(mode) {
            self.notify(.beforeWaiting, mode)
            self.sleep(mode, deadline: deadline)
            self.notify(.afterWaiting, mode)
        }
        self.fireDueTimers(mode)
        self.drainBlocks(mode)
        // Precedence: handledSource, timedOut, stopped, finished.
        if returnAfterSource && handled { return .handledSource }
        if self.now >= deadline { return .timedOut }
        if self.takeStop() { return .stopped }
        if self.isEmpty(mode) { return .finished }
        return nil
    }

    /// Sleeps until the mode's next timer wake or the deadline, unless something is already waiting: a block or a
    /// signal the loop has not seen (a perform or a signal wakes a sleeping loop at once, even for another mode:
    /// ThePass.md's one exception), a block of this mode, a signal a nested run saw for a source of this mode and did
    /// not perform, a stop, or a timer of a due batch that can still fire.
    private func sleep(_ mode: LoopMode, deadline: Int) {
        // A `beforeWaiting` observer may have emptied the mode: nothing could end the sleep, and the pass goes on to
        // finish the run (DESIGN §2: "also when the mode becomes empty").
        if self.isEmpty(mode) { return }
        let hasSeenSignal = self.sources.contains {
            $0.signalRank != nil && $0.isValid && $0.isSignalled && $0.modes.contains(mode)
        }
        if !self.unseenSignals.isEmpty || hasSeenSignal
            || self.blocks.contains(where: { !$0.seen || self.admits($0, mode) })
            || self.stoppedRuns.contains(self.runs.count) || (self.batches[mode] ?? []).contains(where: { self.canFire($0, in: mode) }) {
            return
        }
        self.now = max(self.now, min(self.timerWake(mode) ?? deadline, deadline))
    }

    /// When to wake for the mode's timers. Choice (`TimerQueue.coalescedWakeTime`'s doc): the latest fire date that
    /// is not after the earliest `fireDate + tolerance`, so that one wake-up serves every timer it can without
    /// making any later than its tolerance allows. A timer whose callback is running is not waited for.
    private func timerWake(_ mode: LoopMode) -> Int? {
        let pending = self.timers.filter { $0.modes.contains(mode) && !$0.isFiring && $0.fireDate != nil }
        guard let latestAllowed = pending.map({ $0.fireDate! + $0.spec.keptToleranceMs }).min() else { return nil }
        return pending.map { $0.fireDate! }.filter { $0 <= latestAllowed }.max()
    }

    // MARK: Callouts

    private func notify(_ activity: LoopActivity, _ mode: LoopMode) {
        let observers = self.observers.filter { $0.activities.contains(activity) && $0.modes.contains(mode) }
        for observer in observers {
            // One removed or invalidated by an earlier callback is not called; none is re-entered.
            guard observer.modes.contains(mode), observer.isValid, !observer.isCalling else { continue }
            observer.isCalling = true
            self.events.append(.observer(observer.ref, activity, mode))
            self.call(observer)
            observer.isCalling = false
            if !observer.repeats { self.invalidate(observer) }
        }
    }

    /// Runs the blocks queued before the drain began that the mode admits, first queued first; a block queued
    /// during the drain waits for the next drain point.
    private func drainBlocks(_ mode: LoopMode) {
        for index in self.blocks.indices { self.blocks[index].seen = true }
        guard let limit = self.blocks.last?.number else { return }
        // Choice: `.common` in a block's modes means the common set when the drain began (Loop+Perform.swift).
        let members = self.commonModes
        while let index = self.blocks.firstIndex(where: {
            $0.number <= limit && ($0.modes.contains(mode) || ($0.modes.contains(.common) && members.contains(mode)))
        }) {
            let block = self.blocks.remove(at: index)
            self.events.append(.block(block.id))
            self.perform(block.actions)
        }
    }

    /// Performs the mode's signalled sources, lower order first, then first signalled first; with
    /// `returnAfterSource` only the first, the others staying signalled.
    private func performSignalledSources(_ mode: LoopMode, returnAfterSource: Bool) -> Bool {
        for source in self.unseenSignals where source.signalRank == nil && source.isValid {
            source.signalRank = self.next()
        }
        self.unseenSignals = []
        let ready = self.sources.filter { $0.signalRank != nil && $0.modes.contains(mode) }
            .sorted { ($0.order, $0.signalRank!) < ($1.order, $1.signalRank!) }
        var handled = false
        for source in ready {
            // One that a run nested in an earlier callback performed, or that an earlier callback removed or
            // invalidated, is skipped.
            guard source.isValid, source.isSignalled, source.signalRank != nil, source.modes.contains(mode) else {
                continue
            }
            source.signalRank = nil
            source.isSignalled = false  // cleared before the callback, so that it may signal itself again
            self.events.append(.source(source.ref.number))
            self.call(source)
            handled = true
            if returnAfterSource { break }
        }
        return handled
    }

    /// Fires the mode's due timers, earliest slot first, ties in scheduling order; all are taken before any fires,
    /// so one made due by a callback waits for the next pass. The rest of an outer pass's batch goes first.
    ///
    /// Choice: "now" is read once, when the step begins (STYLE.md rule 10, "one now per pass"), so a callback of the
    /// outer batch that works past a slot does not make that slot due in this step.
    private func fireDueTimers(_ mode: LoopMode) {
        let now = self.now
        self.fireBatch(mode)
        let due = self.timers.filter { $0.modes.contains(mode) && !$0.isFiring && $0.fireDate! <= now }
            .sorted { ($0.fireDate!, $0.scheduled[mode]!) < ($1.fireDate!, $1.scheduled[mode]!) }
        self.batches[mode] = due.map { BatchEntry(timer: $0, slot: $0.fireDate!, scheduled: $0.scheduled[mode]!) }
        self.fireBatch(mode)
    }

    private func fireBatch(_ mode: LoopMode) {
        while let entry = self.batches[mode]?.first {
            self.batches[mode]!.removeFirst()
            guard self.canFire(entry, in: mode) else { continue }
            let (timer, slot) = (entry.timer, entry.slot)
            timer.isFiring = true
            self.events.append(.timer(timer.ref, atMs: self.now, slotMs: slot))
            self.call(timer)
            timer.isFiring = false
            guard timer.isValid else { continue }
            guard timer.spec.repeats else {
                self.invalidate(timer)
                continue
            }
            // Phase-keeping: the first slot of the original grid after now; missed slots are skipped.
            var nextSlot = slot + timer.spec.intervalMs
            while nextSlot <= self.now { nextSlot += timer.spec.intervalMs }
            timer.fireDate = nextSlot
            for mode in timer.modes { timer.scheduled[mode] = self.next() }
        }
    }

    /// Whether a batch entry still fires. Once per slot: a nested run of another mode may have fired the timer
    /// already (it was rescheduled); one removed, invalidated or already firing does not fire; and one added again
    /// by a callback waits for the next pass (Choice: `Loop.fireDueTimers`' doc, "a timer added or moved by a
    /// callback waits for the next pass"), unless a run nested in that callback reaches it first.
    private func canFire(_ entry: BatchEntry, in mode: LoopMode) -> Bool {
        let timer = entry.timer
        return timer.isValid && timer.modes.contains(mode) && timer.scheduled[mode] == entry.scheduled
            && !timer.isFiring
    }

    private func call(_ item: Item) {
        let actions = item.script[item.calls] ?? []
        item.calls += 1
        self.perform(actions)
    }

    private func perform(_ actions: [ModelAction]) {
        for action in actions {
            switch action {
            case .stop:
                self.stop()
            case .run(let mode, let ms, let ras):
                guard self.runs.count < ModelAction.maxRunDepth else { continue }
                let result = self.run(mode, deadline: self.now + ms, returnAfterSource: ras)
                self.events.append(.ran(mode, result, depth: self.runs.count))
            case .signal(let n):
                self.signal(n)
            case .perform(let id, let modes, let actions):
                self.blocks.append(Block(id: id, number: self.next(), modes: modes, actions: actions))
            case .invalidate(let ref):
                if let item = self.items[ref] { self.invalidate(item) }
            case .add(let ref, let mode):
                if let item = self.items[ref] { self.add(item, to: mode) }
            case .remove(let ref, let mode):
                if let item = self.items[ref] { self.remove(item, from: mode) }
            case .work(let ms):
                self.now += ms
            }
        }
    }
}
