/// The modes a queued block may run in.
enum BlockModes: Sendable {
    /// The default mode alone: most blocks (`perform(_:)`'s), told apart without comparing a name.
    case defaultMode
    /// One mode, not `.common` (`one(_:)` makes the default mode `defaultMode`).
    case single(LoopMode)
    /// The common modes, as they are when the block is judged.
    case common
    case several([LoopMode])

    /// `mode` alone (`.common` stands for the common modes).
    static func one(_ mode: LoopMode) -> BlockModes {
        mode == .common ? .common : mode == .default ? .defaultMode : .single(mode)
    }

    /// `modes`, not empty.
    init(_ modes: [LoopMode]) {
        self = modes.count == 1 ? .one(modes[0]) : .several(modes)
    }

    /// Whether a block queued for these modes runs while the loop runs `mode`, given the loop's common set (`nil`
    /// when no block being judged may name `.common`, as `mayNameCommon` tells, so that the set need not be copied).
    @inline(__always)  // read in place in the queue: a call would copy the modes, and retain and release their names
    func admit(_ mode: LoopMode, commonModes: Set<LoopMode>?) -> Bool {
        switch self {
        case .defaultMode:
            return mode == .default
        case .single(let queued):
            return queued == mode
        case .common:
            return commonModes?.contains(mode) == true
        case .several(let queued):
            return queued.contains { $0 == mode || ($0 == .common && commonModes?.contains(mode) == true) }
        }
    }

    /// Whether `.common` may be one of the modes (a list is not searched for it).
    @inline(__always)
    var mayNameCommon: Bool {
        switch self {
        case .defaultMode, .single: false
        case .common, .several: true
        }
    }
}

/// A block waiting for a drain point, numbered in the order it was queued (from 1).
struct QueuedBlock: Sendable {
    let sequence: UInt64
    let modes: BlockModes
    let body: @Sendable () -> Void
    /// An executor's job, not a `perform` block: the end of the loop runs it rather than drop it, since its task
    /// would otherwise wait for ever.
    var isJob = false
    /// For an actor's job, its serial executor (the `LoopJobTarget`): no other job of that executor may start while
    /// this one runs, a run nested in it included. `nil` for a block, and for the job of a task that prefers the loop
    /// as its task executor, which need not run one at a time.
    var serialExecutor: ObjectIdentifier? = nil

    /// What a `BlockQueue` leaves in a block's place when it takes it: sequence 0, no closure context, no storage to
    /// retain or release.
    static var taken: QueuedBlock {
        QueuedBlock(sequence: 0, modes: .defaultMode, body: {})
    }

    /// Whether this is the place of a block already taken.
    var isTaken: Bool { self.sequence == 0 }
}
