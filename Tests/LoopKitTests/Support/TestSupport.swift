#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem
import Testing
@testable import LoopKit

/// A thread-safe list that tests append to from callbacks and read afterwards.
final class Recorder<Element: Sendable>: Sendable {
    private let storage = LoopLock<[Element]>([])

    func append(_ element: Element) {
        self.storage.withLock { $0.append(element) }
    }

    var elements: [Element] {
        self.storage.withLock { $0 }
    }

    var count: Int {
        self.storage.withLock { $0.count }
    }

    func removeAll() {
        self.storage.withLock { $0.removeAll() }
    }
}

/// A non-blocking pipe for descriptor-source tests; closes what is still open on deinit.
final class TestPipe: @unchecked Sendable {
    private(set) var readEnd: CInt
    private(set) var writeEnd: CInt

    init() throws {
        // Created close-on-exec in one call (pipe2): a process spawned at the same moment (an exit test's child)
        // must not inherit an end and keep it open, or closing our end would not give the other its hang-up or
        // error. Setting FD_CLOEXEC afterwards leaves a window for exactly that.
        var ends: [CInt] = [-1, -1]
        try #require(cloopkit_pipe_nonblocking(&ends) == 0)
        self.readEnd = ends[0]
        self.writeEnd = ends[1]
    }

    func write(_ text: String = "x") {
        var bytes = Array(text.utf8)
        _ = Glibc.write(self.writeEnd, &bytes, bytes.count)
    }

    /// Reads everything available; returns the text read.
    @discardableResult
    func readAll() -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var text = ""
        while true {
            let count = Glibc.read(self.readEnd, &buffer, buffer.count)
            guard count > 0 else { break }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        return text
    }

    func closeReadEnd() {
        if self.readEnd >= 0 {
            _ = close(self.readEnd)
            self.readEnd = -1
        }
    }

    func closeWriteEnd() {
        if self.writeEnd >= 0 {
            _ = close(self.writeEnd)
            self.writeEnd = -1
        }
    }

    deinit {
        self.closeReadEnd()
        self.closeWriteEnd()
    }
}

/// Spins (with short sleeps) until `condition` holds or `limit` passes; a hang guard, not a measurement.
func waitUntil(limit: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + limit
    while !condition() {
        if clock.now > end { return false }
        usleep(200)
    }
    return true
}

/// Runs `body` on a fresh thread and waits for it to end.
func onAnotherThread(_ body: @escaping @Sendable () -> Void) {
    let thread = try! PlatformThread.spawn(name: "test-helper", body: body)
    thread.join()
}

/// Starts `body` on a fresh thread without waiting; `join()` the result.
func startThread(_ body: @escaping @Sendable () -> Void) -> PlatformThread {
    try! PlatformThread.spawn(name: "test-helper", body: body)
}

extension LoopInstant {
    func plus(ms: Int) -> LoopInstant { self + .milliseconds(ms) }
}

/// read(2) without blocking; returns the byte count (0 when nothing was there).
func readNonBlocking(_ descriptor: CInt, _ buffer: inout [UInt8]) -> Int {
    let flags = fcntl(descriptor, F_GETFL)
    _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
    let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
    return max(count, 0)
}

/// Runs `body` with the calling thread's timer slack set to `nanoseconds`, then puts the old slack back.
func withTimerSlack(_ nanoseconds: UInt, _ body: () throws -> Void) rethrows {
    let old = cloopkit_timer_slack()
    _ = cloopkit_set_timer_slack(nanoseconds)
    defer { _ = cloopkit_set_timer_slack(UInt(max(old, 1))) }
    try body()
}
