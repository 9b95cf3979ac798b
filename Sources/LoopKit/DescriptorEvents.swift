/// What a descriptor source watches for, and what it reports.
///
/// A source watches `readable` and/or `writable`; `error`, `hangUp` and `invalid` are always reported.
public struct DescriptorEvents: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Data can be read, or a listening socket has a connection (`POLLIN`).
    public static let readable = DescriptorEvents(rawValue: 1 << 0)
    /// Data can be written without blocking (`POLLOUT`).
    public static let writable = DescriptorEvents(rawValue: 1 << 1)
    /// An error is pending on the descriptor (`POLLERR`).
    public static let error = DescriptorEvents(rawValue: 1 << 2)
    /// The descriptor hung up (`POLLHUP`): a pipe's writers are all gone, or a socket is shut down both ways or
    /// reset. A TCP peer's close alone shows as `readable`, with a read that returns 0.
    public static let hangUp = DescriptorEvents(rawValue: 1 << 3)
    /// The descriptor is not open: it was closed without cancelling the source (`POLLNVAL`).
    public static let invalid = DescriptorEvents(rawValue: 1 << 4)

    public var description: String {
        let names: [(DescriptorEvents, String)] = [
            (.readable, "readable"), (.writable, "writable"), (.error, "error"), (.hangUp, "hangUp"),
            (.invalid, "invalid"),
        ]
        return "[" + names.filter { self.contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
    }
}
