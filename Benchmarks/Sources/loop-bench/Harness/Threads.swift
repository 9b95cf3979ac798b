import CLoopBench
import CLoopKitSystem
import CoreFoundation
import Dispatch
import Foundation
import LoopKit
import Synchronization

/// A value handed from one thread to another once, guarded by a lock; for values (a `RunLoop`) that are not
/// `Sendable` but are used across threads only through thread-safe calls.
// @unchecked Sendable: `value` is only touched inside `lock`.
final class Handoff<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?
    private let filled = DispatchSemaphore(value: 0)

    func put(_ value: Value) {
        self.lock.withLock { self.value = value }
        self.filled.signal()
    }

    /// Waits until `put` was called, then returns the value.
    func take() -> Value {
        self.filled.wait()
        return self.lock.withLock { self.value! }
    }
}

/// A thread started for the benchmark (Foundation's `Thread`, as a user would start one), joinable.
final class BenchThread: Sendable {
    let identity: ThreadIdentity
    private let finished = DispatchSemaphore(value: 0)

    /// Starts a thread named `name` and returns once `body` has called its `ready` argument.
    ///
    /// - Parameters:
    ///   - tuned: Whether to tune the thread as `LoopThread` tunes its own (`System.tuneLikeALoopThread`);
    ///     otherwise it keeps the system's defaults (50 µs timer slack, the default slice), as a user's thread would.
    ///   - body: Runs on the thread; calls `ready` once it is set up, then does its work and returns.
    init(name: String, tuned: Bool = false, _ body: @escaping @Sendable (_ ready: () -> Void) -> Void) {
        let started = Handoff<ThreadIdentity>()
        let finished = self.finished
        let thread = Thread {
            cloopkit_set_thread_name(name)  // for perf and top: Foundation's `Thread.name` does not reach the kernel
            if tuned {
                System.tuneLikeALoopThread()
            }
            body { started.put(.current) }
            finished.signal()
        }
        thread.name = name
        thread.start()
        self.identity = started.take()
    }

    /// Waits for the thread's body to return.
    func join() {
        self.finished.wait()
        self.finished.signal()  // later joins return at once
    }

    /// Waits up to `nanoseconds` for the body to return.
    func join(timeoutNanoseconds nanoseconds: UInt64) -> Bool {
        guard self.finished.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success else { return false }
        self.finished.signal()
        return true
    }
}

/// A flag one thread raises and another polls.
final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    var isRaised: Bool { self.raised.load(ordering: .acquiring) }
    func raise() { self.raised.store(true, ordering: .releasing) }
}

/// A thread running Foundation's `RunLoop` in the default mode, hosted the way a Linux user hosts one.
///
/// On Linux, `RunLoop.perform` queues the block but does not wake a sleeping loop (CFRunLoopPerformBlock never
/// did), so `perform` here follows it with `CFRunLoopWakeUp`, as a user must.
// @unchecked Sendable: `runLoop` and `cfRunLoop` are used from other threads only through CF's thread-safe entry
// points (perform block, add timer, wake up, stop), which take the run loop's lock.
final class FoundationLoopThread: @unchecked Sendable {
    let runLoop: RunLoop
    let cfRunLoop: CFRunLoop
    private let thread: BenchThread
    private let stopFlag = StopFlag()

    var identity: ThreadIdentity { self.thread.identity }

    /// - Parameter tuned: Tune the thread as `LoopThread` tunes its own (a comparison row; Foundation's threads are
    ///   not tuned as they ship).
    init(name: String, tuned: Bool = false) {
        let handoff = Handoff<(RunLoop, CFRunLoop)>()
        let stopFlag = self.stopFlag
        self.thread = BenchThread(name: name, tuned: tuned) { ready in
            let runLoop = RunLoop.current
            // An empty mode makes `run(mode:before:)` return at once (and callers spin): keep one far timer in it.
            let keepAlive = Timer(fire: .distantFuture, interval: 0, repeats: false) { _ in }
            runLoop.add(keepAlive, forMode: .default)
            handoff.put((runLoop, CFRunLoopGetCurrent()))
            ready()
            while !stopFlag.isRaised {
                _ = runLoop.run(mode: .default, before: .distantFuture)
            }
            keepAlive.invalidate()
        }
        (self.runLoop, self.cfRunLoop) = handoff.take()
    }

    /// Queues `block` and wakes the loop (any thread).
    func perform(_ block: @escaping @Sendable () -> Void) {
        self.runLoop.perform(block)
        CFRunLoopWakeUp(self.cfRunLoop)
    }

    /// Adds `timer` to the default mode (any thread; CF arms its timer descriptor, which wakes the loop).
    func add(_ timer: Timer) {
        self.runLoop.add(timer, forMode: .default)
    }

    /// Stops the loop and joins its thread. CF's stop is lost when it lands between two runs, so it is repeated.
    func shutdown() {
        self.stopFlag.raise()
        repeat {
            CFRunLoopStop(self.cfRunLoop)
            CFRunLoopWakeUp(self.cfRunLoop)
        } while !self.thread.join(timeoutNanoseconds: 10_000_000)
    }
}

extension LoopThread {
    /// The identity of the loop's thread, asked on the thread itself.
    func identity() -> ThreadIdentity {
        let handoff = Handoff<ThreadIdentity>()
        self.perform { handoff.put(.current) }
        return handoff.take()
    }

    /// Runs `body` on the loop's thread and waits for it.
    func performAndWait(_ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        self.perform {
            body()
            done.signal()
        }
        done.wait()
    }
}

/// The floor: a bare thread blocked in poll(2) or epoll_wait(2) on a descriptor, with optional idle descriptors
/// beside it, or in futex(2) on a word. After each wake it reads the signal descriptor (or the word) and calls
/// `onWake`: the least any event loop must do.
final class FloorWaiter: Sendable {
    enum Wait: Sendable {
        case poll
        case epoll
    }

    enum Signal: Sendable {
        case pipe
        case eventfd
        /// A futex word, incremented and woken (FUTEX_WAKE) by `wake()`, slept on with FUTEX_WAIT_BITSET: the
        /// mechanism a LoopKit loop without descriptors sleeps on. The wait is always futex(2), whatever `Wait` says.
        case futex
    }

    private let signalRead: CInt
    private let signalWrite: CInt
    private let signal: Signal
    private let idle: [CInt]
    /// The futex word (`.futex`); allocated either way, so that it is never optional.
    private let word: FutexWord
    private let stopFlag = StopFlag()
    private let thread: BenchThread

    var identity: ThreadIdentity { self.thread.identity }

    /// - Parameters:
    ///   - idleDescriptors: How many idle eventfds to wait on beside the signal descriptor.
    ///   - onWake: Runs on the floor's thread after each wake.
    init(name: String, signal: Signal, wait: Wait, idleDescriptors: Int = 0,
         onWake: @escaping @Sendable () -> Void) {
        switch signal {
        case .pipe:
            var ends: [CInt] = [-1, -1]
            precondition(cbench_pipe(&ends) == 0, "pipe2 failed")
            (self.signalRead, self.signalWrite) = (ends[0], ends[1])
        case .eventfd:
            let descriptor = cbench_eventfd()
            precondition(descriptor >= 0, "eventfd failed")
            (self.signalRead, self.signalWrite) = (descriptor, descriptor)
        case .futex:
            (self.signalRead, self.signalWrite) = (-1, -1)
        }
        self.word = FutexWord()
        self.signal = signal
        self.idle = (0..<idleDescriptors).map { _ in cbench_eventfd() }
        precondition(!self.idle.contains(-1), "eventfd failed: raise the descriptor limit")
        let watched = [self.signalRead] + self.idle
        let signalRead = self.signalRead
        let stopFlag = self.stopFlag
        let word = self.word
        self.thread = BenchThread(name: name, tuned: true) { ready in
            if signal == .futex {
                var seen = cloopkit_futex_load(word.pointer)
                ready()
                while true {
                    while cloopkit_futex_load(word.pointer) == seen {
                        _ = cloopkit_futex_wait(word.pointer, seen, .max)
                    }
                    seen = cloopkit_futex_load(word.pointer)
                    if stopFlag.isRaised { break }
                    onWake()
                }
                return
            }
            var epoll: CInt = -1
            if wait == .epoll {
                epoll = cbench_epoll_create()
                for descriptor in watched {
                    _ = cbench_epoll_add_readable(epoll, descriptor)
                }
            }
            ready()
            while true {
                if wait == .epoll {
                    _ = cbench_epoll_wait_one(epoll, -1)
                } else {
                    _ = watched.withUnsafeBufferPointer { cbench_poll_readable($0.baseAddress, CInt($0.count), -1) }
                }
                _ = cbench_read_discard(signalRead)
                if stopFlag.isRaised { break }
                onWake()
            }
            if epoll >= 0 { _ = cbench_close(epoll) }
        }
    }

    /// Wakes the floor's thread (write(2) of a byte, or eventfd_write).
    @inline(__always)
    func wake() {
        switch self.signal {
        case .pipe: _ = cbench_write_byte(self.signalWrite)
        case .eventfd: _ = cbench_eventfd_signal(self.signalWrite)
        case .futex: _ = cloopkit_futex_increment_and_wake(self.word.pointer)
        }
    }

    /// A futex word's memory, handed to the floor's thread and to producers.
    // @unchecked Sendable: the word is only touched through the C target's atomic futex calls.
    private struct FutexWord: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<UInt32>

        init() {
            self.pointer = .allocate(capacity: 1)
            self.pointer.initialize(to: 0)
        }
    }

    func shutdown() {
        self.stopFlag.raise()
        self.wake()
        self.thread.join()
        for descriptor in Set([self.signalRead, self.signalWrite] + self.idle) where descriptor >= 0 {
            _ = cbench_close(descriptor)
        }
        self.word.pointer.deallocate()
    }
}
