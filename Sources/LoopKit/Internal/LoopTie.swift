/// An item's tie to the loop it belongs to: set by the item's first `add`, weakly held (an item does not keep its
/// loop alive), and kept in state that one of the item's locks guards (see `LoopItem.withTie`).
///
/// An item serves one loop at a time (as a CFRunLoopTimer does); once that loop is gone or has ended it may join
/// another (`LoopItem.bind(to:kind:call:)`).
struct LoopTie {
    weak var loop: Loop?
}
