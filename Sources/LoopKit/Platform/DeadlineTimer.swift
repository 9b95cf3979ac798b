#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// The loop's alarm clock: a timerfd armed at the absolute instant of the next timer, polled beside the wake-up
/// descriptor, so that the wait itself needs no timeout.
///
/// ppoll's timeout is not precise: the kernel lets it expire late by 0.1% of its length (`select_estimate_accuracy`:
/// 8 µs for a 120 Hz frame, 1 ms for a one-second timer), whatever the thread's timer slack. A timerfd at an
/// absolute CLOCK_MONOTONIC deadline fires at it (the kernel gives a timerfd no slack), and keeps no drift from the
/// relative-to-absolute conversion. It is re-armed only when the deadline changes (once per fire of
/// a repeating timer); a loop asleep until a far timer, or with no timer, makes no extra system call per wake-up.
/// Loop thread only.
final class DeadlineTimer {
    let descriptor: CInt
    /// The instant the timerfd is armed for, 0 when disarmed, or `nil` when unknown (the last change failed).
    /// Unchecked: read by every wait, on the loop's thread only, never across a callout (see the note in `Loop`).
    @exclusivity(unchecked) private var armed: UInt64? = 0

    /// timerfd_create(2). A waiter without one keeps ppoll's timeout; a host driver cannot do without it.
    ///
    /// - Throws: `SystemCallError` when timerfd_create(2) fails (no descriptor left, or no timerfd).
    init() throws(SystemCallError) {
        guard case .processed(let descriptor) = try nonBlockingCall("timerfd_create", {
            cloopkit_timerfd_create()
        }) else {
            throw SystemCallError.unsupported("timerfd_create")  // it never blocks: not reached
        }
        self.descriptor = descriptor
    }

    deinit {
        closeDescriptor(self.descriptor)
    }

    /// Arms the timer for `deadline` (nanoseconds of CLOCK_MONOTONIC), or disarms it for `nil`, unless it already is
    /// (timerfd_settime(2) with TFD_TIMER_ABSTIME). Arming or disarming also clears a past expiry.
    ///
    /// - Returns: Whether the timer is armed for `deadline`; `false` when the kernel refused, and the caller must
    ///   keep its own timeout instead. The timer is recorded as armed only once the call succeeded.
    func set(_ deadline: UInt64?) -> Bool {
        let wanted = deadline ?? 0
        guard wanted != self.armed else { return true }
        do {
            _ = try nonBlockingCall("timerfd_settime") { cloopkit_timerfd_arm(self.descriptor, wanted) }
        } catch {
            self.armed = nil  // unknown: set it again next time, even to disarm it
            return false
        }
        self.armed = wanted
        return true
    }

    /// Whether the timer is known to be armed for `deadline` (nanoseconds of CLOCK_MONOTONIC).
    func isArmed(for deadline: UInt64) -> Bool {
        deadline != 0 && self.armed == deadline
    }

    /// Clears an expiry (read(2) of the expiry count), so that the descriptor stops being readable; the timer stays
    /// as it is. Needed where the descriptor is watched while no wait relies on it: a large mode's epoll set watches it
    /// in every wait.
    func clearExpiry() {
        _ = try? nonBlockingCall("read") { cloopkit_timerfd_clear(self.descriptor) }
    }
}
