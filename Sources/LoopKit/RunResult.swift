/// Why a call to `Loop.run(mode:before:returnAfterSourceHandled:)` returned (CF's four results).
///
/// When several hold at the end of a pass, the first in this order wins: `handledSource`, `timedOut`, `stopped`,
/// `finished`. A stop that loses to another result in a nested run ends the outer run; at the outermost run it is
/// spent with that run.
public enum RunResult: Sendable, Hashable {
    /// The mode has no sources, timers or blocks: at once, with no observer called, or once it became empty.
    case finished
    /// `Loop.stop()` ended this run (the innermost one).
    case stopped
    /// The deadline passed.
    case timedOut
    /// A signalled or descriptor source was handled and the caller asked to return after one.
    case handledSource
}
