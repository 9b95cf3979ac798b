/// Apple's rating of a hitch time ratio.
public enum HitchRating: String, Sendable, Hashable, CustomStringConvertible {
    /// Below 5 ms/s: users do not notice.
    case good
    /// 5 to 10 ms/s: some users notice.
    case warning
    /// Above 10 ms/s: clearly janky.
    case critical

    /// The rating of `hitchTimeRatio` milliseconds per second.
    public init(hitchTimeRatio: Double) {
        if hitchTimeRatio < 5 {
            self = .good
        } else if hitchTimeRatio <= 10 {
            self = .warning
        } else {
            self = .critical
        }
    }

    public var description: String { self.rawValue }
}
