#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Failures scripted into LoopKit's own system calls, so that tests can make the kernel refuse what it rarely
/// refuses (ENOMEM from ppoll(2), EINTR storms, a failing timerfd_settime(2)) and check that the loop neither spins,
/// nor hangs, nor loses a wake-up.
///
/// A fault is armed for one call name (as `systemCall` names it) on one thread, for a number of calls: it hits only
/// calls made on that thread, so tests running beside it are untouched. An armed fault replaces the call: the call
/// is not made, `errno` is set and -1 returned. Unarmed, the cost is one relaxed atomic load per call. Any thread.
enum SystemCallFaults {
    private struct Fault {
        let call: String
        let code: CInt
        var remaining: Int
        let thread: pthread_t
    }

    private static let armedCount = Atomic<Int>(0)
    private static let faults = LoopLock<[Fault]>([])

    /// Makes the next `count` calls of `call` on the calling thread fail with `code`.
    static func inject(_ code: CInt, into call: String, count: Int = 1) {
        guard count > 0 else { return }
        self.faults.withLock { faults in
            faults.append(Fault(call: call, code: code, remaining: count, thread: pthread_self()))
            self.armedCount.wrappingAdd(1, ordering: .releasing)
        }
    }

    /// Disarms every fault armed on the calling thread, hit or not.
    static func clearForCurrentThread() {
        self.faults.withLock { faults in
            let before = faults.count
            faults.removeAll { pthread_equal($0.thread, pthread_self()) != 0 }
            self.armedCount.wrappingSubtract(before - faults.count, ordering: .releasing)
        }
    }

    /// How many calls the faults armed on the calling thread have still to hit.
    static var remainingForCurrentThread: Int {
        self.faults.withLock { faults in
            faults.lazy.filter { pthread_equal($0.thread, pthread_self()) != 0 }.reduce(0) { $0 + $1.remaining }
        }
    }

    /// Whether any fault is armed on any thread: the only check an unarmed call pays.
    @inline(__always)
    static var isArmed: Bool {
        self.armedCount.load(ordering: .relaxed) > 0
    }

    /// The code a fault armed for `call` on this thread makes it fail with, counting the hit; `nil` to make the call.
    static func takeFault(for call: StaticString) -> CInt? {
        let name = "\(call)"
        return self.faults.withLock { faults -> CInt? in
            let isHere = { (fault: Fault) in fault.call == name && pthread_equal(fault.thread, pthread_self()) != 0 }
            guard let index = faults.firstIndex(where: isHere) else { return nil }
            let code = faults[index].code
            faults[index].remaining -= 1
            if faults[index].remaining == 0 {
                faults.remove(at: index)
                self.armedCount.wrappingSubtract(1, ordering: .releasing)
            }
            return code
        }
    }
}
