/// What a display link's callback receives: the frame that starts now and its deadline.
public struct DisplayFrame: Sendable, Hashable {
    /// The grid point that just passed: when this frame's callback was due.
    public let timestamp: LoopInstant
    /// The next grid point the link fires on: the deadline for this frame's work.
    public let targetTimestamp: LoopInstant
    /// The index of `timestamp` on the link's grid (frames of the link's rate since the display's epoch); links of
    /// one display at one rate see the same index at the same instant.
    public let index: Int64
    /// How many of the link's frames passed without a callback since the previous one, never replayed: an overrun,
    /// other work that kept the loop busy past them, or a stretch when none of the link's modes was running (or it was
    /// in none). Frames while paused do not count: the first frame after a resume, or after the link was first added,
    /// counts from the frame it was armed for.
    public let skippedFrames: Int

    /// One frame at the link's rate: `targetTimestamp - timestamp`, the frame budget (16.67 ms at 60 Hz).
    public var duration: Duration {
        self.targetTimestamp - self.timestamp
    }
}
