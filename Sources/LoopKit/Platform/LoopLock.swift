#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`: LoopKit's lock for state that threads share with a loop (a timer's schedule
/// uses a `WordLock` inside the timer instead, see there).
///
/// Why not `Synchronization.Mutex`: on Linux it spins before it parks, and with more producers than cores the
/// spinners steal the time slices of the thread that holds the lock, so throughput falls by two orders of magnitude.
/// And ThreadSanitizer does not see its futex hand-off, so every value it guards is reported as racing
/// (`.ci/tsan-repros/mutex.swift` shows it without LoopKit). A plain pthread mutex parks at once, keeps its
/// throughput, and is understood by the sanitizers (NIO's `NIOLockedValueBox` makes the same choice). The value and
/// the mutex share one allocation, where the mutex never moves. Any thread.
// @unchecked Sendable: the value is only touched between `pthread_mutex_lock` and `pthread_mutex_unlock`.
struct LoopLock<Value>: @unchecked Sendable {
    /// The value, with the mutex in the buffer's tail.
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            // ManagedBuffer destroys the value (its header) itself; the mutex is this class's to destroy.
            self.withUnsafeMutablePointerToElements { mutex in
                let result = pthread_mutex_destroy(mutex)
                assert(result == 0, "LoopKit: pthread_mutex_destroy failed (\(result)): the lock is still held")
                mutex.deinitialize(count: 1)
            }
        }
    }

    private let storage: Storage

    /// A lock guarding `value` (pthread_mutex_init(3)).
    init(_ value: Value) {
        // `create` returns the base type; the buffer is a `Storage` all the same.
        self.storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in value }, to: Storage.self)
        self.storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            let result = pthread_mutex_init(mutex, nil)
            loopPrecondition(result == 0, "LoopKit: pthread_mutex_init failed (\(result))")
        }
    }

    /// Runs `body` with the value while holding the lock (pthread_mutex_lock(3), pthread_mutex_unlock(3)).
    ///
    /// `body` must not call user code, block, or take this lock again.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try self.storage.withUnsafeMutablePointers { value, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }
}
