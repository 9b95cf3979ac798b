import LoopKit

/// Where a tracking session's touches come from: a scripted input thread, or the keyboard.
///
/// An input delivers touches by calling `TrackingSession.handle(_:)` (or `quit()`) on the loop's thread, from a
/// source on the session's loop, so that a touch-down can run the loop nested in `tracking` as a real input handler
/// does.
protocol TouchInput: AnyObject {
    /// Starts delivering touches to `session`; `start` is the session's time zero. Loop thread.
    ///
    /// - Throws: `DemoError` when the input cannot be set up (e.g. no descriptors left for a pipe).
    func start(session: TrackingSession, at start: LoopInstant) throws(DemoError)

    /// Stops delivering and releases what `start` set up. Loop thread; the session has ended.
    func stop()
}
