import LoopKit

/// The lesson of the default demo, without the terminal: which items fire while the loop runs `tracking`.
///
/// `run()` schedules on `loop` a timer in `default` ("refresh feed"), a timer in `common` ("clock") and a display
/// link in `common` ("animation"), starts the input, and runs the loop's default mode until the session's duration
/// has passed or `quit` is called. A touch-down runs the loop nested in `tracking` from inside the input's handler,
/// until touch-up, as UIKit's event tracking does; the default-mode timer cannot fire there, because the loop is not
/// running its mode. Every fire is counted in the current segment: `before` the first drag, `drag`, and `after`.
///
/// The counts follow from the loop's semantics, not from timing: on a loaded machine, or on a `ManualLoopClock`
/// (where the whole session runs in virtual time at once), the default-mode timer still fires 0 times in a drag.
///
/// Loop-confined: create, run and touch it on the loop's thread. Rendering hooks (`onFire`, `onTouch`) run there too.
final class TrackingSession {
    /// What the session schedules.
    enum Item: CaseIterable, Hashable {
        /// A timer in `default`: stops during a drag.
        case defaultTimer
        /// A timer in `common`: keeps firing during a drag.
        case commonTimer
        /// A display link in `common`: keeps animating during a drag.
        case displayLink

        /// The name a user would give it.
        var label: String {
            switch self {
            case .defaultTimer: "refresh feed"
            case .commonTimer: "clock"
            case .displayLink: "animation"
            }
        }

        /// The key in the JSON summary.
        var jsonKey: String {
            switch self {
            case .defaultTimer: "defaultTimer"
            case .commonTimer: "commonTimer"
            case .displayLink: "displayLink"
            }
        }

        /// The mode it is added to.
        var mode: LoopMode {
            self == .defaultTimer ? .default : .common
        }
    }

    /// What to schedule and for how long.
    struct Configuration: Equatable {
        /// The display link's rate: 60 or 120.
        var fps = 60
        /// How long the session runs; `nil` until `quit()` (interactive).
        var duration: Duration? = .seconds(3)
        /// The period of both timers (10 Hz).
        var timerInterval: Duration = .milliseconds(100)
    }

    let loop: Loop
    let configuration: Configuration
    private let input: any TouchInput

    /// Called at every counted fire, with the item and the loop's time.
    var onFire: ((Item, LoopInstant) -> Void)?
    /// Called for every touch the input delivers.
    var onTouch: ((TouchEvent) -> Void)?
    /// Called when `run()` has fixed time zero, before anything is scheduled.
    var onStart: ((LoopInstant) -> Void)?

    /// Time zero; set when `run()` starts.
    private(set) var start: LoopInstant?
    /// When the session ends on its own (`distantFuture` without a duration).
    private(set) var deadline: LoopInstant = .distantFuture
    /// The segments so far; the last one is open until the session ends.
    private(set) var segments: [TrackingSegment] = []
    /// Whether the loop is running `tracking` for a drag.
    private(set) var isDragging = false
    private(set) var isFinished = false
    /// The signal that ended the session (`quit(interruptedBy:)`), if one did.
    private(set) var interruptingSignal: CInt?
    private var timers: [LoopTimer] = []
    private var link: LoopDisplayLink?

    /// A session on `loop` fed by `input`.
    init(loop: Loop, configuration: Configuration, input: any TouchInput) {
        self.loop = loop
        self.configuration = configuration
        self.input = input
    }

    /// Runs the whole session and returns its counts. Loop thread; call once.
    ///
    /// - Throws: `DemoError` when the input cannot start.
    @available(*, noasync)
    func run() throws(DemoError) -> TrackingSummary {
        precondition(self.start == nil, "TrackingSession.run(): a session runs once")
        let start = self.loop.now
        self.start = start
        self.deadline = self.configuration.duration.map { start + $0 } ?? .distantFuture
        self.segments = [TrackingSegment(name: "before", mode: .default, start: start)]
        self.onStart?(start)
        try self.input.start(session: self, at: start)
        self.schedule()

        while !self.isFinished {
            // Only `quit` stops this run for good; a stop that lands as a drag ends (both at once) is harmless.
            let result = self.loop.run(mode: .default, before: self.deadline)
            if result == .timedOut || result == .finished { break }
        }
        self.isFinished = true
        self.closeSegment(at: min(self.loop.now, self.deadline))
        self.input.stop()
        self.unschedule()
        return self.summary
    }

    /// What was counted so far (the open segment up to now).
    var summary: TrackingSummary {
        var segments = self.segments
        if let last = segments.indices.last, segments[last].end == nil {
            segments[last].end = min(self.loop.now, self.deadline)
        }
        return TrackingSummary(segments: segments, fps: self.configuration.fps, interruptingSignal: self.interruptingSignal)
    }

    // MARK: Input (loop thread)

    /// Acts on one touch: down starts a drag, up ends it, moves are only shown.
    func handle(_ event: TouchEvent) {
        self.onTouch?(event)
        switch event.phase {
        case .down: self.touchDown()
        case .moved: break
        case .up: self.touchUp()
        }
    }

    /// Starts a drag: runs the loop in `tracking`, nested in the caller (an input handler), until touch-up, `quit`
    /// or the deadline. Returns when the drag is over.
    func touchDown() {
        guard !self.isDragging, !self.isFinished, self.loop.now < self.deadline else { return }
        self.isDragging = true
        self.closeSegment(at: self.loop.now)
        self.segments.append(TrackingSegment(name: "drag", mode: .tracking, start: self.loop.now))
        var result: RunResult
        repeat {
            result = self.loop.run(mode: .tracking, before: self.deadline)
        } while self.isDragging && !self.isFinished && result == .stopped
        self.isDragging = false
        guard !self.isFinished, self.loop.now < self.deadline else {
            if self.isFinished {
                self.loop.stop()  // the nested run is over; now end the outer one too
            }
            return
        }
        self.closeSegment(at: self.loop.now)
        self.segments.append(TrackingSegment(name: "after", mode: .default, start: self.loop.now))
    }

    /// Ends the drag in progress, if any: stops the nested `tracking` run.
    func touchUp() {
        guard self.isDragging else { return }
        self.isDragging = false
        self.loop.stop()
    }

    /// Ends the session early (`q`, end of input, Ctrl-C). A drag in progress ends first.
    func quit(interruptedBy signal: CInt? = nil) {
        guard !self.isFinished else { return }
        self.isFinished = true
        self.interruptingSignal = signal
        self.loop.stop()
    }

    // MARK: Scheduling

    private func schedule() {
        let interval = self.configuration.timerInterval
        let isolated = self.loop.assumeIsolated()
        let feed = LoopTimer(interval: interval, repeats: true, on: isolated) { [unowned self] _ in
            self.count(.defaultTimer)
        }
        let clock = LoopTimer(interval: interval, repeats: true, on: isolated) { [unowned self] _ in
            self.count(.commonTimer)
        }
        let animation = LoopDisplayLink(display: .default, preferredRate: Double(self.configuration.fps), on: isolated) {
            [unowned self] _, _ in self.count(.displayLink)
        }
        self.loop.add(feed, forMode: TrackingSession.Item.defaultTimer.mode)
        self.loop.add(clock, forMode: TrackingSession.Item.commonTimer.mode)
        self.loop.add(animation, forMode: TrackingSession.Item.displayLink.mode)
        self.timers = [feed, clock]
        self.link = animation
    }

    private func unschedule() {
        for timer in self.timers {
            timer.invalidate()
        }
        self.link?.invalidate()
        self.timers = []
        self.link = nil
    }

    private func count(_ item: Item) {
        guard !self.segments.isEmpty else { return }
        self.segments[self.segments.count - 1].fires[item, default: 0] += 1
        self.onFire?(item, self.loop.now)
    }

    private func closeSegment(at instant: LoopInstant) {
        guard let last = self.segments.indices.last, self.segments[last].end == nil else { return }
        self.segments[last].end = max(instant, self.segments[last].start)
    }
}

@available(*, unavailable, message: "TrackingSession is confined to its loop's thread")
extension TrackingSession: Sendable {}
