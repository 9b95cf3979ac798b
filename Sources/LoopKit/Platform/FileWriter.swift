#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replaces the file at `path` with `contents` (open(2) with `O_CREAT | O_TRUNC | O_CLOEXEC`, write(2), close(2)).
///
/// A failing close(2) is reported too: on NFS, or under a quota enforced late, it is where a lost write shows.
func writeWholeFile(path: String, contents: [UInt8]) throws(SystemCallError) {
    guard case .processed(let descriptor) = try nonBlockingCall("open", {
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    }) else {
        throw SystemCallError(call: "open", code: EAGAIN)
    }
    do {
        try writeAll(contents, to: descriptor)
    } catch {
        closeDescriptor(descriptor)
        throw error
    }
    // Once, never retried: the number is released even when close fails (EINTR included).
    if close(descriptor) == -1 {
        let code = errno
        if code == EBADF {
            fatalError("LoopKit bug: close(\(descriptor)) of a descriptor that is not open")
        }
        if code != EINTR {
            throw SystemCallError(call: "close", code: code)
        }
    }
}

/// Writes all of `contents` to the blocking `descriptor`, resuming after short writes.
private func writeAll(_ contents: [UInt8], to descriptor: CInt) throws(SystemCallError) {
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
        guard written > 0 else {
            throw SystemCallError(call: "write", code: EIO)  // no progress, and no error to say why
        }
        offset += written
    }
}
