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
/// device such as `/dev/stdout`, a pipe, a file with other hard links, another owner, no write permission or a group
/// the caller is not in, and a file in a directory where none can be made beside it.
///
/// A failing close(2) is reported too: on NFS, or under a quota enforced late, it is where a lost write shows.
func writeWholeFile(path: String, contents: [UInt8]) throws(SystemCallError) {
    var status = stat()
    // errno read inside the call's string bridging, before anything else can set it.
    let lstatError = path.withCString { lstat($0, &status) == 0 ? 0 : errno }
    let existing = lstatError == 0 ? status : nil
    let user = geteuid()
    // A read-only file stays one (its owner's write bit, which root needs not): writing in place reports EACCES.
    let isReplaceable = existing.map {
        ($0.st_mode & S_IFMT) == S_IFREG && $0.st_nlink == 1 && $0.st_uid == user
            && (user == 0 || $0.st_mode & S_IWUSR != 0)
    } ?? (lstatError == ENOENT)
    guard isReplaceable, let replacement = makeFile(beside: path, withGroupOf: existing) else {
        try writeInPlace(path: path, contents: contents)
        return
    }
    do {
        // The bits after the data: a write clears the set-user-ID bit (and set-group-ID) of a file it changes.
        try writeAndClose(contents, to: replacement.descriptor, thenGivingItTheBitsOf: existing)
        _ = try nonBlockingCall("rename") { rename(replacement.path, path) }
    } catch let error where error.call == "rename" && (error.code == EBUSY || error.code == EXDEV) {
        unlink(replacement.path)  // a mount point: only its contents can change
        try writeInPlace(path: path, contents: contents)
    } catch {
        unlink(replacement.path)  // the old file, if any, is untouched
        throw error
    }
}

/// Opens a new, empty file in `path`'s directory, named after it: readable by its owner only, in `existing`'s group
/// (without one, a new file's mode, 0644 less the umask); `nil` if none can be made there so (a group the caller is
/// not in, say).
private func makeFile(beside path: String, withGroupOf existing: stat?) -> (path: String, descriptor: CInt)? {
    for _ in 0..<4 {  // another name if one is taken
        let candidate = "\(path).\(getpid())-\(UInt32.random(in: 0 ... .max)).tmp"
        // Private until it has the old file's bits: no one else may open it meanwhile.
        let mode: mode_t = existing == nil ? 0o644 : 0o600
        let (descriptor, code) = candidate.withCString { name in
            let descriptor = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
            return (descriptor, descriptor == -1 ? errno : 0)
        }
        if descriptor == -1 {
            if code == EEXIST || code == EINTR { continue }
            return nil  // EACCES, EROFS, ENAMETOOLONG...: the caller writes in place, and reports what that meets
        }
        var made = stat()
        // uid_t.max is -1: the owner stays.
        if let existing, fstat(descriptor, &made) != 0
            || (made.st_gid != existing.st_gid && fchown(descriptor, uid_t.max, existing.st_gid) == -1) {
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
    try writeAndClose(contents, to: descriptor, thenGivingItTheBitsOf: nil)
}

/// Writes all of `contents` to `descriptor`, gives the file `existing`'s permission bits if given, and closes it,
/// whether or not that succeeded.
private func writeAndClose(_ contents: [UInt8], to descriptor: CInt,
                           thenGivingItTheBitsOf existing: stat?) throws(SystemCallError) {
    do {
        try writeAll(contents, to: descriptor)
        if let existing {
            _ = try nonBlockingCall("fchmod") { fchmod(descriptor, existing.st_mode & 0o7777) }
        }
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
