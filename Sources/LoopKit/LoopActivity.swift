/// The moments of a loop's run that observers can watch, with CF's bit values so traces compare with CF's.
///
/// A run calls `entry` once, then for each pass `beforeTimers`, `beforeSources`, and, when it is about to sleep,
/// `beforeWaiting` and `afterWaiting`; then `exit` once.
public struct LoopActivity: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// The run call starts (before its first pass). CF's `kCFRunLoopEntry`.
    public static let entry = LoopActivity(rawValue: 1 << 0)
    /// A pass is about to handle timers. CF's `kCFRunLoopBeforeTimers`.
    public static let beforeTimers = LoopActivity(rawValue: 1 << 1)
    /// A pass is about to handle blocks and signalled sources. CF's `kCFRunLoopBeforeSources`.
    public static let beforeSources = LoopActivity(rawValue: 1 << 2)
    /// The loop is about to sleep. CF's `kCFRunLoopBeforeWaiting`.
    public static let beforeWaiting = LoopActivity(rawValue: 1 << 5)
    /// The loop has woken. CF's `kCFRunLoopAfterWaiting`.
    public static let afterWaiting = LoopActivity(rawValue: 1 << 6)
    /// The run call ends. CF's `kCFRunLoopExit`.
    public static let exit = LoopActivity(rawValue: 1 << 7)
    /// Every activity.
    public static let allActivities: LoopActivity = [.entry, .beforeTimers, .beforeSources, .beforeWaiting,
                                                     .afterWaiting, .exit]

    public var description: String {
        let names: [(LoopActivity, String)] = [
            (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
            (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
        ]
        let present = names.filter { self.contains($0.0) }.map(\.1)
        return present.count == 1 ? present[0] : "[" + present.joined(separator: ", ") + "]"
    }
}
