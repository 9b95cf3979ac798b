#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// A system call failed: which call, and the `errno` it left.
///
/// LoopKit throws this from the few operations that create operating-system resources (a loop's wake-up pipe,
/// a thread). Its description reads like `pipe2 failed: Too many open files (errno 24)`.
public struct SystemCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name of the C call that failed, such as `"pipe2"`.
    public let call: String
    /// The `errno` value the call left.
    public let code: Int32

    public init(call: String, code: Int32) {
        self.call = call
        self.code = code
    }

    /// `call` does not exist on this system (`ENOSYS`).
    static func unsupported(_ call: String) -> SystemCallError {
        SystemCallError(call: call, code: ENOSYS)
    }

    public var description: String {
        // strerror_r, not strerror: glibc's strerror writes an unknown code's message into one buffer for all threads.
        var buffer = [CChar](repeating: 0, count: 256)
        cloopkit_error_message(self.code, &buffer, UInt(buffer.count))
        let message = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(self.call) failed: \(message) (errno \(self.code))"
    }
}
