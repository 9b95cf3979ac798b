#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which system calls a loop's waiter uses, chosen when the loop is made.
///
/// `linux` is ppoll(2) with nanosecond timeouts, a timerfd for deadlines of the system clock, and epoll for modes
/// with many descriptors. `portable` is poll(2) and a pipe, nothing else: what a system without those calls gets.
/// The environment variable `LOOPKIT_BACKEND` (`linux` or `portable`) overrides the default, so that the whole test
/// suite runs on each.
enum LoopBackend: String, Sendable, CaseIterable {
    case linux
    case portable

    /// The backend for new loops: `LOOPKIT_BACKEND` if set to a known name, else the system's best.
    static let selected: LoopBackend = {
        if let name = getenv("LOOPKIT_BACKEND").map({ String(cString: $0) }), !name.isEmpty {
            guard let backend = LoopBackend(rawValue: name) else {
                fatalError("LoopKit: LOOPKIT_BACKEND=\(name) is not a backend; use one of "
                    + LoopBackend.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return backend.isAvailable ? backend : .portable
        }
        return LoopBackend.linux.isAvailable ? .linux : .portable
    }()

    /// Whether this system has the backend's calls.
    var isAvailable: Bool {
        switch self {
        case .portable:
            return true
        case .linux:
            #if os(Linux)
            return true
            #else
            return false
            #endif
        }
    }
}
