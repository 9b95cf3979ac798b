/// Drives a loop from another event loop (GLib's main loop, SDL's, a `poll` loop of your own) instead of `run`: a
/// descriptor that is readable whenever the loop has work, the time until its next timer, and a call that runs one
/// pass without blocking (libuv's `uv_backend_fd` and `uv_backend_timeout`, GLib's prepare, query and check).
///
/// The host's cycle:
///
/// ```swift
/// let driver = try LoopHostDriver(loop: loop)          // on the loop's thread, which the host loop runs on
/// while hostIsRunning {
///     let timeout = driver.prepare()                   // nil: no timer; .zero: work is waiting now
///     hostPoll([driver.descriptor] + hostDescriptors, timeout)
///     driver.dispatch()                                // one non-blocking pass of the mode
/// }
/// ```
///
/// `descriptor` is an epoll set holding the loop's wake-up channel, a timer armed at the mode's next timer, and the
/// mode's descriptor sources, so `perform`, `signal()`, timers and ready descriptors all make it readable. Between
/// `prepare()` and `dispatch()` the loop counts as asleep: other threads wake it through the descriptor. While a driver
/// lives, the host loop stands for the outermost run: a `Loop.stop()` made while no run is active (the host asleep, or
/// busy between passes) makes the next `dispatch()` return `.stopped`, as does one made during a pass. (A host loop
/// iterated inside a callback of a run is inside that run: a stop made then is the run's, as in CF.) On the main
/// thread's loop, the main queue's source is among the mode's descriptors (in a common mode). Once the loop has ended
/// (`Loop.invalidate()`), `prepare()` returns `nil`, `descriptor` is never readable again, and `dispatch()` returns
/// `.finished`: the host sleeps on its own sources, never spins. Linux only (`init` throws elsewhere). Loop thread
/// only, except `descriptor`.
public final class LoopHostDriver {
    /// The loop driven. Any thread.
    public let loop: Loop
    /// The mode that `dispatch()` runs.
    public let mode: LoopMode
    private let epoll: EpollSet
    private let deadlineTimer: DeadlineTimer?
    /// What each watched descriptor of the mode is registered for, and for which sources.
    private var registered: [CInt: Registration] = [:]
    /// The loop has ended and the epoll set is empty for good (`quieten()`).
    private var isQuiet = false

    /// A descriptor's registration: the events its sources watch, and which sources they are, told apart by their
    /// `sequence` numbers (a loop never gives one twice): how many, the newest, and their sum. Another source on the
    /// same number may be another file: the number was closed and reused, and the kernel dropped the old file's
    /// registration with its last descriptor. Three numbers rather than a list, so a `prepare()` allocates nothing
    /// per descriptor.
    private struct Registration: Equatable {
        var events: DescriptorEvents = []
        var sourceCount = 0
        var newestSource: UInt64 = 0
        var sourceSum: UInt64 = 0

        mutating func add(_ source: LoopDescriptorSource) {
            self.events.formUnion(source.events)
            self.sourceCount += 1
            self.newestSource = max(self.newestSource, source.sequence)
            self.sourceSum &+= source.sequence
        }

        func hasSameSources(as other: Registration) -> Bool {
            (self.sourceCount, self.newestSource, self.sourceSum)
                == (other.sourceCount, other.newestSource, other.sourceSum)
        }
    }

    /// A driver for `loop`'s `mode`.
    ///
    /// - Throws: `SystemCallError` when the system has no epoll or timerfd (`ENOSYS`), or no descriptor is left.
    /// - Precondition: Called on the loop's thread; `mode` is not `.common`.
    public init(loop: Loop, mode: LoopMode = .default) throws(SystemCallError) {
        loop.preconditionIsCurrent("LoopHostDriver(loop:mode:)")
        loopPrecondition(mode != .common, "LoopHostDriver(loop:mode:): `common` is a pseudo-mode; drive a real mode")
        guard let epoll = EpollSet() else {
            throw SystemCallError.unsupported("epoll_create1")
        }
        self.loop = loop
        self.mode = mode
        self.epoll = epoll
        // Thrown, not done without: a host that sleeps on the descriptor alone would never wake for a timer.
        if loop.clock.readsSystemMonotonicClock {
            self.deadlineTimer = try DeadlineTimer()
        } else {
            self.deadlineTimer = nil
        }
        _ = epoll.addOwn(loop.waiter.wakeUpDescriptor)
        if let deadlineTimer {
            _ = epoll.addOwn(deadlineTimer.descriptor)
        }
        loop.serveMainQueueIfNeeded()  // the main loop's main-queue source, before the first `prepare()` looks
        loop.attach(self)
    }

    /// Takes `source`'s descriptor out of the epoll set as the source leaves the driver's mode, if no other source of
    /// the mode watches it: while the number is still open, so that the kernel drops the file's registration. Left
    /// for the next `prepare()`, a close made in between (the usual `invalidate()` then `close()`) would leave the
    /// registration alive wherever a duplicate of the file lives on (a child process), and the descriptor readable
    /// for good: the host would spin. Loop thread.
    func descriptorSource(_ source: LoopDescriptorSource, didLeave items: ModeItems) {
        let descriptor = source.descriptor
        guard items.mode == self.mode, !self.isQuiet, self.registered[descriptor] != nil,
              !items.descriptorSources.contains(where: { $0.descriptor == descriptor && $0.isValid }) else { return }
        _ = self.epoll.remove(descriptor)
        self.registered[descriptor] = nil
    }

    /// The descriptor the host watches for reading: readable whenever the loop has work. Any thread.
    public var descriptor: CInt { self.epoll.descriptor }

    /// Gets ready for the host's sleep: brings the descriptor up to date with the mode and arms its timer.
    ///
    /// - Returns: The longest the host may sleep before calling `dispatch()`: `.zero` when work is waiting now,
    ///   `nil` when only the descriptor can end the sleep. Hosts with their own timers may use it instead of the
    ///   descriptor's timer (GLib's `prepare` timeout).
    @available(*, noasync)
    public func prepare() -> Duration? {
        self.loop.preconditionIsCurrent("LoopHostDriver.prepare()")
        guard !self.loop.hasEnded else {
            self.quieten()
            return nil  // no work, now or ever: only the host's own sources end its sleep
        }
        self.loop.applyControlMessages()
        let items = self.loop.modeItems(for: self.mode)
        // Announced before the descriptors and the timers are read: from here on, a change made on another thread
        // (a source's `events`, a timer moved or added) wakes the host, where before it would be lost. A wait an
        // earlier prepare() announced, with no dispatch() since (GLib prepares again when its poll woke for other
        // sources), is announced afresh: what arrived meanwhile must make this answer `.zero` too.
        guard self.loop.announceHostWait() else {
            return self.workIsWaiting()  // queued work, a stop or a wake-up
        }
        guard self.syncRegistrations(with: items) else {
            return self.workIsWaiting()  // epoll refused a descriptor (closed, or a regular file): the look reports it
        }
        if self.loop.hasTakenWork(for: self.mode) {
            return self.workIsWaiting()  // blocks or a signal a nested run took and left for this mode
        }
        guard let next = self.loop.nextTimerWake(in: items) else {
            _ = self.deadlineTimer?.set(nil)
            return nil
        }
        let now = self.loop.now
        guard next > now else { return self.workIsWaiting() }
        _ = self.deadlineTimer?.set(next.nanoseconds)
        return next - now
    }

    /// `prepare()`'s answer when work waits now: `.zero`, with the timer armed at an instant already passed, so that
    /// `descriptor` is readable too (a host that watches only the descriptor dispatches at once). The next
    /// `prepare()` re-arms it.
    private func workIsWaiting() -> Duration {
        _ = self.deadlineTimer?.set(1)
        return .zero
    }

    /// Runs one pass of the mode without blocking: due timers, ready descriptor sources, signalled sources and
    /// queued blocks, with the observers' activities of a pass.
    ///
    /// - Returns: What the pass's run returned (`.finished` when the mode holds nothing).
    @available(*, noasync)
    @discardableResult
    public func dispatch() -> RunResult {
        self.loop.preconditionIsCurrent("LoopHostDriver.dispatch()")
        self.loop.endHostWait()
        guard !self.loop.hasEnded else {
            self.quieten()
            return .finished  // its items are gone (`Loop.invalidate()`, or its thread's end)
        }
        // A stop made while the host slept ends this dispatch `.stopped`, after the pass its wake-up brings; one made
        // during the pass, too: the pass's deadline, `now`, is no reason to spend it on `.timedOut`.
        let wasStoppedWhileAsleep = self.loop.takeHostStop()
        let outerHostPass = self.loop.hostPassDepth
        self.loop.hostPassDepth = self.loop.runningModes.count + 1
        defer { self.loop.hostPassDepth = outerHostPass }
        let result = self.loop.run(mode: self.mode, before: self.loop.now)
        if result == .finished && self.loop.isEmpty(self.mode) {
            // The run made no pass, so no look read a wake-up that ended the host's sleep (a `wakeUp()`, work for
            // another mode, a stop): read it here, or the descriptor stays readable and the host spins.
            self.loop.absorbWakeUp(in: self.mode)
        }
        return wasStoppedWhileAsleep ? .stopped : result
    }

    /// Takes every descriptor out of the epoll set, once the loop has ended: no work can reach it any more, and a
    /// wake-up left in its channel, a fired timer or a ready descriptor would keep `descriptor` readable, and the host
    /// spinning, for ever.
    private func quieten() {
        guard !self.isQuiet else { return }
        self.isQuiet = true
        _ = self.epoll.remove(self.loop.waiter.wakeUpDescriptor)
        if let deadlineTimer {
            _ = deadlineTimer.set(nil)
            _ = self.epoll.remove(deadlineTimer.descriptor)
        }
        for descriptor in self.registered.keys {
            _ = self.epoll.remove(descriptor)
        }
        self.registered = [:]
    }

    /// Registers the mode's descriptor sources in the epoll set, and unregisters those that left.
    ///
    /// - Returns: Whether every descriptor is registered.
    /// - Complexity: O(*n*) for *n* descriptor sources in the mode.
    private func syncRegistrations(with items: ModeItems) -> Bool {
        var isComplete = true
        var wanted: [CInt: Registration] = [:]
        for source in items.descriptorSources where source.isValid {
            wanted[source.descriptor, default: Registration()].add(source)
        }
        for (descriptor, _) in self.registered where wanted[descriptor] == nil {
            _ = self.epoll.remove(descriptor)
            self.registered[descriptor] = nil
        }
        for (descriptor, registration) in wanted where self.registered[descriptor] != registration {
            let events = registration.events
            let result: EpollSet.ChangeResult
            if let previous = self.registered[descriptor], previous.hasSameSources(as: registration) {
                result = self.epoll.modify(descriptor, watching: events)
            } else {
                _ = self.epoll.remove(descriptor)  // fails harmlessly for a new number, or one closed since
                result = self.epoll.add(descriptor, watching: events)
            }
            switch result {
            case .done:
                self.registered[descriptor] = registration
            case .alreadyRegistered:
                _ = self.epoll.modify(descriptor, watching: events)
                self.registered[descriptor] = registration
            default:
                self.registered[descriptor] = nil
                isComplete = false
            }
        }
        return isComplete
    }

    deinit {
        let identity = ObjectIdentifier(self)
        let detach = { @Sendable (loop: Loop) in
            loop.endHostWait()
            loop.detachHostDriver(identity)
        }
        if self.loop.isCurrent {
            detach(self.loop)
        } else {
            // Freed on another thread (the last copy of a `LoopBound` that held it dropped there): the loop's host
            // state is its thread's. An ended loop needs neither step.
            self.loop.post(detach)
        }
    }
}

@available(*, unavailable, message: "LoopHostDriver is confined to its loop's thread")
extension LoopHostDriver: Sendable {}
