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
    /// - Returns: The number of descriptors with events, or -1 when the caller should wait again with what is left of
    ///   its timeout (a signal interrupted the wait, or the kernel could not allocate for it).
    func waitForEvents(timeoutNanoseconds: Int64) -> Int
    /// What the last wait reported for the descriptor at `index`.
    func events(at index: Int) -> DescriptorEvents
}

/// The system's poller: a `pollfd` array rebuilt each pass from the running mode's descriptors, and ppoll(2)
/// (nanosecond timeouts) or, for the portable backend, poll(2) (millisecond timeouts, rounded up so never early).
///
/// The buffer is kept between passes, so an idle pass allocates nothing. Loop thread only.
final class SystemPoller: Poller {
    /// The call a wait makes.
    enum Call {
        /// ppoll(2) on Linux, poll(2) elsewhere (`cloopkit_poll_ns`).
        case nanosecondTimeout
        /// poll(2) everywhere: what a system without ppoll has.
        case millisecondTimeout

        /// The call for `backend`'s waits.
        init(for backend: LoopBackend) {
            self = backend == .linux ? .nanosecondTimeout : .millisecondTimeout
        }

        /// One call on the `count` entries at `entries`, named `ppollName` or `pollName` for `systemCall` (and its
        /// scripted faults); a signal ends it early (`nil`).
        func callOnce(
            on entries: UnsafeMutablePointer<pollfd>?, count: Int, timeoutNanoseconds: Int64,
            descriptors: DescriptorOwner, ppollName: StaticString = "ppoll", pollName: StaticString = "poll"
        ) throws(SystemCallError) -> IOResult<CInt>? {
            switch self {
            case .nanosecondTimeout:
                try systemCall(ppollName, interrupts: .report, descriptors: descriptors) {
                    cloopkit_poll_ns(entries, UInt(count), timeoutNanoseconds)
                }
            case .millisecondTimeout:
                try systemCall(pollName, interrupts: .report, descriptors: descriptors) {
                    poll(entries, nfds_t(count), SystemPoller.milliseconds(timeoutNanoseconds))
                }
            }
        }
    }

    /// The `pollfd`s of the next wait. Unchecked, so that the sleep is not inside a dynamically checked access to a
    /// stored property (whose end, after the sleep, costs a cold thread-local read): loop thread only, and no access
    /// to it spans a callout (see the note in `Loop`).
    @exclusivity(unchecked) private var descriptors: [pollfd] = []
    private let call: Call

    init(call: Call = .nanosecondTimeout) {
        self.call = call
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
    /// - Returns: The number of descriptors with events, or -1 when the caller should wait again with what is left of
    ///   its timeout: a signal interrupted the wait (`EINTR`), or the kernel could not allocate for it (`ENOMEM`,
    ///   after a pause of up to a millisecond).
    @inline(never)  // a stable name for profiles: this is where an idle loop spends its time
    func waitForEvents(timeoutNanoseconds: Int64) -> Int {
        let outcome = self.descriptors.withUnsafeMutableBufferPointer { buffer in
            self.callPoll(on: buffer, timeoutNanoseconds: timeoutNanoseconds)
        }
        if case .failure(let error) = outcome, error.code == EINVAL {
            // More entries than RLIMIT_NOFILE: several sources on one descriptor each have an entry.
            return self.waitForEventsMerged(timeoutNanoseconds: timeoutNanoseconds)
        }
        return Self.readyCount(of: outcome, timeoutNanoseconds: timeoutNanoseconds) { error in
            trap("Loop.run(mode:before:) waiting for its descriptors", error)
        }
    }

    /// The wait, when poll(2) refused the entries as more than the descriptor limit (EINVAL): one entry per
    /// descriptor, watching what all of its entries watch, and each entry's events copied back from its descriptor's.
    /// Allocates; only a mode with more sources than the process may have descriptors takes this path.
    ///
    /// - Returns: As `waitForEvents(timeoutNanoseconds:)`; it traps when the descriptors themselves are more than the
    ///   limit (lowered after they were opened), which no wait can watch.
    private func waitForEventsMerged(timeoutNanoseconds: Int64) -> Int {
        var merged: [pollfd] = []
        var indexInMerged: [CInt: Int] = [:]
        let mergedIndexOfEntry = self.descriptors.map { entry in
            if let index = indexInMerged[entry.fd] {
                merged[index].events |= entry.events
                return index
            }
            indexInMerged[entry.fd] = merged.count
            merged.append(pollfd(fd: entry.fd, events: entry.events, revents: 0))
            return merged.count - 1
        }
        let outcome = merged.withUnsafeMutableBufferPointer { buffer in
            self.callPoll(on: buffer, timeoutNanoseconds: timeoutNanoseconds)
        }
        guard case .success(.processed?) = outcome else {
            return Self.readyCount(of: outcome, timeoutNanoseconds: timeoutNanoseconds) { error in
                fatalError("LoopKit: Loop.run(mode:before:) waiting for \(merged.count) descriptors, more than the "
                           + "process's descriptor limit (RLIMIT_NOFILE, lowered after they were opened?): \(error)")
            }
        }
        let alwaysReported = Int16(POLLERR | POLLHUP | POLLNVAL)
        var ready = 0
        for (entry, index) in mergedIndexOfEntry.enumerated() {
            let revents = merged[index].revents & (self.descriptors[entry].events | alwaysReported)
            self.descriptors[entry].revents = revents
            ready += revents == 0 ? 0 : 1
        }
        return ready
    }

    /// What a wait's outcome tells the caller: the number of descriptors with events, or -1 to wait again with what is
    /// left of its timeout (after a pause when the kernel could not allocate for it); any other failure is `failed`'s.
    private static func readyCount(
        of outcome: Result<IOResult<CInt>?, SystemCallError>,
        timeoutNanoseconds: Int64,
        failed: (SystemCallError) -> Never
    ) -> Int {
        switch outcome {
        case .success(.processed(let ready)?):
            return Int(ready)
        case .success(nil):
            return -1  // EINTR: the caller waits again for what is left
        case .success(.wouldBlock?):
            Self.pauseAfterFailedWait(upTo: timeoutNanoseconds)  // EAGAIN: as ENOMEM
            return -1
        case .failure(let error) where error.code == ENOMEM:
            Self.pauseAfterFailedWait(upTo: timeoutNanoseconds)
            return -1
        case .failure(let error):
            failed(error)
        }
    }

    /// One call of ppoll(2) or poll(2) on `buffer`.
    private func callPoll(
        on buffer: UnsafeMutableBufferPointer<pollfd>,
        timeoutNanoseconds: Int64
    ) -> Result<IOResult<CInt>?, SystemCallError> {
        let call = self.call
        return Result { () throws(SystemCallError) in
            try call.callOnce(on: buffer.baseAddress, count: buffer.count, timeoutNanoseconds: timeoutNanoseconds,
                              descriptors: .user)
        }
    }

    /// The longest pause after the kernel could not allocate for a wait (ENOMEM, EAGAIN).
    static let backOffNanoseconds: Int64 = 1_000_000

    /// Sleeps a millisecond (less when the wait's timeout is shorter) after a wait the kernel could not allocate
    /// for (ENOMEM, EAGAIN; `EpollSet` too), so that a lasting shortage costs a retry per millisecond instead of a
    /// spin. Nothing is lost: a wake-up or a ready descriptor stays readable for the next wait. Loop thread.
    static func pauseAfterFailedWait(upTo timeoutNanoseconds: Int64) {
        let pause = timeoutNanoseconds < 0 ? backOffNanoseconds : min(timeoutNanoseconds, backOffNanoseconds)
        var request = timespec(tv_sec: 0, tv_nsec: Int(pause))
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR {
            request = remaining
        }
    }

    /// A timeout in nanoseconds as poll(2)'s milliseconds, rounded up (never early); negative waits for ever.
    static func milliseconds(_ nanoseconds: Int64) -> CInt {
        guard nanoseconds >= 0 else { return -1 }
        let milliseconds = nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
        return CInt(clamping: milliseconds)
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
