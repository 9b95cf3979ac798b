#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// An epoll(7) instance: a set of descriptors kept in the kernel, whose own descriptor is readable while any of them
/// is ready. Waiting on it costs the same for one descriptor as for ten thousand; poll(2) costs O(n) per wait.
///
/// Level-triggered, keyed by descriptor number. The kernel drops a registration by itself when the last descriptor
/// of its open file is closed, and keeps it (under the old number) while a `dup` of it lives on: `DescriptorRegistry`
/// deals with both. Linux only: `init` fails elsewhere. Loop thread only.
final class EpollSet {
    /// What a change of registration did.
    enum ChangeResult: Equatable {
        case done
        /// `ENOENT`: the descriptor is not (or no longer) in the set.
        case notRegistered
        /// `EEXIST`: the descriptor is in the set already.
        case alreadyRegistered
        /// `EBADF`: the descriptor is closed.
        case closed
        /// `EPERM`: the descriptor does not support readiness (a regular file, a directory); poll reports it ready.
        case unsupported
        /// Anything else (`ENOMEM`, `ENOSPC`: the user's limit of watches): the set cannot stand for its descriptors.
        case failed(errno: CInt)
    }

    let descriptor: CInt
    private var readyDescriptors = [CInt](repeating: -1, count: EpollSet.batch)
    private var readyEvents = [UInt32](repeating: 0, count: EpollSet.batch)

    /// At most this many ready descriptors are taken per look; the rest stay ready for the next (level-triggered).
    static let batch = 64

    /// epoll_create1(2) with `EPOLL_CLOEXEC`; `nil` where there is no epoll or no descriptor left.
    init?() {
        let descriptor = cloopkit_epoll_create()
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit {
        closeDescriptor(self.descriptor)
    }

    /// Adds `descriptor`, watching `events` (error and hang-up are always reported). epoll_ctl(2), `EPOLL_CTL_ADD`.
    func add(_ descriptor: CInt, watching events: DescriptorEvents) -> ChangeResult {
        self.control(0, descriptor, events)
    }

    /// Changes what `descriptor` is watched for. epoll_ctl(2), `EPOLL_CTL_MOD`.
    func modify(_ descriptor: CInt, watching events: DescriptorEvents) -> ChangeResult {
        self.control(1, descriptor, events)
    }

    /// Takes `descriptor` out of the set. epoll_ctl(2), `EPOLL_CTL_DEL`.
    func remove(_ descriptor: CInt) -> ChangeResult {
        self.control(2, descriptor, [])
    }

    private func control(_ operation: CInt, _ descriptor: CInt, _ events: DescriptorEvents) -> ChangeResult {
        var mask: UInt32 = 0
        if events.contains(.readable) { mask |= 0x1 }  // EPOLLIN
        if events.contains(.writable) { mask |= 0x4 }  // EPOLLOUT
        guard cloopkit_epoll_control(self.descriptor, operation, descriptor, mask) != 0 else { return .done }
        switch currentErrno {
        case ENOENT: return .notRegistered
        case EEXIST: return .alreadyRegistered
        case EBADF: return .closed
        case EPERM: return .unsupported
        case let code: return .failed(errno: code)
        }
    }

    /// Calls `body` with each ready descriptor and its events, without waiting (epoll_wait(2) with a zero timeout).
    ///
    /// - Returns: How many were ready (at most `batch`).
    func forEachReady(_ body: (CInt, DescriptorEvents) -> Void) -> Int {
        let count = self.readyDescriptors.withUnsafeMutableBufferPointer { descriptors in
            self.readyEvents.withUnsafeMutableBufferPointer { events in
                cloopkit_epoll_ready(self.descriptor, descriptors.baseAddress, events.baseAddress, CInt(EpollSet.batch))
            }
        }
        guard count > 0 else { return 0 }  // -1: EINTR cannot happen without a timeout; nothing is lost either way
        for index in 0..<Int(count) {
            let raw = self.readyEvents[index]
            var events: DescriptorEvents = []
            if raw & 0x1 != 0 { events.insert(.readable) }  // EPOLLIN
            if raw & 0x4 != 0 { events.insert(.writable) }  // EPOLLOUT
            if raw & 0x8 != 0 { events.insert(.error) }  // EPOLLERR
            if raw & 0x10 != 0 { events.insert(.hangUp) }  // EPOLLHUP
            body(self.readyDescriptors[index], events)
        }
        return Int(count)
    }
}
