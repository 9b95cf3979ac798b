#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replaces the file at `path` with `contents` (open(2) with `O_CREAT | O_TRUNC | O_CLOEXEC`, write(2), close(2)).
func writeWholeFile(path: String, contents: [UInt8]) throws(SystemCallError) {
    guard case .processed(let descriptor) = try nonBlockingCall("open", {
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    }) else {
        throw SystemCallError(call: "open", code: EAGAIN)
    }
    defer { closeDescriptor(descriptor) }
    var offset = 0
    while offset < contents.count {
        let result = contents.withUnsafeBytes { buffer in
            Result { () throws(SystemCallError) in
                try nonBlockingCall("write") { write(descriptor, buffer.baseAddress! + offset, buffer.count - offset) }
            }
        }
        guard case .processed(let written) = try result.get() else {
            throw SystemCallError(call: "write", code: EAGAIN)  // a blocking file descriptor never says this
        }
        offset += written
    }
}
