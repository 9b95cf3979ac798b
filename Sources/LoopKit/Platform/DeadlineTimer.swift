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
/// absolute CLOCK_MONOTONIC deadline fires within the thread's timer slack, as clock_nanosleep does, and keeps no
/// drift from the relative-to-absolute conversion. It is re-armed only when the deadline changes (once per fire of
/// a repeating timer); a loop asleep until a far timer, or with no timer, makes no extra system call per wake-up.
/// Loop thread only.
final class DeadlineTimer {
    let descriptor: CInt
    /// The instant the timerfd is armed for, or 0 when disarmed.
    private var armed: UInt64 = 0

    /// timerfd_create(2); `nil` where there is none (the loop then keeps ppoll's timeout).
    init?() {
        let descriptor = cloopkit_timerfd_create()
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit {
        closeDescriptor(self.descriptor)
    }

    /// Arms the timer for `deadline` (nanoseconds of CLOCK_MONOTONIC), or disarms it for `nil`, unless it already is
    /// (timerfd_settime(2) with TFD_TIMER_ABSTIME). Arming or disarming also clears a past expiry.
    func set(_ deadline: UInt64?) {
        let wanted = deadline ?? 0
        guard wanted != self.armed else { return }
        self.armed = wanted
        _ = cloopkit_timerfd_arm(self.descriptor, wanted)
    }
}
