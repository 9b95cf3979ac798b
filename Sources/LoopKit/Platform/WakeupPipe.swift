#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// The self-pipe that wakes a sleeping loop: any thread writes a byte, the loop polls the read end.
///
/// Both ends are non-blocking and close-on-exec. Callers coalesce: a loop writes at most one byte per drain
/// (see `SharedState.requestWakeup()`), and a write that would block means a byte is already waiting, which is
/// as good as success. The ends are closed only when the owning loop is deinitialized, when no other thread can
/// hold a reference to it, so a late `notify()` can never hit a closed or reused descriptor.
final class WakeupPipe: Sendable {  // checked Sendable: every stored property is a `let`
    let readEnd: CInt
    let writeEnd: CInt

    /// Creates the pipe (pipe2(2) with `O_NONBLOCK | O_CLOEXEC`).
    init() throws(SystemCallError) {
        var ends: (CInt, CInt) = (-1, -1)
        _ = try withUnsafeMutableBytes(of: &ends) { raw throws(SystemCallError) in
            try nonBlockingCall("pipe2") { cloopkit_pipe_nonblocking(raw.baseAddress!.assumingMemoryBound(to: CInt.self)) }
        }
        self.readEnd = ends.0
        self.writeEnd = ends.1
    }

    deinit {
        closeDescriptor(self.readEnd)
        closeDescriptor(self.writeEnd)
    }

    /// Makes the read end readable (write(2) of one byte). A full pipe already wakes the loop. The producer's
    /// thread.
    ///
    /// A kernel short of memory for the pipe's page (ENOMEM, a memory cgroup at its limit) is given a millisecond at a
    /// time, for up to `Self.notifyRetries` tries: the wake-up must not be dropped (the loop counts it as on its way),
    /// nor the producer killed by a passing shortage.
    func notify() {
        var byte: UInt8 = 1
        var tries = 0
        while true {
            do {
                _ = try nonBlockingCall("write") { write(self.writeEnd, &byte, 1) }
                return
            } catch where error.code == ENOMEM && tries < Self.notifyRetries {
                tries += 1
                SystemPoller.pauseAfterFailedWait(upTo: -1)
            } catch {
                trap("write (waking the loop)", error)
            }
        }
    }

    /// How many times `notify()` tries again after ENOMEM, a millisecond apart, before it traps.
    static let notifyRetries = 1_000

    /// Sleeps until the pipe is notified or `nanoseconds` pass, without draining it, so that the wait that follows
    /// still sees the wake-up: ppoll(2) for `.nanosecondTimeout`, poll(2) for `.millisecondTimeout` (rounded up to a
    /// millisecond). A signal or a failure ends it early. The loop's thread.
    func sleep(untilNotifiedOrFor nanoseconds: Int64, call: SystemPoller.Call) {
        var entry = pollfd(fd: self.readEnd, events: Int16(POLLIN), revents: 0)
        // Named apart from the waits', so that a fault a test scripts for a wait is not taken by a nap.
        _ = try? call.callOnce(on: &entry, count: 1, timeoutNanoseconds: nanoseconds, descriptors: .loopKit,
                               ppollName: "ppoll (a nap)", pollName: "poll (a nap)")
    }

    /// Reads every pending byte (read(2) until `EAGAIN`).
    func drain() {
        var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let size = MemoryLayout.size(ofValue: buffer)
        while true {
            let result: IOResult<Int>
            do {
                result = try withUnsafeMutableBytes(of: &buffer) { raw throws(SystemCallError) in
                    try nonBlockingCall("read") { read(self.readEnd, raw.baseAddress, size) }
                }
            } catch {
                trap("read (draining the wake-up pipe)", error)
            }
            switch result {
            case .wouldBlock, .processed(0):
                return
            case .processed(let count) where count < size:
                return
            case .processed:
                continue
            }
        }
    }
}
