/// When a number whose epoll reports poll does not confirm may make a `DescriptorRegistry` start over again.
///
/// A rebuild drops every registration that outlived its file, so a number whose reports a rebuild did not cure is
/// most likely read by another reader too: a listening socket that several processes accept on, a pipe two threads
/// read. Its reports are lost races, which no rebuild cures, and each rebuild costs O(n) `epoll_ctl` calls. So after a
/// number's first rebuild, each next one waits twice as many waits as the last (up to `maximumSpacing`); a number
/// whose registration changes (its source left, or a new one joined) starts afresh. The rebuilds are spaced, never
/// stopped: a stale registration that stays ready would otherwise wake the loop on every wait for good.
///
/// Loop thread only (its registry's).
struct RebuildSpacing {
    /// The most waits a number waits between two rebuilds it asks for.
    static let maximumSpacing = 1024

    /// The registry's waits so far.
    private var waits = 0
    /// For each number that asked for a rebuild: the wait from which it may ask again, and the spacing it waits after
    /// its next one. Written only when a number asks, so that counting a wait allocates nothing.
    private var numbers: [CInt: (allowedFrom: Int, spacing: Int)] = [:]

    /// Whether `number`, whose reports poll did not confirm twice in a row, may make the registry start over now;
    /// counts the rebuild when it may.
    mutating func mayRebuild(for number: CInt) -> Bool {
        guard let entry = self.numbers[number] else {
            self.numbers[number] = (allowedFrom: self.waits &+ 1, spacing: 2)  // the first: at once
            return true
        }
        guard self.waits >= entry.allowedFrom else { return false }
        self.numbers[number] = (allowedFrom: self.waits &+ entry.spacing,
                                spacing: min(entry.spacing * 2, Self.maximumSpacing))
        return true
    }

    /// Counts a wait of the registry. O(1).
    mutating func noteWait() {
        self.waits &+= 1
    }

    /// Starts `number` afresh: its registration changed, so its next unconfirmed reports may come from a stale twin.
    mutating func forget(_ number: CInt) {
        if !self.numbers.isEmpty {
            self.numbers[number] = nil
        }
    }
}
