/// A closure scheduled on a loop after a delay or at an instant, once or repeatedly, that can be cancelled
/// (SwiftNIO's `Scheduled` and `RepeatedTask`).
///
/// Cancelling releases the closure at once (and what it captures). A task cancelled before it ran never runs. The
/// completion handed to `cancel(_:)` is called once the task has finished for good: at once if it is not running,
/// else on the loop's thread when its current run returns; a task that already ran to its end (a one-shot task that
/// ran) calls it at once too. A task whose loop ends before the task has run for good (its `LoopThread` finishes, its
/// group shuts down, its thread exits) is cancelled with it, as SwiftNIO fails such a task: `isCancelled` becomes
/// `true` and the closure is let go of. Every member is safe from any thread; the closure runs on the loop's thread.
// @unchecked Sendable: `state` is a lock; `timer` is written once, before the task is published, and a weak
// reference's loads are atomic.
public final class LoopScheduledTask: @unchecked Sendable {
    private struct State {
        var body: (@Sendable (LoopScheduledTask) -> Void)?
        var isRunning = false
        var isCancelled = false
        var completions: [@Sendable () -> Void] = []
    }

    private let state: LoopLock<State>
    private let repeats: Bool
    /// The task's timer, held weakly: the loop holds the timer, whose closure holds this task, so a task whose handle
    /// was dropped lives exactly as long as its timer is scheduled.
    private weak var timer: LoopTimer?

    private init(repeats: Bool, body: @escaping @Sendable (LoopScheduledTask) -> Void) {
        self.state = LoopLock(State(body: body))
        self.repeats = repeats
    }

    /// A task and the timer that runs it (the caller adds the timer to its loop).
    ///
    /// A repeating task runs every `interval` on its timer's grid; given `restartAfterRun`, it instead runs next at
    /// the instant that closure returns, asked once each run has ended (a fixed delay between runs).
    static func make(fireAt instant: LoopInstant, interval: Duration, repeats: Bool,
                     restartAfterRun: (@Sendable () -> LoopInstant)? = nil,
                     body: @escaping @Sendable (LoopScheduledTask) -> Void) -> (LoopScheduledTask, LoopTimer) {
        let task = LoopScheduledTask(repeats: repeats, body: body)
        let hold = TimerHold(task)
        let timer = LoopTimer(fireAt: instant, interval: repeats ? interval : .zero, repeats: repeats) { timer in
            hold.task.runOnce()
            // From the timer's own callback, a new date replaces the slot the timer would have moved to.
            if let restartAfterRun, !hold.task.isCancelled {
                timer.setNextFireDate(restartAfterRun())
            }
        }
        task.timer = timer
        return (task, timer)
    }

    /// Whether the task was cancelled: by `cancel(_:)`, or with its loop, which ended before the task ran for good. Any
    /// thread.
    public var isCancelled: Bool {
        self.state.withLock { $0.isCancelled }
    }

    /// Cancels the task: it does not run again, its closure is released now, and `completion` (if any) is called
    /// once it has finished its last run. A one-shot task that already ran, or is running, stays not cancelled (as a
    /// SwiftNIO `Scheduled` that succeeded), and `completion` is called at once, or when that run returns. Any thread;
    /// twice is fine (each completion is called once).
    public func cancel(_ completion: (@Sendable () -> Void)? = nil) {
        let (released, callNow) = self.state.withLock { state -> ((@Sendable (LoopScheduledTask) -> Void)?, Bool) in
            let released = state.body
            let ranToItsEnd = released == nil && !state.isCancelled && !state.isRunning
            // A one-shot task in its run has run: as after it, a cancel changes nothing but waits for the run's end.
            let isInItsOneRun = state.isRunning && !self.repeats && !state.isCancelled
            state.body = nil
            state.isCancelled = state.isCancelled || !(ranToItsEnd || isInItsOneRun)
            guard state.isRunning else { return (released, true) }
            if let completion { state.completions.append(completion) }
            return (released, false)
        }
        _ = released  // dropped here, outside the lock: its captures may run deinits
        self.timer?.invalidate()
        if callNow {
            completion?()
        }
    }

    /// The task's timer let go of its callback: it was invalidated, fired for the last time, or freed by a loop that
    /// ended. A task that can still run is cancelled. Any thread.
    private func timerDidLetGo() {
        let released = self.state.withLock { state -> (@Sendable (LoopScheduledTask) -> Void)? in
            guard !state.isCancelled, let body = state.body else { return nil }  // cancelled, or ran to its end
            state.body = nil
            state.isCancelled = true
            return body
        }
        withExtendedLifetime(released) {}  // let go of here, outside the lock: its captures may run deinits
    }

    /// Held by the task's timer's callback alone: its deinit tells the task that its timer can no longer run it.
    private final class TimerHold: Sendable {
        let task: LoopScheduledTask

        init(_ task: LoopScheduledTask) {
            self.task = task
        }

        deinit {
            self.task.timerDidLetGo()
        }
    }

    /// Runs the closure for one fire, unless cancelled; then finishes the task if that was its last run.
    private func runOnce() {
        let body = self.state.withLock { state -> (@Sendable (LoopScheduledTask) -> Void)? in
            guard !state.isCancelled, let body = state.body else { return nil }
            state.isRunning = true
            return body
        }
        guard let body else { return }
        body(self)
        let (completions, spent) = self.state.withLock {
            state -> ([@Sendable () -> Void], (@Sendable (LoopScheduledTask) -> Void)?) in
            state.isRunning = false
            defer { state.completions = [] }
            guard !self.repeats else { return (state.completions, nil) }
            defer { state.body = nil }  // ran once: nothing keeps its captures alive
            return (state.completions, state.body)
        }
        withExtendedLifetime((body, spent)) {}  // let go of here, outside the lock: its captures may run deinits
        for completion in completions {
            completion()
        }
    }
}

extension Loop {
    /// Runs `task` once on the loop's thread after `delay`, while the loop runs one of `modes`. Any thread.
    ///
    /// A delay of zero or less runs the task at the loop's next pass, as SwiftNIO's `scheduleTask(in:)` does.
    ///
    /// - Returns: A handle whose `cancel(_:)` stops the task and releases the closure at once; already cancelled when
    ///   the loop has ended (the task never runs).
    /// - Precondition: `modes` is not empty.
    @discardableResult
    public func schedule(
        after delay: Duration,
        inModes modes: [LoopMode] = [.common],
        _ task: @escaping @Sendable () -> Void
    ) -> LoopScheduledTask {
        self.schedule(at: self.now + max(delay, .zero), inModes: modes, call: "Loop.schedule(after:inModes:_:)", task)
    }

    /// Runs `task` once on the loop's thread at `instant` (at the next pass if it has passed). Any thread.
    ///
    /// - Returns: A handle, already cancelled when the loop has ended (the task never runs).
    /// - Precondition: `modes` is not empty.
    @discardableResult
    public func schedule(
        at instant: LoopInstant,
        inModes modes: [LoopMode] = [.common],
        _ task: @escaping @Sendable () -> Void
    ) -> LoopScheduledTask {
        self.schedule(at: instant, inModes: modes, call: "Loop.schedule(at:inModes:_:)", task)
    }

    /// `schedule(at:inModes:_:)`, whose trap names `call` (the API the user called).
    func schedule(at instant: LoopInstant, inModes modes: [LoopMode], call: StaticString,
                  _ task: @escaping @Sendable () -> Void) -> LoopScheduledTask {
        loopPrecondition(!modes.isEmpty, "\(call): the list of modes is empty")
        let (scheduled, timer) = LoopScheduledTask.make(fireAt: instant, interval: .zero, repeats: false) { _ in task() }
        self.add(timer, forModes: modes, of: scheduled)
        return scheduled
    }

    /// Runs `task` on the loop's thread every `interval`, the first time after `initialDelay` (at the next pass for
    /// an initial delay of zero or less); missed slots are skipped, as a repeating timer's. Any thread.
    ///
    /// - Returns: A handle whose `cancel(_:)` stops the task; its completion is called after the last run ends.
    ///   Already cancelled when the loop has ended (the task never runs).
    /// - Precondition: `interval` is greater than zero, and `modes` is not empty.
    @discardableResult
    public func scheduleRepeating(
        initialDelay: Duration,
        every interval: Duration,
        inModes modes: [LoopMode] = [.common],
        _ task: @escaping @Sendable (LoopScheduledTask) -> Void
    ) -> LoopScheduledTask {
        loopPrecondition(interval > .zero,
                         "Loop.scheduleRepeating(initialDelay:every:inModes:_:): the interval must be greater than zero")
        loopPrecondition(!modes.isEmpty, "Loop.scheduleRepeating(initialDelay:every:inModes:_:): no modes")
        let (scheduled, timer) = LoopScheduledTask.make(fireAt: self.now + max(initialDelay, .zero),
                                                        interval: interval, repeats: true, body: task)
        self.add(timer, forModes: modes, of: scheduled)
        return scheduled
    }

    /// Runs `task` on the loop's thread again and again, each run starting `delay` after the previous one ended, the
    /// first after `initialDelay` (at the next pass for an initial delay of zero or less): SwiftNIO's
    /// `scheduleRepeatedTask(initialDelay:delay:)`. A slow run pushes the next one back, where a fixed rate
    /// (`scheduleRepeating(initialDelay:every:)`) keeps to its grid and may start the next run less than an interval
    /// after this one ended. Any thread.
    ///
    /// - Returns: A handle whose `cancel(_:)` stops the task; its completion is called after the last run ends.
    ///   Already cancelled when the loop has ended (the task never runs).
    /// - Precondition: `delay` is greater than zero, and `modes` is not empty.
    @discardableResult
    public func scheduleRepeating(
        initialDelay: Duration,
        delay: Duration,
        inModes modes: [LoopMode] = [.common],
        _ task: @escaping @Sendable (LoopScheduledTask) -> Void
    ) -> LoopScheduledTask {
        loopPrecondition(delay > .zero,
                         "Loop.scheduleRepeating(initialDelay:delay:inModes:_:): the delay must be greater than zero")
        loopPrecondition(!modes.isEmpty, "Loop.scheduleRepeating(initialDelay:delay:inModes:_:): no modes")
        // Weak: the loop holds the timer, whose callback holds this closure.
        let (scheduled, timer) = LoopScheduledTask.make(
            fireAt: self.now + max(initialDelay, .zero), interval: delay, repeats: true,
            restartAfterRun: { [weak self] in (self?.now ?? .distantFuture) + delay }, body: task)
        self.add(timer, forModes: modes, of: scheduled)
        return scheduled
    }

    /// Adds a scheduled task's timer to `modes`; a loop that has ended refuses it, and the task is then cancelled,
    /// so that its handle tells the caller and its closure is released.
    private func add(_ timer: LoopTimer, forModes modes: [LoopMode], of scheduled: LoopScheduledTask) {
        var isAccepted = false
        for mode in modes {
            isAccepted = self.add(timer, forMode: mode) || isAccepted
        }
        if !isAccepted {
            scheduled.cancel()
        }
    }

    /// When the next timer of `mode` is due: the earliest fire date of its timers (Foundation's
    /// `RunLoop.limitDate(forMode:)`), or `nil` when the mode has no timer. A lookup: unlike Foundation's, it runs no
    /// pass. The loop may sleep past it within the timers' tolerances. Loop thread.
    @available(*, noasync)
    public func nextTimerDate(forMode mode: LoopMode) -> LoopInstant? {
        self.preconditionIsCurrent("Loop.nextTimerDate(forMode:)")
        loopPrecondition(mode != .common, "Loop.nextTimerDate(forMode:): `common` is a pseudo-mode; ask a real mode")
        self.applyControlMessages()
        return self.modeItemsByMode[mode]?.timers.nextFireDate().map(LoopInstant.init(nanoseconds:))
    }

    /// An executor that runs jobs on this loop in its common modes: an actor whose `unownedExecutor` is this one
    /// runs on the loop's thread. Any thread.
    ///
    /// Each call makes a new `LoopExecutor` (all of them one executor to the runtime). An actor should keep the one it
    /// is given rather than ask for it in `unownedExecutor`, which the runtime reads whenever a task enters the actor.
    public var executor: LoopExecutor {
        LoopExecutor(loop: self, modes: [.common])
    }
}
