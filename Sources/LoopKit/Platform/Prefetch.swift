import CLoopKitSystem

/// Cache prefetch hints (`__builtin_prefetch`), for loops that walk objects in an order memory does not follow.
///
/// A hint never faults and changes no result, so any address may be passed, a dangling one included; only timing
/// changes. Any thread.
enum Prefetch {
    /// Starts loading the cache line at `address` for reading.
    @inline(__always)
    static func forReading(_ address: UnsafeRawPointer) {
        cloopkit_prefetch_read(address)
    }

    /// Starts loading the cache line at `address` for writing (a reference count, a lock word).
    @inline(__always)
    static func forWriting(_ address: UnsafeRawPointer) {
        cloopkit_prefetch_write(address)
    }
}
