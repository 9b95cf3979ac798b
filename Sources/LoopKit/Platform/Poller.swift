#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// The one blocking wait of a loop: the descriptors of a pass, and a wait until one is ready or a timeout passes.
///
/// The loop uses `SystemPoller`; tests inject a fake that scripts results (`EINTR`, readiness) and records the
/// timeouts asked for, without real time passing (NIO's `selectorFactory:`). Loop thread only.
protocol Poller: AnyObject {
    /// The number of descriptors set for the next wait.
    var count: Int { get }
    /// Forgets the descriptors of the previous pass.
    func reset()
    /// Adds `descriptor` to the next wait, watching `events` (error, hang-up and invalid are always reported).
    func append(_ descriptor: CInt, events: DescriptorEvents)
    /// Waits until a descriptor is ready or `timeoutNanoseconds` pass (negative: no timeout).
    ///
    /// - Returns: The number of descriptors with events, or -1 when a signal interrupted the wait.
    func waitForEvents(timeoutNanoseconds: Int64) -> Int
    /// What the last wait reported for the descriptor at `index`.
    func events(at index: Int) -> DescriptorEvents
}

/// The system's poller: a `pollfd` array rebuilt each pass from the running mode's descriptors, and ppoll(2).
///
/// The buffer is kept between passes, so an idle pass allocates nothing. Loop thread only.
final class SystemPoller: Poller {
    private var descriptors: [pollfd] = []

    init() {
        self.descriptors.reserveCapacity(16)
    }

    /// The number of descriptors set for the next wait.
    var count: Int { self.descriptors.count }

    /// Forgets the descriptors of the previous pass, keeping the buffer.
    func reset() {
        self.descriptors.removeAll(keepingCapacity: true)
    }

    /// Adds `descriptor` to the next wait, watching `events` (error, hang-up and invalid are always reported).
    func append(_ descriptor: CInt, events: DescriptorEvents) {
        self.descriptors.append(pollfd(fd: descriptor, events: events.pollMask, revents: 0))
    }

    /// Sleeps until a descriptor is ready or `timeoutNanoseconds` pass; a negative timeout waits for a descriptor.
    ///
    /// Wraps ppoll(2) on Linux (nanosecond timeout) and poll(2) elsewhere (timeout rounded up to a millisecond, so
    /// never early).
    ///
    /// - Returns: The number of descriptors with events, or -1 when a signal interrupted the wait (`EINTR`): the
    ///   caller waits again with what is left of its timeout.
    @inline(never)  // a stable name for profiles: this is where an idle loop spends its time
    func waitForEvents(timeoutNanoseconds: Int64) -> Int {
        let count = UInt(self.descriptors.count)
        let result = self.descriptors.withUnsafeMutableBufferPointer { buffer in
            cloopkit_poll_ns(buffer.baseAddress, count, timeoutNanoseconds)
        }
        if result >= 0 { return Int(result) }
        let code = currentErrno
        switch code {
        case EINTR:
            return -1
        case EAGAIN:
            return 0
        default:
            preconditionFailure("LoopKit bug: ppoll failed with errno \(code)")
        }
    }

    /// What the last wait reported for the descriptor at `index`.
    func events(at index: Int) -> DescriptorEvents {
        DescriptorEvents(pollResult: self.descriptors[index].revents)
    }
}

extension DescriptorEvents {
    /// The poll(2) `events` mask that watches these (only `.readable` and `.writable` can be watched).
    var pollMask: Int16 {
        (self.contains(.readable) ? Int16(POLLIN) : 0) | (self.contains(.writable) ? Int16(POLLOUT) : 0)
    }

    /// What poll(2) reported in a `revents` field.
    init(pollResult revents: Int16) {
        let revents = Int32(revents)
        self = []
        if revents & Int32(POLLIN) != 0 { self.insert(.readable) }
        if revents & Int32(POLLOUT) != 0 { self.insert(.writable) }
        if revents & Int32(POLLERR) != 0 { self.insert(.error) }
        if revents & Int32(POLLHUP) != 0 { self.insert(.hangUp) }
        if revents & Int32(POLLNVAL) != 0 { self.insert(.invalid) }
    }
}
