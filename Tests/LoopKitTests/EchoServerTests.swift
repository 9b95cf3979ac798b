import CLoopKitSystem
import Foundation
import Testing

/// `loop-demo echo`, the echo server built on a loop group and descriptor sources, driven from outside as a user
/// would: real sockets on loopback, real signals.
@Suite("The echo server", .serialized, .timeLimit(.minutes(2)))
struct EchoServerTests {
    @Test func echoesAMebibyteOnEachOfFiftyConcurrentConnectionsAndExitsZeroOnSIGTERM() throws {
        let server = try DemoProcess(["echo", "--loops", "2"])
        let port = try server.listeningPort()
        // 1 MiB each; under the sanitizers, whose server is many times slower, LOOPKIT_RESOURCE_SCALE shrinks it.
        let size = ResourceTests.scaled(1 << 20)
        let payloads = (0..<50).map { Self.pseudoRandomBytes(count: size, seed: UInt64($0)) }
        let results = ResultsBox(count: payloads.count)
        let threads = payloads.enumerated().map { index, payload in
            Thread {
                do {
                    let client = try LoopbackClient(port: port)
                    let writer = Thread {  // both ways at once: the server answers while the client still sends
                        try? client.send(payload)
                        client.finishSending()
                    }
                    writer.start()
                    results.set(index, try client.receive() == payload)
                } catch {
                    results.set(index, false)
                }
            }
        }
        threads.forEach { $0.start() }
        #expect(results.waitForAll() == Array(repeating: true, count: payloads.count))

        server.send(SIGTERM)
        let (status, errors) = server.waitForExit()
        #expect(status == 0, "loop-demo echo's standard error: \(errors)")
        #expect(errors.contains("shutting down"))
    }

    @Test func aSignalSentToTheProcessShutsTheServerDownAndFlushesWhatItQueued() throws {
        let server = try DemoProcess(["echo", "--loops", "1"])
        let port = try server.listeningPort()
        let idle = try LoopbackClient(port: port)
        // A client that sends without reading: the server queues its echo up to its bound, then stops reading.
        let stalled = try LoopbackClient(port: port)
        let payload = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let writer = Thread { try? stalled.send(payload) }
        writer.start()
        try idle.send(Array("ping\n".utf8))
        #expect(try idle.receive(upTo: 5) == Array("ping\n".utf8))
        var echoing = pollfd(fd: stalled.descriptor, events: Int16(POLLIN), revents: 0)
        try #require(poll(&echoing, 1, 20_000) == 1, "the server has read from the stalled client and echoes")

        server.send(SIGINT)
        #expect(try idle.receive() == [])  // the server ended its output: end of input, nothing more
        idle.finishSending()  // and the server, reading what it still gets until the end, closes
        // What the server had read comes back, in order, then a clean end (no reset: the server ends its output and
        // reads what the client still sends, instead of closing with input unread).
        let echoed = try stalled.receive()
        #expect(!echoed.isEmpty)
        #expect(echoed[...] == payload[..<echoed.count])
        stalled.finishSending()
        let (status, errors) = server.waitForExit()
        #expect(status == 0, "loop-demo echo's standard error: \(errors)")
        #expect(errors.contains("shutting down"))
    }

    @Test func runningOutOfDescriptorsPausesAcceptingWithoutSpinningAndRecovers() throws {
        let server = try DemoProcess(["echo", "--loops", "1", "--spare-descriptors", "8"])
        let port = try server.listeningPort()
        // More connections than the server has descriptors for: the rest wait in the listen backlog.
        let clients = try (0..<30).map { _ in try LoopbackClient(port: port) }
        usleep(300_000)
        let before = try server.cpuSeconds()
        usleep(1_000_000)
        let spent = try server.cpuSeconds() - before
        #expect(spent < 0.5, "the server spun while out of descriptors: \(spent) s of CPU in 1 s")

        // Each connection ends (its own end of input); freed descriptors let the waiting ones in, and all are served.
        for client in clients {
            try client.send(Array("hello".utf8))
            client.finishSending()
            #expect(try client.receive(timeout: .seconds(10)) == Array("hello".utf8))
        }
        server.send(SIGTERM)
        let (status, errors) = server.waitForExit()
        #expect(status == 0, "loop-demo echo's standard error: \(errors)")
        #expect(errors.contains("EMFILE"))
    }

    @Test func theServersListeningAndAcceptedSocketsAreNonBlockingAndCloseOnExec() throws {
        let listener = cloopkit_stream_socket_nonblocking(AF_INET)
        try #require(listener >= 0, "socket: errno \(errno)")
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(listener, $0, length) == 0 && listen(listener, 1) == 0)
                try #require(getsockname(listener, $0, &length) == 0)
            }
        }
        // Nothing to accept yet: a non-blocking listener says so instead of waiting.
        #expect(cloopkit_accept_nonblocking(listener) == -1 && errno == EAGAIN)

        let client = try LoopbackClient(port: UInt16(bigEndian: address.sin_port))
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        try #require(poll(&ready, 1, 10_000) == 1)
        let accepted = cloopkit_accept_nonblocking(listener)
        try #require(accepted >= 0, "accept: errno \(errno)")
        defer { close(accepted) }
        for descriptor in [listener, accepted] {
            #expect(fcntl(descriptor, F_GETFL) & O_NONBLOCK != 0)
            #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
        }
        withExtendedLifetime(client) {}  // connected until the accepted end is checked
    }
}

extension EchoServerTests {
    /// Bytes that differ by connection and position (SplitMix64), so a byte lost, repeated or out of order shows.
    static func pseudoRandomBytes(count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return UInt8(truncatingIfNeeded: mixed ^ (mixed >> 31))
        }
    }
}

/// One result per client thread, and a wait for all of them.
private final class ResultsBox: @unchecked Sendable {
    private let condition = NSCondition()
    private var results: [Bool?]

    init(count: Int) {
        self.results = Array(repeating: nil, count: count)
    }

    func set(_ index: Int, _ value: Bool) {
        self.condition.withLock {
            self.results[index] = value
            self.condition.broadcast()
        }
    }

    func waitForAll() -> [Bool] {
        self.condition.withLock {
            while self.results.contains(where: { $0 == nil }) {
                self.condition.wait()
            }
            return self.results.map { $0! }
        }
    }
}
