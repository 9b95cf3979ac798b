/// One closure run on a loop for a task that awaits its result (`Loop.submit`): the task is resumed exactly once,
/// with the closure's result, with `CancellationError` when the task is cancelled before the closure begins, or with
/// `LoopEndedError` when the loop lets go of the closure without running it.
///
/// The closure handed to the loop holds only the run's `Guard`, and nothing else holds the guard: its deinit is how
/// "let go of without running" is seen, whatever the path (a block dropped by the loop's end, a timer freed with it,
/// a refusal). The user's closure is kept here until it runs, so that a cancelled task lets go of it at once even
/// where the loop keeps the guard's closure for a while (a queued block). Any thread.
final class AwaitedRun<Value: Sendable>: Sendable {
    typealias Body = @Sendable () throws -> Value

    private enum Phase {
        /// Not begun; the continuation and the closure, once the task has suspended.
        case waiting((CheckedContinuation<Value, any Error>, Body)?)
        /// The closure is running, and will resume the task with its result.
        case running(CheckedContinuation<Value, any Error>)
        /// The task was resumed. (A task cancelled before it suspended stays `.waiting(nil)`, with `isTaskCancelled`
        /// set: it resumes itself as it suspends.)
        case finished
    }

    private struct State {
        var phase = Phase.waiting(nil)
        var isTaskCancelled = false
        /// What lets go of the guard's closure before its time (a scheduled task's handle), once the loop has it.
        var handle: LoopScheduledTask?
    }

    private let state = LoopLock(State())
    private let call: StaticString

    /// - Parameter call: The API the user called, named by a `LoopEndedError`.
    init(call: StaticString) {
        self.call = call
    }

    /// Suspends the calling task until `body` has run on the loop, and returns its result. `start` hands the loop
    /// the closure to run and returns the handle that cancels it, if there is one; it is called once the task is
    /// ready to be resumed, so the loop may run, or let go of, the closure at once. A task cancelled before the call
    /// hands nothing to the loop.
    func value(of body: @escaping Body,
               startedBy start: (@escaping @Sendable () -> Void) -> LoopScheduledTask?) async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let isCancelled = self.state.withLock { state in
                    guard !state.isTaskCancelled else { return true }
                    state.phase = .waiting((continuation, body))
                    return false
                }
                guard !isCancelled else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let runGuard = Guard(self)
                guard let handle = start({ runGuard.run() }) else { return }
                // A cancel that came while `start` ran found no handle: it is cancelled here instead.
                let cancelsNow = self.state.withLock { state in
                    state.handle = handle
                    return state.isTaskCancelled
                }
                if cancelsNow {
                    handle.cancel()
                }
            }
        } onCancel: {
            self.taskWasCancelled()
        }
    }

    /// Unless the closure has begun, it never runs, it is let go of, and the task throws `CancellationError`.
    private func taskWasCancelled() {
        var body: Body?
        let (continuation, handle) = self.state.withLock {
            state -> (CheckedContinuation<Value, any Error>?, LoopScheduledTask?) in
            state.isTaskCancelled = true
            // Begun, finished, or not suspended yet (the task then sees `isTaskCancelled`): nothing to do here.
            guard case .waiting(let waiting?) = state.phase else { return (nil, nil) }
            state.phase = .finished
            body = waiting.1
            return (waiting.0, state.handle)
        }
        guard let continuation else { return }
        // Let go of before the task hears, outside the lock (a capture's deinit is user code): the user's closure,
        // and the loop's timer for it (whose guard then finds `.finished`) rather than at its time.
        body = nil
        handle?.cancel()
        continuation.resume(throwing: CancellationError())
    }

    /// Runs the closure on the loop's thread, unless the task was cancelled first, and resumes the task with its
    /// result.
    fileprivate func run() {
        var body = self.state.withLock { state -> Body? in
            guard case .waiting((let continuation, let body)?) = state.phase else { return nil }
            state.phase = .running(continuation)
            return body
        }
        guard body != nil else { return }
        let result = Result { try body!() }
        let continuation = self.state.withLock { state -> CheckedContinuation<Value, any Error>? in
            guard case .running(let continuation) = state.phase else { return nil }
            state.phase = .finished
            return continuation
        }
        body = nil  // let go of before the task hears, as a scheduled task's closure is
        continuation?.resume(with: result)
    }

    /// The loop let go of the closure: if it never began, the task throws `LoopEndedError`.
    fileprivate func closureWasReleased() {
        var body: Body?
        let continuation = self.state.withLock { state -> CheckedContinuation<Value, any Error>? in
            guard case .waiting(let waiting?) = state.phase else { return nil }
            state.phase = .finished
            body = waiting.1
            return waiting.0
        }
        body = nil  // let go of before the task hears, outside the lock
        continuation?.resume(throwing: LoopEndedError(call: "\(self.call)"))
    }

    /// Held by the closure handed to the loop, and by nothing else.
    private final class Guard: Sendable {
        let awaited: AwaitedRun

        init(_ awaited: AwaitedRun) {
            self.awaited = awaited
        }

        func run() {
            self.awaited.run()
        }

        deinit {
            self.awaited.closureWasReleased()
        }
    }
}
