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

/// A block waiting for a drain point, numbered in the order it was queued.
struct QueuedBlock: Sendable {
    let sequence: UInt64
    let modes: BlockModes
    let body: @Sendable () -> Void
}
