import CLoopBench
import Foundation

/// A program the benchmark started and must stop: its pid and the read end of its standard output.
///
/// `stop(graceMilliseconds:)` sends SIGTERM, waits, and reaps; a child still running after the grace period gets
/// SIGKILL, so that no run leaves a process behind. Standard error is shared with the benchmark, so that a child's
/// complaints reach the terminal. Used from one thread.
final class ChildProcess {
    /// How a line read from the child's standard output turned out.
    enum Line: Equatable {
        case line(String)
        /// The child closed its output (or exited) first.
        case ended
        case timedOut
    }

    /// How the child ended.
    enum Ending: Equatable, CustomStringConvertible {
        case exited(status: Int)
        case signalled(Int)
        /// It ignored SIGTERM for the whole grace period and was killed.
        case killedAfterGracePeriod
        /// waitpid failed: the child was not ours to reap.
        case unknown

        var description: String {
            switch self {
            case .exited(let status): "exited with status \(status)"
            case .signalled(let signal): "ended by signal \(signal)"
            case .killedAfterGracePeriod: "still running after SIGTERM and the grace period, so killed (SIGKILL)"
            case .unknown: "could not be reaped (waitpid failed)"
            }
        }
    }

    let pid: pid_t
    let path: String
    private let output: CInt
    private(set) var ending: Ending?

    /// Starts `path` with `arguments` (argv[0] is `path`), or returns `nil` when it cannot be started
    /// (posix_spawn).
    init?(path: String, arguments: [String]) {
        let argv = ([path] + arguments).map { argument -> UnsafeMutablePointer<CChar>? in
            let bytes = argument.utf8CString
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
            bytes.withUnsafeBufferPointer { copy.initialize(from: $0.baseAddress!, count: bytes.count) }
            return copy
        } + [nil]
        defer {
            for pointer in argv { pointer?.deallocate() }
        }
        var output: CInt = -1
        let pid = cbench_spawn(path, argv, &output)
        guard pid > 0 else { return nil }
        self.pid = pid
        self.path = path
        self.output = output
    }

    deinit {
        if self.ending == nil {
            _ = self.stop()
        }
    }

    /// Reads one line of the child's standard output, waiting up to `timeoutMilliseconds`.
    func readLine(timeoutMilliseconds: Int) -> Line {
        var buffer = [CChar](repeating: 0, count: 512)
        let length = cbench_read_line(self.output, &buffer, UInt(buffer.count), CInt(timeoutMilliseconds))
        switch length {
        case 0...:
            return .line(String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        case Int(CBENCH_WOULD_BLOCK): return .timedOut
        default: return .ended
        }
    }

    /// CPU time the child has used so far, all threads, in nanoseconds (10 ms resolution), or `nil` once it is gone.
    var cpuNanoseconds: UInt64? {
        let value = cbench_process_cpu_ns(self.pid)
        return value >= 0 ? UInt64(value) : nil
    }

    /// How many threads the child has now, or `nil` once it is gone (/proc/PID/task).
    var threadCount: Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(self.pid)/task"))?.count
    }

    /// Asks the child to stop (SIGTERM), waits up to `graceMilliseconds` for it to exit, kills it (SIGKILL) if it has
    /// not, and reaps it. Calling it again returns the same ending.
    @discardableResult
    func stop(graceMilliseconds: Int = 5_000) -> Ending {
        if let ending = self.ending { return ending }
        _ = cbench_terminate(self.pid)
        var code: CInt = 0
        var ending: Ending
        switch cbench_wait_exit(self.pid, CInt(graceMilliseconds), &code) {
        case 1: ending = .exited(status: Int(code))
        case 2: ending = .signalled(Int(code))
        case 0:
            _ = cbench_kill(self.pid)
            ending = cbench_wait_exit(self.pid, 5_000, &code) > 0 ? .killedAfterGracePeriod : .unknown
        default: ending = .unknown
        }
        _ = cbench_close(self.output)
        self.ending = ending
        return ending
    }
}
