import CLoopKitSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The C library's socket calls, reached from file scope: inside `EchoSocket` its own `listen`, `read`, `send` and
// `close` hide them, and a module-qualified name (`Glibc.read`) would not build on Darwin.
private func systemListen(_ descriptor: CInt, _ backlog: CInt) -> CInt { listen(descriptor, backlog) }
private func systemRead(_ descriptor: CInt, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
private func systemSend(_ descriptor: CInt, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: CInt) -> Int {
    send(descriptor, bytes, count, flags)
}
private func systemClose(_ descriptor: CInt) -> CInt { close(descriptor) }
private func systemShutdownOutput(_ descriptor: CInt) -> CInt { shutdown(descriptor, CInt(SHUT_WR)) }

/// The socket calls of the echo server, each returning what happened instead of a bare `-1` and `errno`.
///
/// Every descriptor is non-blocking and close-on-exec. Any thread.
enum EchoSocket {
    /// What a non-blocking read or write did.
    enum Transfer: Equatable {
        /// This many bytes moved (more than zero).
        case moved(Int)
        /// Nothing to do now (`EAGAIN`): wait for the descriptor to be ready again.
        case wouldBlock
        /// The peer closed its side (a read returned 0).
        case endOfInput
        /// The call failed with this `errno`.
        case failed(CInt)
    }

    /// A listening TCP socket on `127.0.0.1:port` (`port` 0: any free port), with `SO_REUSEADDR`.
    ///
    /// - Returns: The descriptor and the port it listens on.
    /// - Throws: `DemoError` naming the call that failed.
    static func listen(port: UInt16, backlog: CInt = 1024) throws(DemoError) -> (descriptor: CInt, port: UInt16) {
        let descriptor = cloopkit_stream_socket_nonblocking(AF_INET)
        guard descriptor >= 0 else { throw DemoError("socket: \(self.describe(errno))") }
        var one: CInt = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian  // 127.0.0.1: loopback only
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, systemListen(descriptor, backlog) == 0 else {
            let error = errno
            close(descriptor)
            throw DemoError("cannot listen on 127.0.0.1:\(port): \(self.describe(error))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    /// Accepts one connection, non-blocking and close-on-exec, with Nagle's algorithm off (an echo answers at once).
    ///
    /// - Returns: The new descriptor, or the `errno` of the failure (`EAGAIN` when none is waiting).
    static func accept(from listener: CInt) -> Result<CInt, AcceptError> {
        while true {
            let descriptor = cloopkit_accept_nonblocking(listener)
            if descriptor >= 0 {
                var one: CInt = 1
                setsockopt(descriptor, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
                self.suppressSIGPIPE(descriptor)
                return .success(descriptor)
            }
            let error = errno
            if error != EINTR {
                return .failure(AcceptError(code: error))
            }
        }
    }

    /// An `accept` failure.
    struct AcceptError: Error {
        let code: CInt

        /// Nothing is waiting.
        var isWouldBlock: Bool { self.code == EAGAIN || self.code == EWOULDBLOCK }

        /// The process or the system is out of something (descriptors, buffers): retrying at once would spin.
        var isResourceExhaustion: Bool {
            [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(self.code)
        }
    }

    /// Reads what is there, up to `buffer.count` bytes.
    static func read(_ descriptor: CInt, into buffer: UnsafeMutableRawBufferPointer) -> Transfer {
        while true {
            let count = systemRead(descriptor, buffer.baseAddress, buffer.count)
            if count > 0 { return .moved(count) }
            if count == 0 { return .endOfInput }
            let error = errno
            if error == EINTR { continue }
            return error == EAGAIN || error == EWOULDBLOCK ? .wouldBlock : .failed(error)
        }
    }

    /// Sends what the socket takes of `bytes`, without `SIGPIPE` when the peer has gone (`EPIPE` is returned).
    static func send(_ descriptor: CInt, _ bytes: UnsafeRawBufferPointer) -> Transfer {
        while true {
            let count = systemSend(descriptor, bytes.baseAddress, bytes.count, self.sendFlags)
            if count > 0 { return .moved(count) }
            let error = errno
            if count == 0 || error == EAGAIN || error == EWOULDBLOCK { return .wouldBlock }
            if error == EINTR { continue }
            return .failed(error)
        }
    }

    /// Closes `descriptor`; a failure is not actionable after the close (the number is free either way on Linux).
    static func close(_ descriptor: CInt) {
        _ = systemClose(descriptor)
    }

    /// Ends the output (shutdown(2), SHUT_WR): the peer reads everything sent so far, then the end.
    static func endOutput(_ descriptor: CInt) {
        _ = systemShutdownOutput(descriptor)
    }

    /// How `send` is asked not to raise `SIGPIPE`: a flag per call on Linux; elsewhere `suppressSIGPIPE(_:)` sets a
    /// socket option instead.
    #if os(Linux)
    private static let sendFlags = CInt(MSG_NOSIGNAL)
    #else
    private static let sendFlags: CInt = 0
    #endif

    /// Makes writes to `descriptor` fail with `EPIPE` instead of raising `SIGPIPE`, where the system has no per-call
    /// flag for it (Darwin's `SO_NOSIGPIPE`); nothing to do on Linux, whose `send` takes `MSG_NOSIGNAL`.
    private static func suppressSIGPIPE(_ descriptor: CInt) {
        #if !os(Linux)
        var one: CInt = 1
        setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<CInt>.size))
        #endif
    }

    /// `errno`'s name and text, for a log line: `"ECONNRESET (Connection reset by peer)"`.
    static func describe(_ code: CInt) -> String {
        let names: [CInt: String] = [EMFILE: "EMFILE", ENFILE: "ENFILE", ENOBUFS: "ENOBUFS", ENOMEM: "ENOMEM",
                                     ECONNRESET: "ECONNRESET", EPIPE: "EPIPE", EADDRINUSE: "EADDRINUSE",
                                     EACCES: "EACCES", ETIMEDOUT: "ETIMEDOUT", ECONNABORTED: "ECONNABORTED"]
        let text = String(cString: strerror(code))
        return names[code].map { "\($0) (\(text))" } ?? "errno \(code) (\(text))"
    }
}
