#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replaces the file at `path` with `contents` (open(2) with `O_CREAT | O_TRUNC | O_CLOEXEC`, write(2), close(2)).
func writeWholeFile(path: String, contents: [UInt8]) throws(SystemCallError) {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else {
        throw SystemCallError(call: "open", code: currentErrno)
    }
    defer { closeDescriptor(descriptor) }
    var offset = 0
    while offset < contents.count {
        let written = contents.withUnsafeBytes { buffer in
            write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
        }
        if written < 0 {
            let code = currentErrno
            if code == EINTR { continue }
            throw SystemCallError(call: "write", code: code)
        }
        offset += written
    }
}
