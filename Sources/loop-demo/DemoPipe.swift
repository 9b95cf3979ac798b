#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem
import Synchronization

/// A pipe between threads: one writes records, the loop's descriptor source reads them.
///
/// Both ends are close-on-exec; the read end is non-blocking, because the loop's handler must never block (it reads
/// until the pipe says "would block", or one record per call). Writes of up to `PIPE_BUF` bytes are atomic, so a
/// record written whole is read whole. Any thread may write and close; closing twice does nothing.
final class DemoPipe: Sendable {
    /// The end the loop watches.
    let readEnd: CInt
    private let writeEnd: Mutex<CInt>
    private let readEndOpen = Mutex(true)

    /// What a non-blocking read found.
    enum ReadResult: Equatable {
        case bytes([UInt8])
        /// Nothing to read yet (EAGAIN).
        case wouldBlock
        /// The write end is closed and everything was read.
        case endOfFile
    }

    /// Opens a pipe (pipe2(2) with `O_CLOEXEC | O_NONBLOCK`, then fcntl(2) to make the write end blocking).
    ///
    /// Close-on-exec from the start: a process spawned at the same moment must not inherit an end and keep it open.
    ///
    /// - Throws: `DemoError` naming the call when the process is out of descriptors.
    init() throws(DemoError) {
        var ends: [CInt] = [-1, -1]
        guard cloopkit_pipe_nonblocking(&ends) == 0 else {
            throw DemoError("pipe2 failed: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) & ~O_NONBLOCK)
        self.readEnd = ends[0]
        self.writeEnd = Mutex(ends[1])
    }

    /// Writes `bytes` whole (write(2)); `false` once the write end is closed or the reader went away. Any thread.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        self.writeEnd.withLock { descriptor in
            guard descriptor >= 0 else { return false }
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes {
                    systemWrite(descriptor, $0.baseAddress! + offset, $0.count - offset)
                }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }

    /// Reads up to `maximum` bytes without blocking (read(2)). Loop thread.
    func read(maximum: Int) -> ReadResult {
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let count = buffer.withUnsafeMutableBytes { systemRead(self.readEnd, $0.baseAddress!, $0.count) }
            if count > 0 { return .bytes(Array(buffer[0..<count])) }
            if count == 0 { return .endOfFile }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .endOfFile
        }
    }

    /// Closes the write end: the reader then sees a hang-up and end of file. Any thread.
    func closeWriteEnd() {
        self.writeEnd.withLock { descriptor in
            guard descriptor >= 0 else { return }
            _ = close(descriptor)
            descriptor = -1
        }
    }

    /// Closes the read end. Cancel the descriptor source watching it first.
    func closeReadEnd() {
        self.readEndOpen.withLock { isOpen in
            guard isOpen else { return }
            _ = close(self.readEnd)
            isOpen = false
        }
    }

    deinit {
        self.closeWriteEnd()
        self.closeReadEnd()
    }
}

// File-scope aliases: inside `DemoPipe`, `write` and `read` name the methods.
private func systemWrite(_ descriptor: CInt, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}

private func systemRead(_ descriptor: CInt, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
