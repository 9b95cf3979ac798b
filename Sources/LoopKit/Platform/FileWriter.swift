#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replaces the file at `path` with `contents`.
///
/// A regular file that the caller owns and may write (or no file yet) is replaced whole: the bytes go to a new file
/// beside it, which rename(2) then puts in its place, so that a reader (a trace viewer reloading it) never sees half of
/// it and a failed write leaves the old file as it was. The new file keeps the old one's group and permission bits
/// (not its extended attributes or ACL). Anything else is written in place (open(2) with `O_TRUNC`), as is a file
/// that cannot be renamed over (a single file bind-mounted into a container): a symbolic link (the link stays), a
/// device such as `/dev/stdout`, a pipe, a file with other hard links, another owner or no write permission, and a
/// file in a directory where none can be made beside it.
///
/// A failing close(2) is reported too: on NFS, or under a quota enforced late, it is where a lost write shows.
func writeWholeFile(path: String, contents: [UInt8]) throws(SystemCallError) {
    var status = stat()
    // errno read inside the call's string bridging, before anything else can set it.
    let lstatError = path.withCString { lstat($0, &status) == 0 ? 0 : errno }
    let exists = lstatError == 0
    let isReplaceable = exists
        ? (status.st_mode & S_IFMT) == S_IFREG && status.st_nlink == 1 && status.st_uid == geteuid()
            && faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0  // a read-only file stays one: open reports EACCES
        : lstatError == ENOENT
    guard isReplaceable, let replacement = makeFile(beside: path, like: exists ? status : nil) else {
        try writeInPlace(path: path, contents: contents)
        return
    }
    do {
        try writeAndClose(contents, to: replacement.descriptor)
        _ = try nonBlockingCall("rename") { rename(replacement.path, path) }
    } catch let error where error.call == "rename" && (error.code == EBUSY || error.code == EXDEV) {
        unlink(replacement.path)  // a mount point: only its contents can change
        try writeInPlace(path: path, contents: contents)
    } catch {
        unlink(replacement.path)  // the old file, if any, is untouched
        throw error
    }
}

/// Opens a new, empty file in `path`'s directory, named after it, with `existing`'s group and permission bits (those
/// of a new file, 0644 less the umask, without one); `nil` if none can be made there so.
private func makeFile(beside path: String, like existing: stat?) -> (path: String, descriptor: CInt)? {
    for _ in 0..<4 {  // another name if one is taken
        let candidate = "\(path).\(getpid())-\(UInt32.random(in: 0 ... .max)).tmp"
        // Private until it has the old file's group and bits: no one else may open it meanwhile.
        let descriptor = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, existing == nil ? 0o644 : 0o600)
        if descriptor == -1 {
            if errno == EEXIST || errno == EINTR { continue }
            return nil  // EACCES, EROFS, ENAMETOOLONG...: the caller writes in place, and reports what that meets
        }
        if let existing, !takeOn(existing, descriptor) {
            closeDescriptor(descriptor)
            unlink(candidate)
            return nil
        }
        return (candidate, descriptor)
    }
    return nil
}

/// Gives the file open as `descriptor` the group and permission bits of `existing`; whether it could.
private func takeOn(_ existing: stat, _ descriptor: CInt) -> Bool {
    var made = stat()
    guard fstat(descriptor, &made) == 0 else { return false }
    if made.st_gid != existing.st_gid && fchown(descriptor, uid_t.max, existing.st_gid) == -1 {  // -1: owner kept
        return false
    }
    return fchmod(descriptor, existing.st_mode & 0o7777) == 0
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
