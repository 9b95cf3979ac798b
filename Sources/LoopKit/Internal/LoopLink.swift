/// The loop an item belongs to: set by the item's first `add`, weakly held, readable from any thread.
///
/// An item serves one loop at a time (as a CFRunLoopTimer does); once that loop is gone it may join another.
/// A struct around its lock, not an object of its own: an item (a million timers, say) allocates one block less.
struct LoopLink: Sendable {
    private struct Target {
        weak var loop: Loop?
    }

    private let target = LoopLock(Target())

    /// The loop the item belongs to, if it was added to one that still exists.
    var loop: Loop? {
        self.target.withLock { $0.loop }
    }

    /// Ties the item to `loop`.
    ///
    /// - Returns: Whether this is a new tie (the item had no loop, or its loop is gone or has ended).
    /// - Precondition: The item does not belong to another loop that is still running.
    @discardableResult
    func bind(to loop: Loop, kind: String, call: StaticString) -> Bool {
        self.target.withLock { target in
            if let current = target.loop, current === loop || !current.hasEnded {
                loopPrecondition(current === loop, "\(call): this \(kind) already belongs to another loop")
                return false
            }
            target.loop = loop
            return true
        }
    }
}

/// What the loop needs from every item it keeps in modes. Loop thread only, except `isValid` and `link`.
protocol LoopItem: AnyObject {
    /// The type's public name, for precondition messages.
    static var kind: String { get }
    var link: LoopLink { get }
    var isValid: Bool { get }
    /// The modes of its loop the item is in (never `common`). Loop thread only.
    var modes: ModeSet { get set }
    /// Order of first addition to the loop: breaks ties between equal `order`s and fire dates. Loop thread only.
    var sequence: UInt64 { get set }
    /// Puts the item into `items`, whose mode the item has just joined.
    func attach(to items: ModeItems, loop: Loop)
    /// Takes the item out of `items`, whose mode the item has just left.
    func detach(from items: ModeItems, loop: Loop)
}
