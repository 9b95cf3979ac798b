import LoopKit

/// A stretch of a tracking session in one mode, with the fires counted in it.
struct TrackingSegment: Equatable, Sendable {
    /// `before` (idle until the first drag), `drag` (the loop runs `tracking`) or `after` (idle after a drag).
    let name: String
    /// The mode the loop ran in.
    let mode: LoopMode
    let start: LoopInstant
    /// `nil` while the segment is open.
    var end: LoopInstant?
    /// Fires per item; a missing item fired 0 times.
    var fires: [TrackingSession.Item: Int] = [:]

    init(name: String, mode: LoopMode, start: LoopInstant, end: LoopInstant? = nil) {
        self.name = name
        self.mode = mode
        self.start = start
        self.end = end
    }

    /// How many times `item` fired in the segment.
    func fires(of item: TrackingSession.Item) -> Int {
        self.fires[item, default: 0]
    }

    /// The segment's length (up to `now` while open).
    func duration(now: LoopInstant) -> Duration {
        (self.end ?? now) - self.start
    }

    /// The segment's length in seconds, 0 while open.
    var seconds: Double {
        self.end.map { TextFormat.seconds($0 - self.start) } ?? 0
    }
}
