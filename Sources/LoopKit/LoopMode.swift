/// A named set of loop items: sources, timers, observers and display links.
///
/// Modes compare by name. `default` and `tracking` are built in; any other name is a custom mode, created the
/// first time something is added to it. `common` is not a mode but a pseudo-mode: an item added to `common` is
/// added to every mode in the loop's common set (see `Loop.addCommonMode(_:)`), and a loop cannot run it.
///
/// Values are immutable and can be used from any thread.
public struct LoopMode: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The mode's name, e.g. `"default"`.
    public let name: String

    /// A mode named `name`. `"common"` means the common pseudo-mode.
    public init(_ name: String) {
        self.name = name
    }

    public init(stringLiteral name: String) {
        self.name = name
    }

    /// The mode a loop runs in when nothing special is happening (CF's `kCFRunLoopDefaultMode`).
    public static let `default` = LoopMode("default")

    /// The mode a loop runs in while the user drags or scrolls (AppKit's event-tracking mode).
    public static let tracking = LoopMode("tracking")

    /// The common pseudo-mode: adding to it adds to every mode in the loop's common set.
    public static let common = LoopMode("common")

    public var description: String { self.name }
}
