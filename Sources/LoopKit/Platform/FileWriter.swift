#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replaces the file at `path` with `contents`.
///
/// A regular file of the caller's own (or no file yet) is replaced whole: the bytes go to a new file beside it, which
/// rename(2) then puts in its place, so that a reader (a trace viewer reloading it) never sees half of it and a failed
/// write leaves the old file as it was. The new file keeps the old one's permission bits. Anything else is written in
/// place (open(2) with `O_TRUNC`): a symbolic link (the link stays), a device such as `/dev/stdout`, a pipe, a file
/// with other hard links or another owner, or one in a directory where no file can be made beside it.
///
/// A failing close(2) is reported too: on NFS, or under a quota enforced late, it is where a lost write shows.
func writeWholeFile(path: String, contents: [UInt8]) throws(SystemCallError) {
    var status = stat()
    let exists = lstat(path, &status) == 0
    let isReplaceable = exists
        ? (status.st_mode & S_IFMT) == S_IFREG && status.st_nlink == 1 && status.st_uid == geteuid()
        : errno == ENOENT
    guard isReplaceable,
          let replacement = makeFile(beside: path, permissions: exists ? status.st_mode & 0o7777 : nil)
    else {
        try writeInPlace(path: path, contents: contents)
        return
    }
    do {
        try writeAndClose(contents, to: replacement.descriptor)
        _ = try nonBlockingCall("rename") { rename(replacement.path, path) }
    } catch {
        unlink(replacement.path)  // the old file, if any, is untouched
        throw error
    }
}

/// Opens a new, empty file in `path`'s directory, named after it, with `permissions` (those of a new file, 0644 less
/// the umask, when `nil`); `nil` if none can be made there.
private func makeFile(beside path: String, permissions: mode_t?) -> (path: String, descriptor: CInt)? {
    for _ in 0..<4 {  // another name if one is taken
        let candidate = "\(path).\(getpid())-\(UInt32.random(in: 0 ... .max)).tmp"
        let descriptor = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if descriptor == -1 {
            if errno == EEXIST || errno == EINTR { continue }
            return nil  // EACCES, EROFS, ENAMETOOLONG...: the caller writes in place, and reports what that meets
        }
        if let permissions, fchmod(descriptor, permissions) == -1 {
            closeDescriptor(descriptor)
            unlink(candidate)
            return nil
        }
        return (candidate, descriptor)
    }
    return nil
}

/// Truncates and writes the file at `path` (following a symbolic link; creating a regular file if there is none).
private func writeInPlace(path: String, contents: [UInt8]) throws(SystemCallError) {
    guard case .processed(let descriptor) = try nonBlockingCall("open", {
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    }) else {
        throw SystemCallError(call: "open", code: EAGAIN)
    }
    try writeAndClose(contents, to: descriptor)
}

/// Writes all of `contents` to `descriptor` and closes it, whether or not the write succeeded.
private func writeAndClose(_ contents: [UInt8], to descriptor: CInt) throws(SystemCallError) {
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
