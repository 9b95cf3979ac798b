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
/// of its open file is closed, and keeps it, under the old number, while a `dup` of the file lives on elsewhere, even
/// after the number is reused for another file. So `forEachReady` confirms every report with poll(2) on the number as
/// it is now, and tells stale ones apart, except for the owner's own descriptors (`addOwn`: a wake-up pipe, a timerfd),
/// which it never closes behind the set's back. Linux only: `init` fails elsewhere. Loop thread only.
final class EpollSet {
    /// What a change of registration did.
    enum ChangeResult: Equatable {
        case done
        /// `ENOENT`: the descriptor is not (or no longer) in the set.
        case notRegistered
        /// `EEXIST`: the descriptor is in the set already.
        case alreadyRegistered
        /// `EBADF`: the descriptor is closed. Not a LoopKit bug here (which `nonBlockingCall` would trap on): the
        /// descriptors are the user's, and closing one without cancelling its source is allowed.
        case closed
        /// `EPERM` (a regular file or directory: poll calls it always ready) or `EINVAL` (the descriptor is this
        /// set itself: a number reused after a close): epoll cannot watch it.
        case unsupported
        /// Anything else (`ENOMEM`, `ENOSPC`: the user's limit of watches, `ELOOP`): the set cannot stand for its
        /// descriptors.
        case failed(errno: CInt)
    }

    let descriptor: CInt
    private var readyDescriptors = [CInt](repeating: -1, count: EpollSet.batch)
    private var readyEvents = [UInt32](repeating: 0, count: EpollSet.batch)
    private var confirmations = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: EpollSet.batch)
    /// Where each of `confirmations` was in the last wait's reports.
    private var confirmedReports = [Int](repeating: 0, count: EpollSet.batch)
    /// The owner's descriptors (`addOwn`), whose reports need no confirmation.
    private(set) var ownDescriptors: [CInt] = []

    /// How a wait in the set ended.
    enum WaitResult: Equatable {
        /// What epoll reported (perhaps nothing, for a look or a timeout) was passed on.
        case collected
        /// A signal interrupted the wait (`EINTR`); nothing was taken.
        case interrupted
        /// The kernel could not allocate for the wait (`ENOMEM`), or it failed otherwise; it returned after a pause
        /// of a millisecond, with nothing taken. Level-triggered, what is ready stays ready for the next wait.
        case failed
    }

    /// At most this many ready descriptors are taken per look; the rest stay ready for the next (level-triggered).
    static let batch = 64

    /// epoll_create1(2) with `EPOLL_CLOEXEC`; `nil` where there is no epoll or no descriptor left.
    init?() {
        guard case .processed(let descriptor)? = try? nonBlockingCall("epoll_create1", {
            cloopkit_epoll_create()
        }) else { return nil }
        self.descriptor = descriptor
    }

    deinit {
        closeDescriptor(self.descriptor)
    }

    /// Adds `descriptor`, watching `events` (error and hang-up are always reported). epoll_ctl(2), `EPOLL_CTL_ADD`.
    func add(_ descriptor: CInt, watching events: DescriptorEvents) -> ChangeResult {
        self.control(CLOOPKIT_EPOLL_ADD, descriptor, events)
    }

    /// Adds one of the owner's descriptors (a wake-up pipe, a timerfd), watched for reading. Its reports are passed on
    /// unconfirmed: the owner never closes it while the set lives.
    func addOwn(_ descriptor: CInt) -> ChangeResult {
        let result = self.add(descriptor, watching: .readable)
        if result == .done {
            self.ownDescriptors.append(descriptor)
        }
        return result
    }

    /// Changes what `descriptor` is watched for. epoll_ctl(2), `EPOLL_CTL_MOD`.
    func modify(_ descriptor: CInt, watching events: DescriptorEvents) -> ChangeResult {
        self.control(CLOOPKIT_EPOLL_MODIFY, descriptor, events)
    }

    /// Takes `descriptor` out of the set. epoll_ctl(2), `EPOLL_CTL_DEL`.
    func remove(_ descriptor: CInt) -> ChangeResult {
        self.control(CLOOPKIT_EPOLL_REMOVE, descriptor, [])
    }

    /// What epoll reported in an event's bits.
    private static func events(fromEpoll reported: UInt32) -> DescriptorEvents {
        var events: DescriptorEvents = []
        if reported & CLOOPKIT_EPOLL_IN != 0 { events.insert(.readable) }
        if reported & CLOOPKIT_EPOLL_OUT != 0 { events.insert(.writable) }
        if reported & CLOOPKIT_EPOLL_ERR != 0 { events.insert(.error) }
        if reported & CLOOPKIT_EPOLL_HUP != 0 { events.insert(.hangUp) }
        return events
    }

    private func control(_ operation: CInt, _ descriptor: CInt, _ events: DescriptorEvents) -> ChangeResult {
        var mask: UInt32 = 0
        if events.contains(.readable) { mask |= CLOOPKIT_EPOLL_IN }
        if events.contains(.writable) { mask |= CLOOPKIT_EPOLL_OUT }
        do {
            _ = try nonBlockingCall("epoll_ctl", descriptors: .user) {
                cloopkit_epoll_control(self.descriptor, operation, descriptor, mask)
            }
            return .done
        } catch {
            switch error.code {
            case ENOENT: return .notRegistered
            case EEXIST: return .alreadyRegistered
            case EBADF: return .closed
            case EPERM, EINVAL: return .unsupported
            case let code: return .failed(errno: code)
            }
        }
    }

    /// Waits up to `timeoutMilliseconds` for ready descriptors (epoll_wait(2); 0 looks without waiting, a negative
    /// timeout waits until one is ready), then passes on what epoll reports: the set's own descriptors as they are,
    /// and the rest once one poll(2) on their numbers as they are now has confirmed them.
    ///
    /// - Parameters:
    ///   - own: Called with each of the set's own descriptors (`addOwn`) that epoll reports.
    ///   - confirmed: Called with each other descriptor whose report poll confirms, and what poll reports for it
    ///     (which may include `.invalid`: the number was closed).
    ///   - stale: Called with each descriptor that epoll reports but poll finds not ready: a registration that
    ///     outlived its number (its file lives on in a `dup`; the number was closed or now names another file).
    /// - Returns: How the wait ended.
    func forEachReady(
        waitingUpTo timeoutMilliseconds: CInt = 0,
        own: (CInt) -> Void = { _ in },
        confirmed: (CInt, DescriptorEvents) -> Void,
        stale: (CInt) -> Void
    ) -> WaitResult {
        let result = self.readyDescriptors.withUnsafeMutableBufferPointer { descriptors in
            self.readyEvents.withUnsafeMutableBufferPointer { events in
                Result { () throws(SystemCallError) in
                    try systemCall("epoll_wait", interrupts: .report) {
                        cloopkit_epoll_wait(self.descriptor, descriptors.baseAddress, events.baseAddress,
                                            CInt(EpollSet.batch), timeoutMilliseconds)
                    }
                }
            }
        }
        let count: Int
        switch result {
        case .success(.processed(let reported)?):
            count = Int(reported)
        case .success(nil):
            return .interrupted
        case .success(.wouldBlock?), .failure:
            // ENOMEM: nothing is taken now; level-triggered, the sources stay ready for the next look, and the epoll
            // descriptor readable, so the pause keeps a lasting shortage from becoming a spin.
            SystemPoller.pauseAfterFailedWait(upTo: -1)
            return .failed
        }
        var confirming = 0
        for index in 0..<count {
            let descriptor = self.readyDescriptors[index]
            if self.ownDescriptors.contains(descriptor) {
                own(descriptor)
                continue
            }
            let asked = Self.events(fromEpoll: self.readyEvents[index]).pollMask
            self.confirmations[confirming] = pollfd(fd: descriptor, events: asked, revents: 0)
            self.confirmedReports[confirming] = index
            confirming += 1
        }
        guard confirming > 0 else { return .collected }
        let polled = self.confirmations.withUnsafeMutableBufferPointer { buffer -> CInt in
            // Numbers may be closed: poll reports those as invalid (POLLNVAL), it does not fail on them.
            guard case .processed(let ready)? = try? nonBlockingCall("ppoll", descriptors: .user, {
                cloopkit_poll_ns(buffer.baseAddress, UInt(confirming), 0)
            }) else { return -1 }
            return ready
        }
        for slot in 0..<confirming {
            let index = self.confirmedReports[slot]
            let descriptor = self.readyDescriptors[index]
            // If poll itself failed (ENOMEM), go by epoll's report, unconfirmed.
            let events = polled < 0
                ? Self.events(fromEpoll: self.readyEvents[index])
                : DescriptorEvents(pollResult: self.confirmations[slot].revents)
            if events.isEmpty {
                stale(descriptor)
            } else {
                confirmed(descriptor, events)
            }
        }
        return .collected
    }
}
