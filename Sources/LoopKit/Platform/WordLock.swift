#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem
import Synchronization

/// A lock in one atomic word, stored inside the object whose state it guards: for state that is rarely contended and
/// that an object of which a loop may hold a million (a timer) must not pay a second allocation for.
///
/// `LoopLock` is LoopKit's lock for state threads share with a loop; its pthread mutex must not move, so it lives in an
/// allocation of its own. This one is an `Atomic`, which Swift keeps in place inside a class, so the guarded state and
/// the lock share the owner's allocation and cache lines. A waiter yields its time slice until the word is free
/// (sched_yield(2)), never spins without yielding: with more threads than cores, a spinning waiter would take the slice
/// of the thread that holds the lock (the collapse `LoopLock`'s note describes). After a few yields it sleeps between
/// looks instead (`PlatformThread.pause(beforeLook:)`): a real-time (SCHED_FIFO) waiter's yield lets no ordinary thread
/// run on its CPU, so an ordinary holder preempted there could never finish. That costs a waiter a slice or a short
/// sleep under real contention, which is why this lock only guards state whose critical sections are a few loads and
/// stores and whose other threads come rarely (a `setNextFireDate` from another thread against the loop's fires).
/// ThreadSanitizer sees the acquiring and releasing operations, so the state it guards needs no suppression. A value
/// copied out of the guarded state is retained before the lock is let go of, as under a mutex (see `withLock`). Any
/// thread.
struct WordLock: ~Copyable, Sendable {
    /// 0 while free, 1 while held.
    private let word = Atomic<UInt32>(0)

    init() {}

    /// Runs `body` while holding the lock.
    ///
    /// `body` must not call user code, block, or take this lock again.
    @inline(__always)
    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        if !self.word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
            self.waitAndLock()
        }
        defer {
            // Swift's reference-counting code motion does not take an atomic store for a release of anything: it
            // sank the retain of a callback that `body` copied out of the guarded state to after this store, where
            // another thread could take the lock and free the callback first (a timer invalidated from another
            // thread as it fired, in optimized builds only). No retain or release crosses these opaque calls: none
            // moves out of the lock, and none into it (a release moved in would run a capture's deinit, user code,
            // under the lock).
            cloopkit_reference_count_fence()
            self.word.store(0, ordering: .releasing)
            cloopkit_reference_count_fence()
        }
        return try body()
    }

    /// The contended path: yields (then sleeps) until the holder lets go, then takes the lock.
    @inline(never)
    private func waitAndLock() {
        var looks = 0
        repeat {
            while self.word.load(ordering: .relaxed) != 0 {
                PlatformThread.pause(beforeLook: looks)
                looks += 1
            }
        } while !self.word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
    }
}
