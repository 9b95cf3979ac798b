/// The modes a queued block may run in.
enum BlockModes: Sendable {
    case one(LoopMode)
    case several([LoopMode])

    /// Whether a block queued for these modes runs while the loop runs `mode`, given the loop's common set.
    func admit(_ mode: LoopMode, commonModes: Set<LoopMode>) -> Bool {
        switch self {
        case .one(let queued):
            return queued == mode || (queued == .common && commonModes.contains(mode))
        case .several(let queued):
            return queued.contains { $0 == mode || ($0 == .common && commonModes.contains(mode)) }
        }
    }
}

/// A block waiting for a drain point, numbered in the order it was queued (from 1).
struct QueuedBlock: Sendable {
    let sequence: UInt64
    let modes: BlockModes
    let body: @Sendable () -> Void

    /// What a `BlockQueue` leaves in a block's place when it takes it: sequence 0, no closure context, no storage to
    /// retain or release.
    static var taken: QueuedBlock {
        QueuedBlock(sequence: 0, modes: .one(.default), body: {})
    }

    /// Whether this is the place of a block already taken.
    var isTaken: Bool { self.sequence == 0 }
}
