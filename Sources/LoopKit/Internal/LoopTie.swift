/// An item's tie to the loop it belongs to: set by the item's first `add`, weakly held (an item does not keep its
/// loop alive), and kept in state that one of the item's locks guards (see `LoopItem.withTie`).
///
/// An item serves one loop at a time (as a CFRunLoopTimer does); once that loop is gone it may join another.
struct LoopTie {
    weak var loop: Loop?

    /// Ties the item to `loop`.
    ///
    /// - Returns: Whether this is a new tie (the item had no loop, or its loop is gone or has ended).
    /// - Precondition: The item does not belong to another loop that is still running.
    mutating func bind(to loop: Loop, kind: String, call: StaticString) -> Bool {
        if let current = self.loop, current === loop || !current.hasEnded {
            loopPrecondition(current === loop, "\(call): this \(kind) already belongs to another loop")
            return false
        }
        self.loop = loop
        return true
    }
}
