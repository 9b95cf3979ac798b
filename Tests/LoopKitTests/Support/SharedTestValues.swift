#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import LoopKit

/// A capture that says when it is freed: captured by a callback, it tells when the callback (and what it captured)
/// was let go of.
final class DeinitProbe: Sendable {
    let onDeinit: @Sendable () -> Void

    init(_ onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit {
        self.onDeinit()
    }
}

/// A timer an hour away: it keeps its modes alive and never fires in a test.
func keepAliveTimer() -> LoopTimer {
    LoopTimer(interval: .seconds(3600)) { _ in }
}

/// A counter closures on any thread can share.
final class SharedCounter: Sendable {
    private let count = LoopLock(0)

    @discardableResult
    func increment() -> Int {
        self.count.withLock { $0 += 1; return $0 }
    }

    func decrement() {
        self.count.withLock { $0 -= 1 }
    }

    var value: Int {
        self.count.withLock { $0 }
    }
}

/// Whole milliseconds from `start` to `instant`.
func elapsedMilliseconds(_ instant: LoopInstant, since start: LoopInstant) -> Int {
    Int((instant - start) / .milliseconds(1))
}

/// The whole of the file at `path` as UTF-8 text (open(2) and read(2) until the end), or `nil` when it cannot be
/// opened. Not `String(contentsOf:)`: Foundation's file reading leaks its buffer for some files (LeakSanitizer
/// reported it for the demo's empty output files in CI's AddressSanitizer run).
func readTextFile(_ path: String) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            bytes += chunk[..<count]
        } else if count == 0 || errno != EINTR {
            break
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}
