#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`: the lock for state that producer threads share with a loop.
///
/// Why not `Synchronization.Mutex`: on Linux it spins before it parks, and with more producers than cores the
/// spinners steal the time slices of the thread that holds the lock, so throughput falls by two orders of magnitude.
/// A plain pthread mutex parks at once and keeps its throughput (NIO's `NIOLockedValueBox` makes the same choice).
/// The mutex lives in its own allocation, so it never moves. Any thread.
// @unchecked Sendable: `value` is only touched between `pthread_mutex_lock` and `pthread_mutex_unlock`.
final class LoopLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    /// A lock guarding `value` (pthread_mutex_init(3)).
    init(_ value: Value) {
        self.value = value
        self.mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        self.mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(self.mutex, nil)
        loopPrecondition(result == 0, "LoopKit: pthread_mutex_init failed (\(result))")
    }

    deinit {
        let result = pthread_mutex_destroy(self.mutex)
        assert(result == 0, "LoopKit: pthread_mutex_destroy failed (\(result)): the lock is still held")
        self.mutex.deinitialize(count: 1)
        self.mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock (pthread_mutex_lock(3), pthread_mutex_unlock(3)).
    ///
    /// `body` must not call user code, block, or take this lock again.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        return try body(&self.value)
    }
}
