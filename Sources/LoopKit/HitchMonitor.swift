/// Measures what Instruments measures: how long each pass of a loop is busy, frame hitches, and hangs.
///
/// The monitor adds two observers to the loop (in `.common` by default, or the modes given): one, ordered first,
/// at `entry` and `afterWaiting`, starts a busy stretch; one, ordered last, at `beforeWaiting` and `exit`, ends it.
/// Attached to a display link, it also checks each frame: the frame's work is the busy stretch in which the link's
/// callback ran, and if that stretch ends after the frame's `targetTimestamp`, the frame is a hitch by that much.
/// Its cost is a clock read and a lock per observer call.
///
/// Every member is safe from any thread. Hang handlers run on the loop's thread, at the end of the busy stretch; the
/// time they take, a run of the loop nested in one included, counts in no busy stretch.
public final class HitchMonitor: Sendable {
    private struct State {
        var report = HitchReport()
        var busySince: LoopInstant?
        var pendingTargets: [LoopInstant] = []
        var isWatching = true
        /// Whether a frame was seen since the monitor began or was reset: the first one's skipped frames were not
        /// in the span measured.
        var hasSeenFrame = false
        var hangHandlers: [@Sendable (HangEvent) -> Void] = []
    }

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
            state.hasSeenFrame = false
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
    }

    deinit {
        self.invalidate()
    }

    // MARK: Called on the loop's thread

    private func busyStarts(entering: Bool) {
        let now = self.loop.now
        // An outermost run starts afresh: a stretch left open by a nested run that returned to a mode the monitor
        // does not watch (where no `beforeWaiting` ended it) must not reach back over the sleeps since.
        let isOutermostEntry = entering && self.loop.runningModes.count == 1
        self.state.withLock { state in
            if state.busySince == nil || isOutermostEntry {
                state.busySince = now
            }
        }
    }

    /// Whether the monitor's observers are in `mode` (the common modes expanded). Loop thread.
    private func watches(_ mode: LoopMode) -> Bool {
        self.observers.first.map { $0.modes.contains(mode) } ?? false
    }

    private func busyEnds(exiting: Bool) {
        let now = self.loop.now
        let mode = self.loop.currentMode ?? .default
        // The loop's own depth, not one counted from the monitor's creation: a monitor made inside a callback, or
        // from another thread while the loop runs, starts in the middle of a run. `exit` comes before the run leaves.
        // Leaving a nested run returns to the outer run's callback, busy, unless the outer run is in a mode the
        // monitor does not watch: no observer of its would end that stretch before the loop sleeps there.
        let runningModes = self.loop.runningModes
        let isNested = exiting && runningModes.count > 1 && self.watches(runningModes[runningModes.count - 2])
        let (hang, handlers) = self.state.withLock { state -> (HangEvent?, [@Sendable (HangEvent) -> Void]) in
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
            for target in state.pendingTargets where now > target {
                state.report.hitches += 1
                state.report.totalHitchTime += now - target
            }
            state.pendingTargets.removeAll(keepingCapacity: true)
            state.busySince = isNested ? now : nil
            return (hang, hang == nil ? [] : state.hangHandlers)
        }
        guard let hang else { return }
        for handler in handlers {
            handler(hang)
        }
        // A handler that ran the loop nested saw that run's own busy stretches begin and end; what follows this
        // observer is what followed it before the handlers ran: a sleep or the run's exit (nothing busy), or the rest
        // of the outer callback (busy from now).
        // Frames that ran in such a run are not judged: this observer is not re-entered, so no busy stretch of that
        // run ended for them, and the next one to end (after a sleep) would charge each as a hitch.
        let resumed = self.loop.now
        self.state.withLock { state in
            state.busySince = isNested ? resumed : nil
            state.pendingTargets.removeAll(keepingCapacity: true)
        }
    }

    /// A display link attached to this monitor is about to run `frame`'s callback. Loop thread.
    ///
    /// The frame is checked for a hitch only in a mode the monitor watches: elsewhere no busy stretch ends for it, and
    /// its target would wait for one in a watched mode, charged seconds late.
    ///
    /// - Returns: Whether the monitor still watches; the link lets go of one that does not.
    func frameWillRun(_ frame: DisplayFrame) -> Bool {
        loopPrecondition(self.loop.isCurrent,
                         "HitchMonitor.attach(to:): the display link ticks on another loop than the monitor's")
        let isWatchedMode = self.loop.currentMode.map(self.watches) ?? false
        return self.state.withLock { state in
            guard state.isWatching else { return false }
            state.report.frames += 1
            state.report.skippedFrames += frame.skippedFrames
            // The frames' own time: a frame's budget for each frame seen and each one skipped since the last seen,
            // so that time paused (or before the first frame) is not taken for time ticking.
            let framesCovered = state.hasSeenFrame ? frame.skippedFrames + 1 : 1
            state.hasSeenFrame = true
            state.report.frameSpan += frame.duration * framesCovered
            if isWatchedMode {
                state.pendingTargets.append(frame.targetTimestamp)
            }
            return true
        }
    }
}

/// Lets the monitor's observers, and the links it is attached to, reach it without keeping it alive.
// @unchecked Sendable: set once, before it is shared, then only read (a weak reference's loads are atomic).
final class WeakMonitor: @unchecked Sendable {
    weak var monitor: HitchMonitor?
}
