import CLoopBench
#if canImport(Glibc)
import Glibc
#endif

/// What a non-blocking socket call did.
enum SocketIO: Equatable {
    /// It moved this many bytes (more than zero).
    case transferred(Int)
    /// It would have blocked: nothing to read, or no room to write.
    case wouldBlock
    /// The peer closed the stream (a read of zero bytes).
    case closed
    /// The connection failed (reset, or another error).
    case failed

    init(_ result: Int) {
        switch result {
        case 1...: self = .transferred(result)
        case 0: self = .closed
        case Int(CBENCH_WOULD_BLOCK): self = .wouldBlock
        default: self = .failed
        }
    }
}

/// TCP on 127.0.0.1 for the echo scenario: the client's connections and the Dispatch peer's listener.
///
/// Every descriptor is non-blocking and close-on-exec, and every connection has TCP_NODELAY, on both sides and for
/// every server, so that a 64-byte message leaves at once. The calls live in `CLoopBench` (socket.c).
enum LoopbackSocket {
    /// A listener on an ephemeral port of 127.0.0.1, or `nil` (socket, bind, listen).
    static func listen() -> (descriptor: CInt, port: Int)? {
        var port: CInt = 0
        let descriptor = cbench_tcp_listen_loopback(&port)
        return descriptor >= 0 ? (descriptor, Int(port)) : nil
    }

    /// What `accept(_:)` found.
    enum Accepted {
        case connection(CInt)
        case noneWaiting
        case failed
    }

    /// Accepts one waiting connection (accept4).
    static func accept(_ listener: CInt) -> Accepted {
        let result = cbench_tcp_accept(listener)
        switch result {
        case 0...: return .connection(result)
        case CBENCH_WOULD_BLOCK: return .noneWaiting
        default: return .failed
        }
    }

    /// A connection to 127.0.0.1:`port` (connect, blocking; then made non-blocking), or the `errno` it failed with.
    static func connect(port: Int) -> Result<CInt, ConnectFailure> {
        let descriptor = cbench_tcp_connect_loopback(CInt(port))
        return descriptor >= 0 ? .success(descriptor) : .failure(ConnectFailure(code: errno))
    }

    struct ConnectFailure: Error {
        let code: CInt
    }

    /// Reads what is there, up to the buffer's size (recv).
    @inline(__always)
    static func receive(_ descriptor: CInt, into buffer: UnsafeMutableRawBufferPointer) -> SocketIO {
        SocketIO(cbench_recv(descriptor, buffer.baseAddress, UInt(buffer.count)))
    }

    /// Writes what the socket takes of `bytes` (send with MSG_NOSIGNAL).
    ///
    /// - Precondition: `bytes` is not empty (a count of zero would read as `.closed`).
    @inline(__always)
    static func send(_ descriptor: CInt, _ bytes: UnsafeRawBufferPointer) -> SocketIO {
        SocketIO(cbench_send(descriptor, bytes.baseAddress, UInt(bytes.count)))
    }

    /// Closes the descriptor (close).
    static func close(_ descriptor: CInt) {
        _ = cbench_close(descriptor)
    }
}
