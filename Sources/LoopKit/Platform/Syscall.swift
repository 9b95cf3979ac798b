#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a non-blocking system call did.
enum IOResult<Value: Sendable>: Sendable {
    case processed(Value)
    case wouldBlock
}

/// What to do when a call fails with `EINTR`.
enum InterruptPolicy {
    /// Call again at once (the call has nothing that a retry would get wrong).
    case retry
    /// Return `nil`: the caller recomputes what it passes (a wait's timeout) before calling again.
    case report
}

/// Who owns the descriptors a call is given, which decides what `EBADF` means.
enum DescriptorOwner {
    /// LoopKit's own: `EBADF` is a LoopKit bug, and traps.
    case loopKit
    /// The user's (a watched descriptor may be closed without cancelling its source): `EBADF` is thrown.
    case user
}

/// Runs `body`, a system call that returns -1 and sets `errno` on failure, the way every LoopKit call does.
///
/// `errno` is read first, before anything else can run. `EINTR` is retried (or reported as `nil`, with
/// `interrupts: .report`); `EAGAIN` becomes `.wouldBlock`; `EBADF` (for LoopKit's own descriptors) and `EFAULT`
/// trap, since they mean LoopKit passed a descriptor or buffer it does not own; anything else throws a
/// `SystemCallError` naming `call`. Never use it for `close`, which must not be retried.
@inline(never)  // nothing may run between the call and the read of `errno`
func systemCall<R: FixedWidthInteger & Sendable>(
    _ call: StaticString,
    interrupts: InterruptPolicy = .retry,
    descriptors: DescriptorOwner = .loopKit,
    _ body: () -> R
) throws(SystemCallError) -> IOResult<R>? {
    while true {
        let result: R
        if SystemCallFaults.isArmed, let fault = SystemCallFaults.takeFault(for: call) {
            errno = fault  // a test's scripted failure: the call is not made
            result = -1
        } else {
            result = body()
        }
        guard result == -1 else { return .processed(result) }
        let code = errno
        switch code {
        case EINTR:
            if interrupts == .report { return nil }
            continue
        case EAGAIN, EWOULDBLOCK:
            return .wouldBlock
        case EBADF where descriptors == .user:
            throw SystemCallError(call: "\(call)", code: code)
        case EBADF, EFAULT:
            fatalError("LoopKit bug: \(call) failed with errno \(code)")
        default:
            throw SystemCallError(call: "\(call)", code: code)
        }
    }
}

/// `systemCall` for calls whose `EINTR` is simply retried: the result is never `nil`.
@inline(__always)
func nonBlockingCall<R: FixedWidthInteger & Sendable>(
    _ call: StaticString,
    descriptors: DescriptorOwner = .loopKit,
    _ body: () -> R
) throws(SystemCallError) -> IOResult<R> {
    // `.retry` never returns nil.
    try systemCall(call, interrupts: .retry, descriptors: descriptors, body)!
}

/// Traps with a message that names `call` and the error, in every build (a `precondition`'s message is stripped
/// under `-O`; `fatalError`'s is not).
func trap(_ call: StaticString, _ error: SystemCallError) -> Never {
    fatalError("LoopKit: \(call): \(error)")
}

/// Closes `descriptor` once (close(2)); never retried, since on Linux the descriptor is gone even after `EINTR`.
func closeDescriptor(_ descriptor: CInt) {
    // EINTR and EIO still release the number; EBADF would be a double close, a LoopKit bug.
    let result = close(descriptor)
    if result == -1 && errno == EBADF {
        fatalError("LoopKit bug: close(\(descriptor)) of a descriptor that is not open")
    }
}
