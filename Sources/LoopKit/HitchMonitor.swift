/// Measures what Instruments measures: how long each pass of a loop is busy, frame hitches, and hangs.
///
/// The monitor adds two observers to the loop (in `.common` by default, or the modes given): one, ordered first,
/// at `entry` and `afterWaiting`, starts a busy stretch; one, ordered last, at `beforeWaiting` and `exit`, ends it.
/// Attached to a display link, it also checks each frame: the frame's work is the busy stretch in which the link's
/// callback ran, and if that stretch ends after the frame's `targetTimestamp`, the frame is a hitch by that much. A
/// frame the link skipped is a hitch too when a busy stretch that began in one of the link's modes before the frame
/// fell due went on past the frame's target: the loop's other work (an input handler, a timer) kept it from running,
/// late by the stretch's end less its target (a run of skipped frames is one hitch, as an overrun is; a stretch charged
/// for a late callback already is not charged again).
/// Its cost is a clock read and a lock per observer call; while one is attached, the loop also adds up how long each
/// mode runs (a clock read at every run's entry and exit), for the ratio's span. The loop also tells it of every
/// sleep, in any mode: a run of a mode it does not watch, nested in a callback of one it watches, ends the stretch
/// when it sleeps and starts it again when it wakes, so that its sleep is not counted busy, and its work is.
///
/// Every member is safe from any thread. Hang handlers run on the loop's thread, at the end of the busy stretch; the
/// time they take, a run of the loop nested in one included, counts in no busy stretch.
public final class HitchMonitor: Sendable {
    private struct State {
        var report = HitchReport()
        var busySince: LoopInstant?
        /// The mode the stretch under way began in (after a nested run that ended it, the mode it returned to).
        var busyMode = LoopMode.default
        var pendingTargets: [LoopInstant] = []
        var isWatching = true
        /// When the monitor began, or was reset: the span, and the frames judged, start there.
        var countsFrom: UInt64 = 0
        /// Per link, `Loop.modeTimes.timeOutside` of the link's modes at its last frame.
        var timeOutsideAtLastFrame: [ObjectIdentifier: UInt64] = [:]
        /// The end of the time the frames seen so far cover (`addToFrameSpan`).
        var coveredUntil: UInt64 = 0
        /// Set while hang handlers run: what a run of the loop nested in one does (busy stretches, frames) counts in
        /// nothing.
        var isCallingHangHandlers = false
        var hangHandlers: [@Sendable (HangEvent) -> Void] = []
        /// The last busy stretches that ended, oldest first, each with the mode it began in and whether frames late in
        /// it were charged already: a frame that fell due and was skipped while one lasted was skipped for it. Between
        /// a frame falling due and the link's next callback few stretches end (the one that kept it, a run's first
        /// look, a nested run's).
        var recentStretches: [Stretch] = {
            var stretches: [Stretch] = []
            stretches.reserveCapacity(HitchMonitor.stretchesKept)
            return stretches
        }()

        /// `instant`, or when the monitor began or was reset if later: a frame due before is in no span, and no hitch.
        func spanned(_ instant: LoopInstant) -> LoopInstant {
            max(instant, LoopInstant(nanoseconds: self.countsFrom))
        }

        /// Keeps a busy stretch that ended, forgetting the oldest beyond `stretchesKept` (no allocation after the
        /// first). One of no length is not kept: no frame's target lies inside it.
        mutating func keep(_ stretch: Stretch) {
            guard stretch.end > stretch.start else { return }
            if self.recentStretches.count == HitchMonitor.stretchesKept {
                self.recentStretches.removeFirst()
            }
            self.recentStretches.append(stretch)
        }

        /// Adds the time `frame` covers to the span: from its timestamp back over its skipped frames, to its target,
        /// less what earlier frames (of any attached link) covered, and less `notTicking`, the time since the link's
        /// previous frame that the loop ran a mode the link is not in. So time paused, when a resumed link's first
        /// frame counts only the frames skipped since, is left out, and so is the time before the monitor began or was
        /// reset.
        mutating func addToFrameSpan(_ frame: DisplayFrame, notTicking: UInt64) {
            let timestamp = frame.timestamp.nanoseconds
            let target = frame.targetTimestamp.nanoseconds
            let (skippedTime, overflow) = (target &- timestamp).multipliedReportingOverflow(
                by: UInt64(max(0, frame.skippedFrames)))
            let from = max(timestamp - min(overflow ? .max : skippedTime, timestamp), self.countsFrom,
                           self.coveredUntil)
            if target > from && target - from > notTicking {
                self.report.frameSpan += .nanoseconds(Int64(clamping: target - from - notTicking))
            }
            self.coveredUntil = max(self.coveredUntil, target)
        }
    }

    /// A busy stretch that ended (`State.recentStretches`).
    private struct Stretch {
        let start: LoopInstant
        let end: LoopInstant
        let mode: LoopMode
        var isCharged: Bool
    }

    private static let stretchesKept = 4
    /// How many links' `timeOutsideAtLastFrame` a monitor keeps before it starts over (each link's next frame then
    /// leaves out nothing, as a first frame does).
    private static let linksFollowed = 64

    /// The loop watched.
    public let loop: Loop
    /// A busy stretch longer than this is a hang.
    public let hangThreshold: Duration

    private let state = LoopLock(State())
    private let observers: [LoopObserver]

    /// Starts watching `loop` in `modes`.
    ///
    /// - Parameters:
    ///   - loop: The loop to watch.
    ///   - modes: Where to watch; `.common` (the default) covers default and tracking.
    ///   - hangThreshold: The busy stretch that counts as a hang; 250 ms by default.
    /// - Precondition: `hangThreshold` is greater than zero.
    public init(loop: Loop, modes: [LoopMode] = [.common], hangThreshold: Duration = .milliseconds(250)) {
        loopPrecondition(hangThreshold > .zero, "HitchMonitor(loop:modes:hangThreshold:): the threshold must be positive")
        self.loop = loop
        self.hangThreshold = hangThreshold
        var observers: [LoopObserver] = []
        let box = WeakMonitor()
        observers.append(LoopObserver(activities: [.entry, .afterWaiting], order: .min) { _, activity in
            box.monitor?.busyStarts(entering: activity == .entry)
        })
        observers.append(LoopObserver(activities: [.beforeWaiting, .exit], order: .max) { _, activity in
            box.monitor?.busyEnds(exiting: activity == .exit)
        })
        for observer in observers {
            observer.isInstrumentation = true
        }
        self.observers = observers
        box.monitor = self
        let start = loop.now
        self.state.withLock { $0.countsFrom = start.nanoseconds }
        // Told of every sleep, in every mode, too: see `loopWillSleep`.
        loop.onLoopThread { [weak self] loop in
            guard let self, self.state.withLock({ $0.isWatching }) else { return }  // invalidated or freed before
            loop.attach(self)
        }
        for observer in observers {
            for mode in modes {
                loop.add(observer, forMode: mode)
            }
        }
    }

    /// Checks the frames of `link` for hitches; attaching to a link again changes nothing. Any thread. The link holds
    /// the monitor weakly: keep a reference.
    ///
    /// - Precondition: `link` ticks on the monitor's loop (checked at its first frame).
    public func attach(to link: LoopDisplayLink) {
        link.addMonitor(self)
    }

    /// What was measured so far. Any thread.
    public var report: HitchReport {
        self.state.withLock { $0.report }
    }

    /// Calls `handler` on the loop's thread for each hang, when it ends. Any thread.
    ///
    /// After `invalidate()` this does nothing: no hang is measured any more, and `handler` is let go of at once.
    public func onHang(_ handler: @escaping @Sendable (HangEvent) -> Void) {
        self.state.withLock { state in
            guard state.isWatching else { return }
            state.hangHandlers.append(handler)
        }
    }

    /// Forgets what was measured (frames in flight included). Any thread.
    public func reset() {
        let now = self.loop.now
        self.state.withLock { state in
            state.report = HitchReport()
            state.pendingTargets = []
            state.recentStretches.removeAll(keepingCapacity: true)
            state.countsFrom = now.nanoseconds
            state.coveredUntil = 0
            if state.busySince != nil {
                state.busySince = now  // a stretch under way counts from here
            }
        }
    }

    /// Stops watching: removes the observers, lets go of the hang handlers, and the display links it is attached to
    /// let go of it at their next frame. Any thread.
    public func invalidate() {
        let handlers = self.state.withLock { state in
            state.isWatching = false
            defer { state.hangHandlers = [] }
            return state.hangHandlers
        }
        withExtendedLifetime(handlers) {}  // let go of here, after the lock: a capture's deinit is user code
        for observer in self.observers {
            observer.invalidate()
        }
        let identity = ObjectIdentifier(self)
        self.loop.onLoopThread { loop in
            loop.detachMonitor(identity)
        }
    }

    deinit {
        self.invalidate()
    }

    // MARK: Called on the loop's thread

    private func busyStarts(entering: Bool) {
        let now = self.loop.now
        let mode = self.loop.currentMode ?? .default
        // An outermost run starts afresh: nothing before it can still be busy.
        let isOutermostEntry = entering && self.loop.runningModes.count == 1
        self.state.withLock { state in
            guard state.isWatching, !state.isCallingHangHandlers else { return }  // invalidated: the report stays
            if state.busySince == nil || isOutermostEntry {
                state.busySince = now
                state.busyMode = mode
            }
        }
    }

    private func busyEnds(exiting: Bool) {
        // The loop's own depth, not one counted from the monitor's creation: a monitor made inside a callback, or
        // from another thread while the loop runs, starts in the middle of a run. `exit` comes before the run leaves.
        // Leaving a nested run returns to a callback of the run around it: still busy if a run the monitor watches is
        // on the stack (whatever the mode of the one around it: its next sleep ends the stretch, `loopWillSleep`).
        let runningModes = self.loop.runningModes
        let staysBusy = exiting && runningModes.dropLast().contains(where: self.watches)
        self.endStretch(staysBusy: staysBusy, resumingIn: runningModes.dropLast().last)
    }

    /// The loop is about to sleep, in any mode. In a mode the monitor watches, `beforeWaiting` has ended the stretch
    /// already; in another, nested in a watched run's callback, this ends it, so that the sleep is not counted busy.
    func loopWillSleep() {
        self.endStretch(staysBusy: false)
    }

    /// The loop has woken, in any mode: busy again if a run the monitor watches is on the stack (in a watched mode,
    /// `afterWaiting` starts the same stretch).
    func loopDidWake() {
        guard self.loop.runningModes.contains(where: self.watches) else { return }
        self.busyStarts(entering: false)
    }

    /// Whether the monitor's observers are in `mode` (the common modes expanded). Loop thread.
    private func watches(_ mode: LoopMode) -> Bool {
        self.observers.first.map { $0.modes.contains(mode) } ?? false
    }

    /// Ends the busy stretch under way, if any: counts it, judges the frames that ran in it, and calls the hang
    /// handlers if it was a hang. `staysBusy`: the loop goes on working (a nested run returned to a callback), so a
    /// stretch starts again at once.
    private func endStretch(staysBusy: Bool, resumingIn resumedMode: LoopMode? = nil) {
        let now = self.loop.now
        let mode = self.loop.currentMode ?? .default
        let runningModes = self.loop.runningModes
        let (hang, handlers) = self.state.withLock { state -> (HangEvent?, [@Sendable (HangEvent) -> Void]) in
            guard state.isWatching, !state.isCallingHangHandlers else { return (nil, []) }
            var hang: HangEvent?
            if let start = state.busySince {
                let busy = now - start
                state.report.busyPasses += 1
                state.report.longestBusyPass = max(state.report.longestBusyPass, busy)
                if busy > self.hangThreshold {
                    state.report.hangs += 1
                    hang = HangEvent(start: start, duration: busy, mode: mode)
                }
            }
            // The frames late in one stretch are late at once: the time is charged once, from the earliest late
            // target to the end, not once per frame (frames queued behind a long stretch, or two links' frames for one
            // target, would add up to more hitch time than time passed). Each late target is one hitch.
            var earliestLate: LoopInstant?
            for (index, target) in state.pendingTargets.enumerated() where now > target {
                guard !state.pendingTargets[..<index].contains(target) else { continue }
                state.report.hitches += 1
                earliestLate = min(earliestLate ?? target, target)
            }
            if let earliestLate {
                state.report.totalHitchTime += now - earliestLate
            }
            if let start = state.busySince {
                // A run the monitor does not watch may have begun the stretch and returned since, unseen: the mode the
                // work went on in is then the one running now.
                let stretchMode = runningModes.contains(state.busyMode) ? state.busyMode : mode
                state.keep(Stretch(start: start, end: now, mode: stretchMode, isCharged: earliestLate != nil))
            }
            if staysBusy {
                state.busyMode = resumedMode ?? mode
            }
            state.pendingTargets.removeAll(keepingCapacity: true)
            state.busySince = staysBusy ? now : nil
            state.isCallingHangHandlers = hang != nil
            return (hang, hang == nil ? [] : state.hangHandlers)
        }
        guard let hang else { return }
        for handler in handlers {
            self.loop.callOut(.hangHandler) { handler(hang) }
        }
        // Nothing a handler did counts (a run of the loop nested in one, its frames included: see
        // `isCallingHangHandlers`); what follows is what followed before the handlers ran: a sleep or the run's exit
        // (nothing busy), or the rest of a callback (busy from now).
        let resumed = self.loop.now
        self.state.withLock { state in
            state.isCallingHangHandlers = false
            state.busySince = staysBusy ? resumed : nil
        }
    }

    /// A display link attached to this monitor is about to run `frame`'s callback. Loop thread.
    ///
    /// The frame counts only in a mode the monitor watches, and not while its hang handlers run (a run nested in one
    /// counts in nothing): its work is not what the monitor judges, so it is neither a hitch nor time in the ratio.
    ///
    /// A frame the link skipped is a hitch when a busy stretch that began in one of the link's modes kept it waiting:
    /// the frame fell due after the stretch began, and its target passed before the stretch ended. The stretch under
    /// way is asked first (the frame is judged at its end, like a callback's, unless a frame of it is judged already),
    /// then those that ended, the latest first (charged at once); a stretch charged for a late callback already is not
    /// charged again, and ended ones are not asked when the link joined a mode from none since its previous frame
    /// (`mayHaveBeenInNoMode`: the frames may have been due while it was in none). The first skipped frame that the
    /// stretch kept waiting is the one judged. A frame called back while the hang handlers run counts in nothing, but
    /// the frames it skipped are judged against the stretches that ended (the hang's): no later frame reports them.
    ///
    /// - Returns: Whether the monitor still watches; the link lets go of one that does not.
    func frameWillRun(_ frame: DisplayFrame, of link: LoopDisplayLink, mayHaveBeenInNoMode: Bool) -> Bool {
        loopPrecondition(self.loop.isCurrent,
                         "HitchMonitor.attach(to:): the display link ticks on another loop than the monitor's")
        let isWatchedMode = self.loop.currentMode.map(self.watches) ?? false
        let now = frame.skippedFrames > 0 ? self.loop.now : frame.timestamp
        // At `now`, so that a frame that skipped none reads no clock for this: a frame's timestamp is its previous
        // frame's target or later, which came after that frame's clock read (a difference that went backwards would
        // count as none, below).
        let timeOutside = self.loop.modeTimes.timeOutside(at: now, ticksIn: link.isIn)
        return self.state.withLock { state in
            guard state.isWatching else { return false }
            if state.timeOutsideAtLastFrame.count >= Self.linksFollowed {  // links come and go: forget the old ones
                state.timeOutsideAtLastFrame.removeAll(keepingCapacity: true)
            }
            let previous = state.timeOutsideAtLastFrame.updateValue(timeOutside, forKey: ObjectIdentifier(link))
            guard isWatchedMode else { return true }
            guard !state.isCallingHangHandlers else {
                if frame.skippedFrames > 0 && !mayHaveBeenInNoMode {
                    Self.chargeEndedStretch(for: frame, of: link, to: &state)
                }
                return true
            }
            state.report.frames += 1
            state.report.skippedFrames += frame.skippedFrames
            // None at a link's first frame: the time before it counts as it did before (the frame's own start).
            let notTicking = previous.map { timeOutside > $0 ? timeOutside - $0 : 0 } ?? 0
            state.addToFrameSpan(frame, notTicking: notTicking)
            if frame.skippedFrames > 0 {
                if let start = state.busySince, link.isIn(state.busyMode),
                   let target = Self.firstTargetKeptWaiting(of: frame, link: link, from: state.spanned(start),
                                                            to: now) {
                    if !state.pendingTargets.contains(where: { $0 <= target }) {  // not judged already
                        state.pendingTargets.append(target)
                    }
                } else if !mayHaveBeenInNoMode {
                    Self.chargeEndedStretch(for: frame, of: link, to: &state)
                }
            }
            state.pendingTargets.append(frame.targetTimestamp)
            return true
        }
    }

    /// Charges one of the frames `frame` skipped to the latest busy stretch that ended, began in one of the link's
    /// modes, was not charged already, and kept one of them waiting.
    private static func chargeEndedStretch(for frame: DisplayFrame, of link: LoopDisplayLink, to state: inout State) {
        for index in state.recentStretches.indices.reversed() {
            let stretch = state.recentStretches[index]
            guard !stretch.isCharged, link.isIn(stretch.mode),
                  let target = Self.firstTargetKeptWaiting(of: frame, link: link, from: state.spanned(stretch.start),
                                                           to: stretch.end)
            else { continue }
            state.report.hitches += 1
            state.report.totalHitchTime += stretch.end - target
            state.recentStretches[index].isCharged = true
            return
        }
    }

    /// The target of the first frame `frame` skipped that a busy stretch from `start` to `end` kept waiting: one that
    /// fell due at or after `start`, on `link`'s grid, and whose target came before `end`; `nil` if there is none.
    private static func firstTargetKeptWaiting(of frame: DisplayFrame, link: LoopDisplayLink, from start: LoopInstant,
                                               to end: LoopInstant) -> LoopInstant? {
        let skipped = max(frame.index - Int64(frame.skippedFrames), link.firstFrame(atOrAfter: start))
        guard skipped < frame.index else { return nil }
        let target = link.instant(ofFrame: skipped + 1)
        return target < end ? target : nil
    }
}

/// Lets the monitor's observers, and the links it is attached to, reach it without keeping it alive.
// @unchecked Sendable: set once, before it is shared, then only read (a weak reference's loads are atomic).
final class WeakMonitor: @unchecked Sendable {
    weak var monitor: HitchMonitor?
}
