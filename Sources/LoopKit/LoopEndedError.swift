/// Thrown by an awaited call into a loop (`Loop.submit(inModes:_:)` and its scheduled forms) when the loop let go of
/// the closure without running it: the loop had ended, or ended first (a scheduled closure that had not fired; a
/// block dropped by `invalidate()` or its thread's exit, which drop queued blocks as CF does). The closure has been
/// let go of.
public struct LoopEndedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call that was made, such as `Loop.submit(after:inModes:_:)`.
    public let call: String

    /// An error for `call` (for test doubles of code that awaits a loop).
    public init(call: String) {
        self.call = call
    }

    public var description: String {
        "\(self.call): the loop ended before the closure ran"
    }
}
