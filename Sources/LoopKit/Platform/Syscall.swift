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

/// The current thread's `errno`.
var currentErrno: Int32 { errno }

/// Runs `body`, a system call that returns -1 and sets `errno` on failure, the way every LoopKit call does.
///
/// `EINTR` is retried; `EAGAIN` becomes `.wouldBlock`; `EBADF` and `EFAULT` trap, since they mean LoopKit passed
/// a descriptor or buffer it does not own; anything else throws a `SystemCallError` naming `call`. Never use it for
/// `close`, which must not be retried.
@inline(never)  // nothing may run between the call and the read of `errno`
func nonBlockingCall<R: FixedWidthInteger & Sendable>(
    _ call: String,
    _ body: () -> R
) throws(SystemCallError) -> IOResult<R> {
    while true {
        let result = body()
        guard result == -1 else { return .processed(result) }
        let code = errno
        switch code {
        case EINTR:
            continue
        case EAGAIN, EWOULDBLOCK:
            return .wouldBlock
        case EBADF, EFAULT:
            preconditionFailure("LoopKit bug: \(call) failed with errno \(code)")
        default:
            throw SystemCallError(call: call, code: code)
        }
    }
}

/// Closes `descriptor` once; `close` is never retried, since on Linux the descriptor is gone even after `EINTR`.
func closeDescriptor(_ descriptor: CInt) {
    _ = close(descriptor)  // close(2)
}
