#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LoopKit

extension Loop {
    /// One non-blocking pass in `mode`: the deadline is already reached (a `ManualLoopClock` loop, as in rule 12).
    @discardableResult
    func runOnePass(in mode: LoopMode = .default, returnAfterSourceHandled: Bool = false) -> RunResult {
        self.run(mode: mode, before: self.now, returnAfterSourceHandled: returnAfterSourceHandled)
    }
}

/// A connected pair of non-blocking `AF_UNIX` stream sockets; closes what is still open on deinit.
final class TestSocketPair: @unchecked Sendable {
    let first: CInt
    let second: CInt

    init() throws {
        var ends: [CInt] = [-1, -1]
        // Close-on-exec from the start: an exit test's child spawned meanwhile must not hold our ends open.
        let type = CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue)
        try #require(socketpair(AF_UNIX, type, 0, &ends) == 0)
        self.first = ends[0]
        self.second = ends[1]
    }

    /// Sends `text` on `descriptor`.
    func send(_ text: String, on descriptor: CInt) {
        var bytes = Array(text.utf8)
        _ = write(descriptor, &bytes, bytes.count)
    }

    /// Reads everything available on `descriptor`.
    func readAll(from descriptor: CInt) -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var text = ""
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        return text
    }

    /// Shuts `descriptor` down both ways (shutdown(2) with `SHUT_RDWR`): its peer sees a hang-up.
    func hangUp(_ descriptor: CInt) {
        _ = shutdown(descriptor, CInt(SHUT_RDWR))
    }

    deinit {
        _ = close(self.first)
        _ = close(self.second)
    }
}

extension TestPipe {
    /// Reads at most `count` bytes; returns the text read.
    func read(count: Int) -> String {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = Glibc.read(self.readEnd, &buffer, count)
        return got > 0 ? String(decoding: buffer[0..<got], as: UTF8.self) : ""
    }
}

#if os(Linux)
/// A non-blocking Linux eventfd; closed on deinit.
///
/// Swift's Glibc module does not export `<sys/eventfd.h>`, so the test looks `eventfd(3)` up in the C library
/// with dlsym(3) rather than adding a wrapper to the library for tests alone.
final class TestEventDescriptor: @unchecked Sendable {
    let descriptor: CInt

    init() throws {
        typealias MakeEventDescriptor = @convention(c) (CUnsignedInt, CInt) -> CInt
        let library = try #require(dlopen(nil, RTLD_NOW))
        let symbol = try #require(dlsym(library, "eventfd"))
        let makeEventDescriptor = unsafeBitCast(symbol, to: MakeEventDescriptor.self)
        // glibc defines EFD_NONBLOCK and EFD_CLOEXEC as O_NONBLOCK and O_CLOEXEC.
        self.descriptor = makeEventDescriptor(0, O_NONBLOCK | O_CLOEXEC)
        try #require(self.descriptor >= 0)
    }

    /// Adds `value` to the counter (write(2) of 8 bytes).
    func add(_ value: UInt64) {
        var value = value
        _ = write(self.descriptor, &value, MemoryLayout<UInt64>.size)
    }

    /// Reads and resets the counter; `nil` when it was zero.
    func take() -> UInt64? {
        var value: UInt64 = 0
        let count = read(self.descriptor, &value, MemoryLayout<UInt64>.size)
        return count == MemoryLayout<UInt64>.size ? value : nil
    }

    deinit {
        _ = close(self.descriptor)
    }
}
#endif

/// A duplicate of `descriptor` numbered `atLeast` or above, out of the range that other tests' `pipe()` calls
/// reuse, so that a test may close it under a live source without another test opening the same number. Each test
/// that may run beside another takes a range of its own: the cases of a parametrized test run in parallel, and one
/// case's duplicate would take the number the other case just closed.
func highDuplicate(of descriptor: CInt, atLeast minimum: CInt) throws -> CInt {
    let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, minimum)
    try #require(duplicate >= minimum)
    return duplicate
}

/// Closes `descriptor` (close(2)).
func closeDescriptorForTest(_ descriptor: CInt) {
    _ = close(descriptor)
}

extension ExitTest.Result {
    /// What the child process wrote to standard error (a precondition's message, in a debug build).
    var standardErrorText: String {
        String(decoding: self.standardErrorContent, as: UTF8.self)
    }
}

/// How a loop waits on a mode's descriptor sources: all of them in its one ppoll (a small mode), or, from
/// `PollWaiter.largeModeThreshold` sources on, a look at all of them and then a sleep on an epoll set (a large mode). The
/// descriptor tests run through both. A pass that does not block (`runOnePass`) polls every descriptor directly in
/// either; the blocking runs and the cross-thread tests are the ones that reach the look and the epoll sleep, and
/// `LargeModeDescriptorTests` covers what only the epoll path has.
enum DescriptorWaitPath: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case ppoll
    case epoll

    var testDescription: String { self.rawValue }

    /// A loop on `clock` that takes this path from the first descriptor source on: the epoll path is the Linux
    /// backend's, whatever `LOOPKIT_BACKEND` selects for the rest of the suite.
    func makeLoop(clock: any LoopClock = SystemLoopClock()) throws -> Loop {
        guard self == .epoll else { return try Loop(clock: clock) }
        let base = try PollWaiter(backend: .linux, clock: clock)
        base.largeModeThreshold = 1
        let waiter: any LoopWaiter = clock.virtualClock.map {
            VirtualTimeWaiter(wrapping: base, clock: $0)
        } ?? base
        return Loop(clock: clock, waiter: waiter)
    }
}

extension Loop {
    /// A loop on the Linux backend, whatever `LOOPKIT_BACKEND` selects for the rest of the suite.
    static func onLinuxBackend(clock: any LoopClock = SystemLoopClock()) throws -> Loop {
        Loop(clock: clock, waiter: try Loop.makeWaiter(clock: clock, backend: .linux))
    }

    /// The loop's `PollWaiter`, under a virtual-time waiter if there is one.
    var pollWaiter: PollWaiter? {
        (self.waiter as? PollWaiter) ?? ((self.waiter as? VirtualTimeWaiter)?.base as? PollWaiter)
    }
}

extension Loop {
    /// The epoll set of `mode`'s descriptor sources, once a sleep has built it (nil on the ppoll path).
    func epollRegistry(of mode: LoopMode = .default) -> DescriptorRegistry? {
        self.modeItemsByMode[mode].flatMap { self.pollWaiter?.registry(for: $0) }
    }

    /// Runs `mode` for 5 ms at a time until `condition` holds. One short run is not enough on a loaded machine: a run
    /// whose deadline passes before its first wait (its thread preempted for that long) only looks, and does not sleep.
    func runBriefly(mode: LoopMode = .default, until condition: () -> Bool) throws {
        let giveUp = ContinuousClock.now + .seconds(20)
        repeat {
            #expect(self.run(mode: mode, before: self.now + .milliseconds(5)) == .timedOut)
        } while !condition() && ContinuousClock.now < giveUp
        try #require(condition())
    }

    /// Runs `mode` with no deadline while another thread stops it once the run sleeps (after `afterItSleeps`). A stop
    /// that comes while no run is active does nothing, so a stop from a thread that gave up waiting for the sleep would
    /// leave the run asleep for good: the thread stops the run again every 10 s until it has returned, and counts
    /// those stops (`restops`, 0 unless the first stop was lost).
    func runStoppedFromAnotherThread(
        mode: LoopMode = .default, afterItSleeps: @escaping @Sendable () -> Void = {}
    ) -> (result: RunResult, restops: Int) {
        let returned = AtomicCounter()
        let restops = AtomicCounter()
        let stopper = startThread {
            if waitUntil({ self.isWaiting }) { afterItSleeps() }
            self.stop()
            while !waitUntil(limit: .seconds(10), { returned.current == 1 }) {
                restops.increment()
                self.stop()
            }
        }
        let result = self.run(mode: mode, before: .distantFuture)
        returned.store(1)
        stopper.join()
        return (result, restops.current)
    }

    /// Runs `mode` until a run has slept in the mode's epoll set, which registers its descriptor sources there.
    func sleepOnceInEpoll(mode: LoopMode = .default) throws {
        try self.runBriefly(mode: mode) { self.epollRegistry(of: mode) != nil }
    }
}

/// The process's descriptor limit, for getrlimit(2) and setrlimit(2) (an enum case in Glibc's headers).
#if canImport(Glibc)
let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
#endif
