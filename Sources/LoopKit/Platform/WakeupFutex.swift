#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// The wake-up channel of a loop that has no descriptor to watch: a futex word that any thread increments, and that
/// the loop sleeps on (futex(2), Linux only), with its next timer's instant as the wait's absolute deadline.
///
/// It is the wake-up pipe without the pipe: a wake-up is one `FUTEX_WAKE` and the wait one `FUTEX_WAIT_BITSET`,
/// where the pipe costs a write, a ppoll that polls its descriptors again on waking, and a read; and the deadline
/// needs no timerfd, so a repeating timer's wait is one system call instead of two. `loop-bench`'s wake-up of a
/// sleeping loop went from 1.02× the pipe floor's p50 to 0.88× (Benchmarks/RESULTS.md). The word works like the pipe: it "holds a
/// wake-up" while it differs from the value the loop last consumed, so a wake-up that lands after its wait ended
/// (its producer was preempted) is found by the next wait, stale, and absorbed as a stale byte would be.
///
/// `notify()` is safe from any thread; the rest is loop thread only. A value, not an object: the owner (`PollWaiter`)
/// stores it inline, and its `Loop` a copy (a producer's wake-up then touches the loop and the word, not the waiter),
/// so that a wake-up and a woken wait reach the word without retaining and releasing an object of its own; the owner
/// frees the word with `deallocate()` when it is freed itself. The word lives as long as the waiter, which the loop
/// holds and a producer holds through the loop, so a late `notify()` never touches freed memory.
struct WakeupFutex: @unchecked Sendable {  // the word is only touched atomically; `observed` only by the loop's thread
    /// The futex word, which any thread increments, followed in the same allocation (so the same cache line) by
    /// `observed`, which the loop reads beside it whenever it looks.
    private let word: UnsafeMutablePointer<UInt32>

    /// The word's value when the loop last consumed a wake-up. Loop thread only.
    private var observed: UInt32 {
        get { self.word[1] }
        nonmutating set { self.word[1] = newValue }
    }

    /// A futex, or `nil` where the system has none (macOS, or a seccomp filter that refuses futex(2)): the loop then
    /// sleeps on its pipe.
    init?() {
        self.word = .allocate(capacity: 2)
        self.word.initialize(repeating: 0, count: 2)
        // A wake of nobody and a wait that cannot sleep (the word no longer holds 0), to learn whether both operations
        // are there; the word is left at 1, which `observed` takes.
        guard cloopkit_futex_increment_and_wake(self.word) == 0,
              cloopkit_futex_wait(self.word, 0, .max) == -1, errno == EAGAIN else {
            self.word.deallocate()
            return nil
        }
        self.observed = cloopkit_futex_load(self.word)
    }

    /// Frees the word: once, by the owner, when no thread can notify it any more.
    func deallocate() {
        self.word.deallocate()
    }

    /// Ends the loop's wait on the word, or the next one. Any thread.
    func notify() {
        guard cloopkit_futex_increment_and_wake(self.word) == 0 else {
            // FUTEX_WAKE fails only for a bad address or operation, both LoopKit bugs; init proved it is there.
            trap("futex (waking the loop)", SystemCallError(call: "futex", code: errno))
        }
    }

    /// Whether a wake-up arrived since the loop last consumed one.
    var hasUnreadWakeUp: Bool {
        cloopkit_futex_load(self.word) != self.observed
    }

    /// Takes every wake-up that arrived so far.
    func consume() {
        self.observed = cloopkit_futex_load(self.word)
    }

    /// Sleeps until a wake-up arrives (at once if one is unread) or the CLOCK_MONOTONIC instant `deadline` passes
    /// (`nil`: no deadline). A signal or a spurious return does not end the wait.
    ///
    /// - Returns: Whether a wake-up ended it (left unread, for `consume()`); `false` when the deadline passed.
    func wait(until deadline: UInt64?) -> Bool {
        while cloopkit_futex_load(self.word) == self.observed {
            do {
                // A signal (`nil`), a wake-up between the load and the wait (`.wouldBlock`) or a spurious return:
                // the load tells. The deadline passing is a result (1), not an error: every wait of a repeating timer
                // or display link ends so, and it should not pay for an error's errno read, message and throw.
                let result = try systemCall("futex", interrupts: .report) {
                    cloopkit_futex_wait(self.word, self.observed, deadline ?? .max)
                }
                if case .processed(1)? = result {
                    return self.hasUnreadWakeUp
                }
            } catch let error where error.code == ETIMEDOUT {
                return self.hasUnreadWakeUp  // a test's scripted ETIMEDOUT (SystemCallFaults skips the C mapping)
            } catch {
                trap("futex (the loop's wait)", error)  // only a bad address or operation: a LoopKit bug
            }
        }
        return true
    }
}
