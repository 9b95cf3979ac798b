/// Where the loop calls user code, so that an attached `LoopTracer` can time each callout.
extension Loop {
    /// What kind of user code a callout runs.
    enum Callout {
        case timer
        case source
        case descriptor(CInt)
        case block
        case observer(LoopActivity)

        var name: String {
            switch self {
            case .timer: "timer"
            case .source: "source"
            case .descriptor(let descriptor): "descriptor \(descriptor)"
            case .block: "block"
            case .observer(let activity): "observer \(activity)"
            }
        }
    }

    /// Runs `body`, a callout into user code, bracketed by tracer events when a tracer is attached. Loop thread.
    ///
    /// Without a tracer this is one load of a flag and a branch: the weak reference is loaded only when one was set.
    @inline(__always)
    func callOut<Result>(_ callout: Callout, _ body: () -> Result) -> Result {
        guard self.mayHaveTracer, let tracer = self.tracer else {
            return body()
        }
        tracer.calloutBegan(callout)
        defer { tracer.calloutEnded(callout) }
        return body()
    }
}
