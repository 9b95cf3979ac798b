import CLoopBench
import Foundation

/// Why an echo client stopped short.
enum EchoClientFailure: Error, CustomStringConvertible {
    /// connect(2) failed with `code`.
    case cannotConnect(port: Int, code: CInt)
    case cannotWatch
    /// The server closed the connection, or it failed (reset).
    case connectionLost(connection: Int)
    /// Nothing happened for `EchoClient.stallMilliseconds`: the server stopped answering.
    case noAnswer
    /// What came back is not what was sent.
    case corrupted(connection: Int)
    /// Data or a hang-up on a connection with nothing in flight.
    case unexpectedTraffic(connection: Int)

    /// Whether the server is at fault (it refused or stopped answering, or answered wrongly), rather than the
    /// machine (a descriptor, port, memory or epoll limit).
    var isServers: Bool {
        switch self {
        case .cannotConnect(_, let code): code == ECONNREFUSED || code == ETIMEDOUT || code == ECONNRESET
        case .cannotWatch: false
        case .connectionLost, .noAnswer, .corrupted, .unexpectedTraffic: true
        }
    }

    var description: String {
        switch self {
        case .cannotConnect(let port, let code): "cannot connect to 127.0.0.1:\(port) (errno \(code))"
        case .cannotWatch: "epoll_ctl failed"
        case .connectionLost(let connection): "the server closed or reset connection \(connection)"
        case .noAnswer: "no answer from the server for \(EchoClient.stallMilliseconds / 1_000) s"
        case .corrupted(let connection): "connection \(connection) echoed bytes that were not sent"
        case .unexpectedTraffic(let connection): "connection \(connection) had traffic with nothing in flight"
        }
    }
}

/// The echo scenario's client: 50 connections, each keeping one 64-byte message in flight (a closed loop), and one
/// more connection for bulk transfers, all waited on with one epoll instance on the calling thread.
///
/// Every server is measured by this same code on the same thread, so that the client's own costs fall on all of
/// them alike. Every echoed byte is compared with what was sent. Used from one thread.
final class EchoClient {
    /// The message connections of the echo scenario.
    static let connectionCount = 50
    static let messageSize = 64
    /// How long a wait for any progress may last before the server counts as stuck: a hang guard, thousands of times
    /// the slowest round trip.
    static let stallMilliseconds: CInt = 5_000

    /// How many connections keep a message in flight.
    let connectionCount: Int
    private let epoll: CInt
    /// The message connections, token `0..<connectionCount`, then the bulk connection, token `connectionCount`.
    private let descriptors: [CInt]
    /// Connections that are opened and held, never used: the server keeps them beside the busy ones.
    private var idleDescriptors: [CInt] = []
    private var bulkToken: Int { self.connectionCount }
    private let events = UnsafeMutableBufferPointer<cbench_ready_event>.allocate(capacity: 64)
    /// Read buffer of the bulk transfers.
    private let bulkBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)

    // MARK: Per message connection: the message in flight
    /// `messageSize` bytes per connection: the message sent, and what has come back of it.
    private let outbox: UnsafeMutableRawBufferPointer
    private let inbox: UnsafeMutableRawBufferPointer
    private var unsent: [Int]
    private var received: [Int]
    private var sentAt: [UInt64]
    private var isWatchingWritable: [Bool]
    private var sequence: UInt64 = 0

    /// Opens every connection to 127.0.0.1:`port`: `connections` that keep a message in flight, the bulk one, and
    /// `idleConnections` that are never used.
    init(port: Int, connections: Int = EchoClient.connectionCount, idleConnections: Int = 0)
        throws(EchoClientFailure) {
        let count = connections
        self.connectionCount = connections
        self.outbox = .allocate(byteCount: count * Self.messageSize, alignment: 16)
        self.inbox = .allocate(byteCount: count * Self.messageSize, alignment: 16)
        self.outbox.initializeMemory(as: UInt8.self, repeating: 0x5A)
        self.inbox.initializeMemory(as: UInt8.self, repeating: 0)
        self.unsent = Array(repeating: 0, count: count)
        self.received = Array(repeating: 0, count: count)
        self.sentAt = Array(repeating: 0, count: count)
        self.isWatchingWritable = Array(repeating: false, count: count + 1)
        self.epoll = cbench_epoll_create()
        var descriptors: [CInt] = []
        var failure: LoopbackSocket.ConnectFailure?
        do throws(LoopbackSocket.ConnectFailure) {
            for _ in 0...count {
                descriptors.append(try LoopbackSocket.connect(port: port).get())
            }
        } catch {
            failure = error
        }
        self.descriptors = descriptors
        do throws(LoopbackSocket.ConnectFailure) {
            if let failure { throw failure }
            for _ in 0..<idleConnections {
                self.idleDescriptors.append(try LoopbackSocket.connect(port: port).get())
            }
        } catch {
            throw .cannotConnect(port: port, code: error.code)
        }
        if let last = self.idleDescriptors.last {
            // A connect returns once the kernel queued it, before the server took it: one echo on the last idle
            // connection means the server holds them all (it accepts in order), so no turn measures the accepting.
            try Self.echoOneByte(on: last, token: count + idleConnections)
        }
        for (token, descriptor) in descriptors.enumerated()
        where cbench_epoll_watch(self.epoll, descriptor, UInt64(token), false) != 0 {
            throw .cannotWatch
        }
    }

    /// Sends a byte on `descriptor` and waits until it is back.
    private static func echoOneByte(on descriptor: CInt, token: Int) throws(EchoClientFailure) {
        var byte: UInt8 = 0x42
        guard withUnsafeBytes(of: &byte, { LoopbackSocket.send(descriptor, $0) }) == .transferred(1) else {
            throw .connectionLost(connection: token)
        }
        let deadline = System.now + UInt64(Self.stallMilliseconds) * 1_000_000
        while System.now < deadline {
            switch withUnsafeMutableBytes(of: &byte, { LoopbackSocket.receive(descriptor, into: $0) }) {
            case .transferred: return
            case .wouldBlock: usleep(100)
            case .closed, .failed: throw .connectionLost(connection: token)
            }
        }
        throw .noAnswer
    }

    deinit {
        for descriptor in self.descriptors + self.idleDescriptors { LoopbackSocket.close(descriptor) }
        _ = cbench_close(self.epoll)
        self.events.deallocate()
        self.bulkBuffer.deallocate()
        self.outbox.deallocate()
        self.inbox.deallocate()
    }

    // MARK: Closed loop

    /// Runs the closed loop for `duration` nanoseconds: every connection sends a message, waits until all of it has
    /// come back, and sends the next, until the deadline. The messages still in flight then are awaited, not counted.
    ///
    /// - Parameter roundTripTimes: Receives the time from each message's send to its last byte back, in nanoseconds.
    /// - Returns: The round trips completed before the deadline.
    func exchangeMessages(for duration: UInt64, recordingInto roundTripTimes: inout [UInt64])
        throws(EchoClientFailure) -> Int {
        let deadline = System.now + duration
        var completed = 0
        var inFlight = self.connectionCount
        for connection in 0..<self.connectionCount {
            try self.send(connection, at: System.now)
        }
        while inFlight > 0 {
            for event in try self.waitForEvents() {
                let connection = Int(event.token)
                guard connection < self.connectionCount else { throw self.idleConnectionFailure(connection) }
                if event.writable {
                    try self.flush(connection)
                }
                guard event.readable, try self.receive(connection) else { continue }
                let now = System.now
                if now < deadline {
                    roundTripTimes.append(now &- self.sentAt[connection])
                    completed += 1
                    try self.send(connection, at: now)
                } else {
                    inFlight -= 1
                }
            }
        }
        return completed
    }

    /// Starts the next message on `connection`: a sequence number, so that no echo can pass for another.
    private func send(_ connection: Int, at now: UInt64) throws(EchoClientFailure) {
        self.sequence += 1
        self.outbox.storeBytes(of: self.sequence, toByteOffset: connection * Self.messageSize, as: UInt64.self)
        self.unsent[connection] = Self.messageSize
        self.received[connection] = 0
        self.sentAt[connection] = now
        try self.flush(connection)
    }

    /// Writes what the socket takes of the message's unsent part, and watches for room if anything is left.
    private func flush(_ connection: Int) throws(EchoClientFailure) {
        let unsent = self.unsent[connection]
        if unsent > 0 {
            let end = (connection + 1) * Self.messageSize
            let rest = UnsafeRawBufferPointer(rebasing: self.outbox[(end - unsent)..<end])
            switch LoopbackSocket.send(self.descriptors[connection], rest) {
            case .transferred(let count): self.unsent[connection] -= count
            case .wouldBlock: break
            case .closed, .failed: throw .connectionLost(connection: connection)
            }
        }
        try self.watch(connection, writable: self.unsent[connection] > 0)
    }

    /// Reads what has come back of the message; `true` once all of it has, and it matches what was sent.
    private func receive(_ connection: Int) throws(EchoClientFailure) -> Bool {
        let start = connection * Self.messageSize + self.received[connection]
        let end = (connection + 1) * Self.messageSize
        guard start < end else { throw self.idleConnectionFailure(connection) }
        let space = UnsafeMutableRawBufferPointer(rebasing: self.inbox[start..<end])
        switch LoopbackSocket.receive(self.descriptors[connection], into: space) {
        case .transferred(let count): self.received[connection] += count
        case .wouldBlock: return false
        case .closed, .failed: throw .connectionLost(connection: connection)
        }
        guard self.received[connection] == Self.messageSize else { return false }
        let offset = connection * Self.messageSize
        guard memcmp(self.inbox.baseAddress! + offset, self.outbox.baseAddress! + offset, Self.messageSize) == 0 else {
            throw .corrupted(connection: connection)
        }
        return true
    }

    // MARK: Bulk

    /// Sends `payload` on the bulk connection while reading its echo back, and checks every byte.
    ///
    /// - Returns: The time from the first send to the last byte back, in nanoseconds.
    func transferBulk(_ payload: UnsafeRawBufferPointer) throws(EchoClientFailure) -> UInt64 {
        let descriptor = self.descriptors[self.bulkToken]
        var sent = 0
        var received = 0
        let start = System.now
        try self.watch(self.bulkToken, writable: true)
        while received < payload.count {
            for event in try self.waitForEvents() {
                guard Int(event.token) == self.bulkToken else { throw self.idleConnectionFailure(Int(event.token)) }
                if event.writable, sent < payload.count {
                    switch LoopbackSocket.send(descriptor, UnsafeRawBufferPointer(rebasing: payload[sent...])) {
                    case .transferred(let count): sent += count
                    case .wouldBlock: break
                    case .closed, .failed: throw .connectionLost(connection: self.bulkToken)
                    }
                    if sent == payload.count {
                        try self.watch(self.bulkToken, writable: false)
                    }
                }
                guard event.readable else { continue }
                switch LoopbackSocket.receive(descriptor, into: self.bulkBuffer) {
                case .transferred(let count):
                    guard received + count <= sent,
                          memcmp(self.bulkBuffer.baseAddress!, payload.baseAddress! + received, count) == 0 else {
                        throw .corrupted(connection: self.bulkToken)
                    }
                    received += count
                case .wouldBlock: break
                case .closed, .failed: throw .connectionLost(connection: self.bulkToken)
                }
            }
        }
        return System.now &- start
    }

    // MARK: Waiting

    /// What readiness on a connection with nothing in flight means: the server closed it, or sent what it was not
    /// sent.
    private func idleConnectionFailure(_ token: Int) -> EchoClientFailure {
        switch LoopbackSocket.receive(self.descriptors[token], into: self.bulkBuffer) {
        case .closed, .failed: .connectionLost(connection: token)
        case .transferred, .wouldBlock: .unexpectedTraffic(connection: token)
        }
    }

    /// Waits for readiness on any connection; throws when nothing happens for `stallMilliseconds`.
    private func waitForEvents() throws(EchoClientFailure) -> UnsafeMutableBufferPointer<cbench_ready_event> {
        let count = cbench_epoll_wait_ready(self.epoll, self.events.baseAddress, CInt(self.events.count),
                                            Self.stallMilliseconds)
        guard count > 0 else { throw .noAnswer }
        return UnsafeMutableBufferPointer(rebasing: self.events[..<Int(count)])
    }

    /// Watches `token`'s connection for room to write as well as for data, or for data only; a system call only when
    /// that changes.
    private func watch(_ token: Int, writable: Bool) throws(EchoClientFailure) {
        guard self.isWatchingWritable[token] != writable else { return }
        guard cbench_epoll_rewatch(self.epoll, self.descriptors[token], UInt64(token), writable) == 0 else {
            throw .cannotWatch
        }
        self.isWatchingWritable[token] = writable
    }
}
