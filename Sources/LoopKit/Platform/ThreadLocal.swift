#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem
import Synchronization

/// Per-thread identity and the per-thread loop slot (pthread_getspecific(3)).
///
/// Threads are identified by a token drawn from a process-wide counter the first time a thread asks, never by
/// `pthread_t`, which the system reuses once a thread has been joined.
enum ThreadLocal {
    private static let nextToken = Atomic<UInt64>(1)

    private static let tokenKey: pthread_key_t = makeKey(destructor: nil)

    #if canImport(Glibc)
    private typealias Destructor = @convention(c) (UnsafeMutableRawPointer?) -> Void
    private static let releaseObject: Destructor = { pointer in
        guard let pointer else { return }
        Unmanaged<AnyObject>.fromOpaque(pointer).release()
    }
    #else
    private typealias Destructor = @convention(c) (UnsafeMutableRawPointer) -> Void
    private static let releaseObject: Destructor = { pointer in
        Unmanaged<AnyObject>.fromOpaque(pointer).release()
    }
    #endif

    /// Holds each thread's loop; the key's destructor releases it when the thread exits.
    private static let objectKey: pthread_key_t = makeKey(destructor: releaseObject)

    private static func makeKey(destructor: Destructor?) -> pthread_key_t {
        var key = pthread_key_t()
        let result = pthread_key_create(&key, destructor)
        loopPrecondition(result == 0, "LoopKit: pthread_key_create failed with \(result)")
        return key
    }

    /// The calling thread's token: never 0, never shared with another thread of this process.
    static var currentToken: UInt64 {
        if let pointer = pthread_getspecific(self.tokenKey) {
            return UInt64(UInt(bitPattern: pointer))
        }
        let token = self.nextToken.wrappingAdd(1, ordering: .relaxed).oldValue
        pthread_setspecific(self.tokenKey, UnsafeRawPointer(bitPattern: UInt(token)))
        return token
    }

    /// Gives the calling thread `token` again. At thread exit glibc clears every key, destructor or not, before
    /// calling the destructors; a loop torn down there must still be recognized as the thread's own.
    static func restoreToken(_ token: UInt64) {
        pthread_setspecific(self.tokenKey, UnsafeRawPointer(bitPattern: UInt(token)))
    }

    /// The object stored for the calling thread, or `nil`.
    static var threadObject: AnyObject? {
        guard let pointer = pthread_getspecific(self.objectKey) else { return nil }
        return Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Stores `object` for the calling thread, retained until the thread exits.
    static func setThreadObject(_ object: AnyObject) {
        loopPrecondition(self.threadObject == nil, "LoopKit bug: the thread's loop is set twice")
        pthread_setspecific(self.objectKey, Unmanaged.passRetained(object).toOpaque())
    }

    /// Empties the calling thread's slot and releases what it held.
    static func clearThreadObject() {
        guard let pointer = pthread_getspecific(self.objectKey) else { return }
        pthread_setspecific(self.objectKey, nil)
        Unmanaged<AnyObject>.fromOpaque(pointer).release()
    }

    /// Whether the calling thread is the process's main thread.
    static var isMainThread: Bool { cloopkit_is_main_thread() }
}
