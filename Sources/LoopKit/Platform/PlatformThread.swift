#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// A joinable OS thread running a closure (pthread_create(3), pthread_join(3)).
struct PlatformThread: @unchecked Sendable {  // @unchecked: `pthread_t` is a pointer on Darwin; it is only joined
    private let handle: pthread_t

    private final class Start {
        let name: String?
        let body: @Sendable () -> Void
        init(name: String?, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts a thread named `name` (cut short at a character to `maximumNameBytes`) that runs `body` and ends.
    static func spawn(name: String?, body: @escaping @Sendable () -> Void) throws(SystemCallError) -> PlatformThread {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        #if canImport(Glibc)
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { raw in
            PlatformThread.run(raw!)
            return nil
        }, start)
        #else
        var maybeHandle: pthread_t?
        let result = pthread_create(&maybeHandle, nil, { raw in
            PlatformThread.run(raw)
            return nil
        }, start)
        #endif
        guard result == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw SystemCallError(call: "pthread_create", code: result)
        }
        #if canImport(Glibc)
        return PlatformThread(handle: handle)
        #else
        return PlatformThread(handle: maybeHandle!)
        #endif
    }

    private static func run(_ raw: UnsafeMutableRawPointer) {
        let start = Unmanaged<Start>.fromOpaque(raw).takeRetainedValue()
        if let name = start.name {
            cloopkit_set_thread_name(Self.fittingName(name))
        }
        start.body()
    }

    /// The most bytes a thread's name keeps: 15 on Linux (the kernel's `TASK_COMM_LEN` less its NUL), 63 on Darwin.
    #if os(Linux)
    static let maximumNameBytes = 15
    #else
    static let maximumNameBytes = 63
    #endif

    /// `name` cut short at a character to `maximumNameBytes` less `reserved` (the bytes of a suffix the caller adds):
    /// the system would cut it at a byte, which may be inside a character and leave a broken one for debuggers and
    /// `ps`.
    static func fittingName(_ name: String, reserving reserved: Int = 0) -> String {
        var fitting = Substring(name)
        while fitting.utf8.count + reserved > Self.maximumNameBytes, !fitting.isEmpty {
            fitting = fitting.dropLast()
        }
        return String(fitting)
    }

    /// Tunes the calling thread for an event loop: a timer slack of 1 µs (prctl(2) `PR_SET_TIMERSLACK`), so that
    /// timed waits end close to their deadline, and a scheduler slice of 500 µs (sched_setattr(2), EEVDF's custom
    /// slice; shorter than the default of 0.75 ms × (1 + log₂ CPUs)), so that a wake-up preempts the thread that woke
    /// it instead of queueing behind it. The kernel may pack a woken thread onto the waker's CPU (on this project's
    /// 2-vCPU VMs it does so for 99.8% of wake-ups); with the default slice the loop then waits until the waker
    /// blocks. Both are best effort: where they are unsupported the thread keeps the defaults. Threads and processes
    /// the thread starts inherit both.
    static func tuneCurrentThreadForLatency() {
        // Best effort by design: EINVAL or ENOSYS (an older kernel, another system) leaves the defaults.
        _ = try? nonBlockingCall("prctl") { cloopkit_set_timer_slack(1_000) }
        _ = try? nonBlockingCall("sched_setattr") { cloopkit_set_scheduler_slice(500_000) }
    }

    /// Offers the calling thread's processor to another runnable thread before it would block (sched_yield(2)):
    /// returns at once when no other thread waits for this processor, and otherwise when the scheduler picks the
    /// caller again.
    static func offerProcessor() {
        _ = sched_yield()  // cannot fail on Linux or Darwin
    }

    /// How many looks of a polling wait (`pause(beforeLook:)`) only yield the processor before the wait sleeps.
    static let yieldsBeforeSleeping = 64
    /// How long a polling wait sleeps between its later looks.
    static let sleepBetweenLooksMicroseconds: useconds_t = 50

    /// Waits before the look number `look` (0 first) of a polling wait for another thread's short work: a yield
    /// (`offerProcessor()`) for the first `yieldsBeforeSleeping` looks, then a sleep of
    /// `sleepBetweenLooksMicroseconds`. Never a bare spin: with more threads than cores, the spinner would take the
    /// slice of the thread it waits for. And not only yields: a real-time (SCHED_FIFO) waiter's yield lets no ordinary
    /// thread run on its processor, so an ordinary thread it waits for, preempted there, could never finish.
    static func pause(beforeLook look: Int) {
        if look < Self.yieldsBeforeSleeping {
            Self.offerProcessor()
        } else {
            _ = usleep(Self.sleepBetweenLooksMicroseconds)  // EINTR: an early look, which the caller repeats
        }
    }

    /// The processor the calling thread runs on (sched_getcpu(3)), or -1 where the system does not say. It may change
    /// as soon as it is read.
    static var currentProcessor: CInt {
        cloopkit_current_processor()
    }

    /// The calling thread's name as the kernel knows it (pthread_getname_np(3)), or `nil` if it has none.
    static var currentName: String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard cloopkit_thread_name(&buffer, UInt(buffer.count)) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// The number of processors online (sysconf(3) `_SC_NPROCESSORS_ONLN`), at least 1.
    static var processorCount: Int {
        max(1, Int(sysconf(CInt(_SC_NPROCESSORS_ONLN))))
    }

    /// Whether the calling thread is this thread (pthread_equal(3)).
    var isCurrent: Bool {
        pthread_equal(pthread_self(), self.handle) != 0
    }

    /// Lets the thread's resources go when it ends, without a join (pthread_detach(3)). Call once, instead of `join`.
    func detach() {
        let result = pthread_detach(self.handle)
        if result != 0 {
            fatalError("LoopKit bug: pthread_detach failed with \(result)")  // ESRCH/EINVAL: not a joinable thread
        }
    }

    /// Waits for the thread to end (pthread_join(3)). Call once, from another thread.
    func join() {
        let result = pthread_join(self.handle, nil)
        if result != 0 {
            fatalError("LoopKit bug: pthread_join failed with \(result)")  // EDEADLK/EINVAL: joined twice or itself
        }
    }
}
