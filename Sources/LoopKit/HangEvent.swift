/// A busy stretch of the loop longer than the hang threshold.
public struct HangEvent: Sendable, Hashable {
    /// When the stretch began (the loop woke or entered a run).
    public let start: LoopInstant
    /// How long the loop was busy.
    public let duration: Duration
    /// The mode the loop was running.
    public let mode: LoopMode
}
