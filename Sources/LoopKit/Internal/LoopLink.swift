/// The loop an item belongs to: set by the item's first `add`, weakly held, readable from any thread.
///
/// An item serves one loop at a time (as a CFRunLoopTimer does); once that loop is gone it may join another.
/// The tie lives in state guarded by one of the item's locks (`Holder`): a lock of its own (`LoopTie`), or, for a
/// timer, the lock of its schedule, so that a timer (a million of them, say) allocates one block and one mutex less.
struct LoopLink<Holder: LoopTieHolding>: Sendable {
    private let lock: LoopLock<Holder>

    /// A link kept in the state `lock` guards.
    init(sharing lock: LoopLock<Holder>) {
        self.lock = lock
    }

    /// The loop the item belongs to, if it was added to one that still exists.
    var loop: Loop? {
        self.lock.withLock { $0.tie.loop }
    }

    /// Ties the item to `loop`.
    ///
    /// - Returns: Whether this is a new tie (the item had no loop, or its loop is gone or has ended).
    /// - Precondition: The item does not belong to another loop that is still running.
    @discardableResult
    func bind(to loop: Loop, kind: String, call: StaticString) -> Bool {
        self.lock.withLock { holder in
            if let current = holder.tie.loop, current === loop || !current.hasEnded {
                loopPrecondition(current === loop, "\(call): this \(kind) already belongs to another loop")
                return false
            }
            holder.tie.loop = loop
            return true
        }
    }
}

extension LoopLink where Holder == LoopTie {
    /// A link with a lock of its own.
    init() {
        self.init(sharing: LoopLock(LoopTie()))
    }
}

/// An item's tie to its loop: weak, so that an item does not keep its loop alive.
struct LoopTie: LoopTieHolding {
    weak var loop: Loop?

    var tie: LoopTie {
        get { self }
        set { self = newValue }
    }
}

/// Locked state that holds an item's `LoopTie`.
protocol LoopTieHolding {
    var tie: LoopTie { get set }
}

/// What the loop needs from every item it keeps in modes. Loop thread only, except `isValid` and `link`.
protocol LoopItem: AnyObject {
    /// The type's public name, for precondition messages.
    static var kind: String { get }
    /// The state the item's tie to its loop lives in (see `LoopLink`).
    associatedtype LinkHolder: LoopTieHolding
    var link: LoopLink<LinkHolder> { get }
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
