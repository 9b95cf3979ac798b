/// Awaited calls into a loop: a closure run on the loop's thread, now or later, whose result the calling task gets
/// back (SwiftNIO's `submit` and `scheduleTask(...).futureResult.get()`).
extension Loop {
    /// Runs `body` on the loop's thread at its next drain of blocks in one of `modes`, after the blocks queued before
    /// it, and returns what it returns. Any thread.
    ///
    /// The calling task is resumed once, whatever happens: with the closure's result or error; with
    /// `CancellationError` when it is cancelled before the closure begins (the closure then never runs, and is let go
    /// of at once); with `LoopEndedError` when the loop lets go of the closure without running it. That is when the
    /// loop had ended, or ends first: a `LoopThread`'s end still runs the blocks queued before it, but not a
    /// scheduled closure that has not fired, and `invalidate()` or a thread's exit drops queued blocks, as CF does. A
    /// closure that has begun runs to its end, and its result is returned even if the task was cancelled meanwhile.
    /// The modes default to the common ones, as for `schedule(after:inModes:_:)` and `executor`.
    ///
    /// A task whose own executor is this loop (an actor on `executor`) cannot hear of the loop's end: it would resume
    /// on the ended loop, which traps, as for any await that outlives the loop. Await from elsewhere what may outlive
    /// it.
    ///
    /// - Throws: What `body` throws; `CancellationError` if the task is cancelled before `body` began; `LoopEndedError`
    ///   if the loop let go of `body` unrun.
    /// - Precondition: `modes` is not empty.
    public func submit<Value: Sendable>(
        inModes modes: [LoopMode] = [.common],
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        let call: StaticString = "Loop.submit(inModes:_:)"
        return try await AwaitedRun(call: call).value(of: body) { closure in
            // Refused: let go of at once, so the task hears.
            _ = self.performUnlessEnded(inModes: modes, call: call, closure)
            return nil
        }
    }

    /// Runs `body` once on the loop's thread after `delay` (at the next pass for a delay of zero or less), while the
    /// loop runs one of `modes`, as `schedule(after:inModes:_:)` does, and returns what it returns; the task hears
    /// back whatever happens, as `submit(inModes:_:)` describes. Any thread.
    ///
    /// - Throws: What `body` throws; `CancellationError` if the task is cancelled before `body` began; `LoopEndedError`
    ///   if the loop let go of `body` unrun (it had ended, or ended before `body`'s time came).
    /// - Precondition: `modes` is not empty.
    public func submit<Value: Sendable>(
        after delay: Duration,
        inModes modes: [LoopMode] = [.common],
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        try await self.submit(at: self.now + max(delay, .zero), inModes: modes, call: "Loop.submit(after:inModes:_:)",
                              body)
    }

    /// Runs `body` once on the loop's thread at `instant` (at the next pass if it has passed), while the loop runs one
    /// of `modes`, as `schedule(at:inModes:_:)` does, and returns what it returns; the task hears back whatever
    /// happens, as `submit(inModes:_:)` describes. Any thread.
    ///
    /// - Throws: What `body` throws; `CancellationError` if the task is cancelled before `body` began; `LoopEndedError`
    ///   if the loop let go of `body` unrun (it had ended, or ended before `body`'s time came).
    /// - Precondition: `modes` is not empty.
    public func submit<Value: Sendable>(
        at instant: LoopInstant,
        inModes modes: [LoopMode] = [.common],
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        try await self.submit(at: instant, inModes: modes, call: "Loop.submit(at:inModes:_:)", body)
    }

    /// `submit(at:inModes:_:)`, whose trap and `LoopEndedError` name `call` (the API the user called).
    private func submit<Value: Sendable>(
        at instant: LoopInstant,
        inModes modes: [LoopMode],
        call: StaticString,
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        try await AwaitedRun(call: call).value(of: body) { closure in
            self.schedule(at: instant, inModes: modes, call: call, closure)
        }
    }
}
