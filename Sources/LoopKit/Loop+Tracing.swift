/// Where the loop calls user code, so that an attached `LoopTracer` can time each callout.
extension Loop {
    /// What kind of user code a callout runs.
    enum Callout {
        case timer
        case source
        case descriptor(CInt)
        case block
        case observer(LoopActivity)
        case hangHandler

        var name: String {
            switch self {
            case .timer: "timer"
            case .source: "source"
            case .descriptor(let descriptor): "descriptor \(descriptor)"
            case .block: "block"
            case .observer(let activity): "observer \(activity)"
            case .hangHandler: "hang handler"
            }
        }
    }

    /// Runs `body`, a callout into user code, bracketed by the events of each attached tracer. Loop thread.
    ///
    /// Without a tracer this is one load of a flag and a branch: the weak references are loaded only when one was set.
    @inline(__always)
    func callOut<Result>(_ callout: Callout, _ body: () -> Result) -> Result {
        guard self.mayHaveTracer else {
            return body()
        }
        return self.callOutTraced(callout, body)
    }

    @inline(never)
    private func callOutTraced<Result>(_ callout: Callout, _ body: () -> Result) -> Result {
        // The tracers of this callout's begin are the ones told of its end, whatever `body` attaches or detaches.
        let tracers = self.tracers.compactMap(\.object)
        for tracer in tracers {
            tracer.calloutBegan(callout)
        }
        defer {
            for tracer in tracers.reversed() {
                tracer.calloutEnded(callout)
            }
        }
        return body()
    }

    /// Tells the attached tracers that the loop begins its wait (`isSleeping` true) or has ended it. Loop thread.
    ///
    /// From the wait itself, not from the `beforeWaiting` observers: a hang handler called after those is work.
    @inline(__always)
    func tellTracers(isSleeping: Bool) {
        if self.mayHaveTracer {  // as in `callOut`: without a tracer, a flag and a branch on every wait
            self.tellAttachedTracers(isSleeping: isSleeping)
        }
    }

    @inline(never)
    private func tellAttachedTracers(isSleeping: Bool) {
        for tracer in self.tracers.compactMap(\.object) {
            tracer.sleepChanged(isSleeping: isSleeping)
        }
    }

    /// Adds `tracer` to the tracers told of each callout, after those attached before it. Loop thread.
    func attach(_ tracer: LoopTracer) {
        self.tracers.append(WeakAttachment(tracer))
    }

    /// Takes the tracer `identity` names out of the tracers told of callouts; the others keep recording. Loop thread.
    ///
    /// By identity alone (see `WeakAttachment`): a tracer's `deinit` detaches it, so none stays listed once freed.
    func detachTracer(_ identity: ObjectIdentifier) {
        self.tracers.removeAll { $0.identity == identity }
    }
}

extension Loop {
    /// Adds `monitor` to the monitors told of every sleep. Loop thread.
    func attach(_ monitor: HitchMonitor) {
        if !self.mayHaveMonitor {
            // Not followed while no monitor was attached (a run may have begun or ended since): from here on.
            self.modeTimes.resume(in: self.runningModes.last, at: self.passNow)
        }
        self.monitors.append(WeakAttachment(monitor))
    }

    /// Takes the monitor `identity` names out of the monitors told of sleeps (by identity alone, as `detachTracer`).
    /// Loop thread.
    func detachMonitor(_ identity: ObjectIdentifier) {
        self.monitors.removeAll { $0.identity == identity }
    }

    /// Tells the attached monitors that the loop is about to sleep (`isWaking` false) or has woken (true), in any
    /// mode: a run of a mode a monitor does not watch, nested in a callback of one it does, sleeps without its
    /// observers. Loop thread.
    func tellMonitors(isWaking: Bool) {
        guard self.mayHaveMonitor else { return }
        // The list as it is now: a hang handler called from here may attach or detach one.
        for monitor in self.monitors.compactMap(\.object) {
            if isWaking {
                monitor.loopDidWake()
            } else {
                monitor.loopWillSleep()
            }
        }
    }
}
