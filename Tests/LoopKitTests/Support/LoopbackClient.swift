import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client on loopback, for talking to a server under test from plain threads.
final class LoopbackClient: @unchecked Sendable {
    let descriptor: Int32

    /// Connects to `127.0.0.1:port`.
    init(port: UInt16) throws {
        self.descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.descriptor >= 0 else { throw DemoProcessError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            close(self.descriptor)
            throw DemoProcessError("connect to 127.0.0.1:\(port): errno \(error)")
        }
    }

    deinit {
        close(self.descriptor)
    }

    /// Sends all of `bytes`.
    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.send(self.descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw DemoProcessError("send: errno \(errno)") }
            offset += count
        }
    }

    /// Ends the client's output (the server sees the end of its input).
    func finishSending() {
        shutdown(self.descriptor, Int32(SHUT_WR))
    }

    /// Reads until the server closes, or `limit` bytes have come; `timeout` bounds each wait for data.
    func receive(upTo limit: Int = .max, timeout: Duration = .seconds(30)) throws -> [UInt8] {
        // At least 1 µs: a zero timeval would mean no timeout at all.
        let (seconds, attoseconds) = timeout.components
        let microseconds = max(Int(attoseconds / 1_000_000_000_000), seconds > 0 ? 0 : 1)
        var timeval = timeval(tv_sec: Int(seconds), tv_usec: microseconds)
        setsockopt(self.descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeval, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while received.count < limit {
            let count = chunk.withUnsafeMutableBytes {
                read(self.descriptor, $0.baseAddress, min($0.count, limit - received.count))
            }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw DemoProcessError("read: errno \(errno) after \(received.count) bytes") }
            if count == 0 { break }
            received += chunk[..<count]
        }
        return received
    }
}
