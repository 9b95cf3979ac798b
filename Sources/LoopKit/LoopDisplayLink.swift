import Synchronization

/// A ticker on a display's refresh grid (CADisplayLink's counterpart), added to modes of a loop like a timer.
///
/// The link asks for a preferred rate, or a range, and gets the largest rate `maximumRate / k` that fits
/// (`rate`). Its callbacks land on the grid, in the timers' phase of a pass, only while the loop runs one of its
/// modes (in `.common`, it keeps ticking during tracking). When a callback overruns, the missed frames are
/// skipped and counted in the next frame's `skippedFrames`, never replayed: the next callback is at the first grid
/// point after now. A paused link resumes on the grid.
///
/// A link may be created on any thread; its properties are immutable but for `isPaused`. `isPaused`, `invalidate()`
/// and `isValid` are safe from any thread; the callback runs on the loop's thread and may invalidate the link. A link
/// belongs to one loop.
// @unchecked Sendable: `previousIndex` and `previousTarget` are touched only on the loop's thread (from the timer's
// callback); cross-thread state is atomic or in a LoopLock, and `timer` is itself thread-safe where it must be.
public final class LoopDisplayLink: @unchecked Sendable {
    /// The display whose grid the link follows.
    public let display: LoopDisplay
    /// The rate the link got, in frames per second: `display.maximumRate / refreshesPerFrame`.
    public let rate: Double
    /// How many display refreshes one of the link's frames lasts.
    public let refreshesPerFrame: Int

    let timer: LoopTimer
    /// `isPaused`, read without a lock by every frame; written only under `pauseChanges`.
    private let paused = Atomic<Bool>(false)
    /// `isPaused` as the timer's date follows it: the flag and the date change together, one change at a time.
    private let pauseChanges = LoopLock(false)
    /// Set on resume: the next frame counts only the frames skipped since the resume (paused frames were not missed,
    /// just not wanted).
    private let resumed = Atomic<Bool>(false)
    /// Held weakly: a link in a mode is held by its loop, and a monitor holds its loop, so a strong reference would
    /// keep an invalidated monitor, and a loop of the user's own, alive.
    private let monitors = LoopLock<[WeakMonitor]>([])
    /// Whether `monitors` has any, so that a frame takes the lock only then.
    private let hasMonitors = Atomic<Bool>(false)

    // MARK: Loop thread only
    /// The last frame reported, and its target: the next frame's index and timestamp while the link keeps up.
    private var previousIndex: Int64?
    private var previousTarget = LoopInstant.distantFuture

    /// A link at `preferredRate` frames per second (0 for the display's maximum).
    ///
    /// - Parameters:
    ///   - display: The display whose grid to follow.
    ///   - preferredRate: The rate wanted; the link gets the largest rate `display.maximumRate / k` not above it.
    ///   - callback: Runs on the loop's thread at each frame.
    /// - Precondition: `preferredRate` is finite and not negative.
    public convenience init(
        display: LoopDisplay = .default,
        preferredRate: Double = 0,
        _ callback: @escaping @Sendable (LoopDisplayLink, DisplayFrame) -> Void
    ) {
        loopPrecondition(preferredRate.isFinite && preferredRate >= 0,
                     "LoopDisplayLink(display:preferredRate:): the rate must be finite and not negative "
                        + "(\(preferredRate))")
        self.init(display: display, refreshesPerFrame: display.refreshesPerFrame(
            preferred: preferredRate, range: 0...Double(display.maximumRate)), callback)
    }

    /// A link with a rate range (CADisplayLink's `preferredFrameRateRange`): the largest supported rate not above
    /// `preferred` inside `minimum...maximum`.
    ///
    /// - Precondition: `0 < minimum <= maximum`, all finite.
    public convenience init(
        display: LoopDisplay = .default,
        minimum: Double,
        maximum: Double,
        preferred: Double,
        _ callback: @escaping @Sendable (LoopDisplayLink, DisplayFrame) -> Void
    ) {
        loopPrecondition(minimum.isFinite && maximum.isFinite && preferred.isFinite && minimum > 0 && minimum <= maximum,
                     "LoopDisplayLink(display:minimum:maximum:preferred:): need 0 < minimum <= maximum "
                        + "(got \(minimum)...\(maximum))")
        self.init(display: display, refreshesPerFrame: display.refreshesPerFrame(
            preferred: preferred, range: minimum...maximum), callback)
    }

    private init(
        display: LoopDisplay,
        refreshesPerFrame: Int,
        _ callback: @escaping @Sendable (LoopDisplayLink, DisplayFrame) -> Void
    ) {
        self.display = display
        self.refreshesPerFrame = refreshesPerFrame
        self.rate = Double(display.maximumRate) / Double(refreshesPerFrame)
        let grid = TimerGrid { [display] slot, now in
            display.nextFrame(after: max(slot ?? now, now), refreshesPerFrame: refreshesPerFrame).instant
        }
        let interval = display.frameDuration(refreshesPerFrame: refreshesPerFrame)
        // The user's callback lives in the timer's: the timer takes it under the lock it takes anyway to fire, and
        // lets go of it when invalidated, so a frame takes no lock of the link's own.
        self.timer = LoopTimer(grid: grid, interval: interval) { _ in
            // The grid holds the link while the timer is in a mode, so whenever it fires (a strong load: no weak
            // reference to resolve per frame). The timer must exist before `self` does, hence this way round.
            guard let link = grid.retainedServedObject else { return }
            unsafeDowncast(link, to: LoopDisplayLink.self).fire(slot: grid.firingSlot, now: grid.firingNow, callback)
        }
        grid.servedObject = self
    }

    /// One frame at the link's rate.
    public var frameDuration: Duration {
        self.display.frameDuration(refreshesPerFrame: self.refreshesPerFrame)
    }

    /// Whether callbacks are suspended. Any thread. Resuming continues on the grid, at the first frame after now,
    /// and the frames while paused are not counted as skipped.
    public var isPaused: Bool {
        get { self.paused.load(ordering: .acquiring) }
        set {
            // A clock is user code, which may come back here: read for a resume before the lock (the loop's clock, if
            // the link is in one; under the lock only if it joined one meanwhile).
            let resumeNow = newValue ? nil : self.timer.boundLoop?.now
            // One change at a time: the flag and the timer's date must agree, and two threads setting opposite values
            // could otherwise leave the link running with no date, or paused with one.
            self.pauseChanges.withLock { applied in
                guard applied != newValue else { return }
                applied = newValue
                self.paused.store(newValue, ordering: .releasing)
                if newValue {
                    self.timer.setNextFireDate(.distantFuture)
                    return
                }
                self.resumed.store(true, ordering: .releasing)
                // Not in a loop yet: the date is forgotten, and the first add picks the next frame. Decided under
                // the timer's lock, so that an add from another thread cannot queue a date this then forgets.
                if let loop = self.timer.forgetFireDateUnlessBound() {
                    let next = self.display.nextFrame(after: resumeNow ?? loop.now,
                                                      refreshesPerFrame: self.refreshesPerFrame)
                    self.timer.setNextFireDate(next.instant)
                }
            }
        }
    }

    /// Whether the link can still tick. Any thread.
    public var isValid: Bool {
        self.timer.isValid
    }

    /// Stops the link for good, removes it from every mode and lets it go. Any thread, its own callback included.
    ///
    /// While it is in a mode, the link is kept alive by its loop (as a run loop retains a CADisplayLink), so a link
    /// added to a loop keeps ticking even when the caller keeps no reference to it. Its callback, and what the
    /// callback captured, are let go of before this returns (a call already under way finishes).
    public func invalidate() {
        self.timer.invalidate()  // lets go of the timer's callback, which holds the link's
    }

    /// Whether the link is in `mode`. Loop thread.
    func isIn(_ mode: LoopMode) -> Bool {
        self.timer.modes.contains(mode)
    }

    /// The instant of the link's frame `index`. Loop thread.
    func instant(ofFrame index: Int64) -> LoopInstant {
        self.display.instant(ofFrame: index, refreshesPerFrame: self.refreshesPerFrame)
    }

    /// The index of the link's first frame at or after `instant`. Loop thread.
    func firstFrame(atOrAfter instant: LoopInstant) -> Int64 {
        let index = self.display.frameIndex(atOrBefore: instant, refreshesPerFrame: self.refreshesPerFrame)
        return self.instant(ofFrame: index) < instant && index < .max ? index + 1 : index
    }

    /// Tells `monitor` about every frame (used by `HitchMonitor.attach(to:)`); once, however often it is added. Any
    /// thread.
    func addMonitor(_ monitor: HitchMonitor) {
        let entry = WeakMonitor()
        entry.monitor = monitor
        self.monitors.withLock { entries in
            if !entries.contains(where: { $0.monitor === monitor }) {
                entries.append(entry)
            }
        }
        self.hasMonitors.store(true, ordering: .releasing)
    }

    /// The link's timer fired for the grid point `slot`, with `callback`; the loop's clock read `now` just before.
    /// Loop thread.
    private func fire(slot: LoopInstant, now: LoopInstant, _ callback: (LoopDisplayLink, DisplayFrame) -> Void) {
        guard !self.isPaused, slot != .distantFuture else { return }
        // Loaded first: the exchange is a locked instruction, and a link is seldom resumed.
        if self.resumed.load(ordering: .relaxed) && self.resumed.exchange(false, ordering: .acquiringAndReleasing) {
            self.previousIndex = nil
        }
        let (index, timestamp, target) = self.frame(firedFor: slot, now: now)
        // The first frame after an add or a resume counts from the frame it was armed for (`slot`, the first grid
        // point after the add or resume): frames the loop missed since then are skipped, earlier ones were not wanted.
        let isFirstFrame = self.previousIndex == nil
        let previous = self.previousIndex
            ?? self.display.frameIndex(atOrBefore: slot, refreshesPerFrame: self.refreshesPerFrame) - 1
        let skipped = max(0, Int(index - 1 - previous))
        self.previousIndex = index
        self.previousTarget = target
        // The timer's next slot, unless the callback overruns it: the grid need not work it out again.
        let grid = self.timer.grid
        grid?.followingSlot = target
        // Back in a mode from none, a link counts the frames it was in none as skipped; a first frame (after an add or
        // a resume) does not: it counts from the slot it was armed for.
        let hasJoinedAModeFromNone = grid?.hasJoinedAModeFromNone ?? false
        if hasJoinedAModeFromNone {
            grid?.hasJoinedAModeFromNone = false  // cleared by every frame, so a monitor attached later reads it fresh
        }
        let mayHaveBeenInNoMode = hasJoinedAModeFromNone && !isFirstFrame
        let frame = DisplayFrame(timestamp: timestamp, targetTimestamp: target, index: index, skippedFrames: skipped)
        if self.hasMonitors.load(ordering: .acquiring) {
            let stopped = self.monitors.withLock { $0 }.filter {
                $0.monitor?.frameWillRun(frame, of: self, mayHaveBeenInNoMode: mayHaveBeenInNoMode) != true
            }
            if !stopped.isEmpty {  // invalidated or freed monitors: let go of them
                self.monitors.withLock { $0.removeAll { entry in stopped.contains { $0 === entry } } }
            }
        }
        callback(self, frame)
    }

    /// The frame to report for a fire at `slot` when the clock reads `now`: the grid point at or before the later of
    /// the two (a link fired late, its mode not running, reports the grid point that just passed, not its old slot),
    /// its instant, and the next grid point's. Loop thread.
    private func frame(firedFor slot: LoopInstant, now: LoopInstant) -> (index: Int64, instant: LoopInstant,
                                                                         target: LoopInstant) {
        // Keeping up, the slot is the last frame's target and the clock has not reached the frame after: one instant
        // to work out instead of a division and three.
        if let previousIndex, slot == self.previousTarget, previousIndex < .max - 1 {
            let target = self.display.instant(ofFrame: previousIndex + 2, refreshesPerFrame: self.refreshesPerFrame)
            if now < target {
                return (previousIndex + 1, slot, target)
            }
        }
        let index = self.display.frameIndex(atOrBefore: max(slot, now), refreshesPerFrame: self.refreshesPerFrame)
        return (index,
                self.display.instant(ofFrame: index, refreshesPerFrame: self.refreshesPerFrame),
                self.display.instant(ofFrame: index + 1, refreshesPerFrame: self.refreshesPerFrame))
    }
}
