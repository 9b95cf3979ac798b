/// Records what a loop does, in the Trace Event Format that Perfetto (ui.perfetto.dev) and chrome://tracing open.
///
/// Each run call is a slice named after its mode; inside it, each pass is a slice, with each wait ("sleep") and every
/// callout (timer, source, descriptor source, block, observer, a hitch monitor's hang handler) as slices within it,
/// and the activities as instant events.
/// A run nested in a callout nests inside that callout's slice. Times are the loop clock's, in microseconds from the
/// tracer's creation. Observers of LoopKit's own instruments (tracers, hitch monitors) are not recorded.
///
/// A loop without a tracer pays one flag check per callout. Several tracers may record one loop at once, each on its
/// own. Recording appends to memory until `invalidate()`; `json()` and `write(toFile:)` may be called at any time,
/// from any thread.
public final class LoopTracer: Sendable {
    struct Event: Sendable {
        let name: String
        let category: String
        let phase: Character
        let time: LoopInstant
    }

    private struct State {
        var events: [Event] = []
        /// The names of the slices begun and not yet ended, innermost last.
        var openSlices: [String] = []
        var isRecording = true

        mutating func begin(_ name: String, _ category: String, at time: LoopInstant) {
            self.events.append(Event(name: name, category: category, phase: "B", time: time))
            self.openSlices.append(name)
        }

        mutating func end(_ category: String, at time: LoopInstant) {
            guard let name = self.openSlices.popLast() else { return }
            self.events.append(Event(name: name, category: category, phase: "E", time: time))
        }

        mutating func instant(_ name: String, at time: LoopInstant) {
            self.events.append(Event(name: name, category: "activity", phase: "i", time: time))
        }
    }

    /// The loop traced.
    public let loop: Loop
    /// The name of the loop's thread in the trace.
    public let threadName: String
    private let origin: LoopInstant
    private let state = LoopLock(State())
    private let observers: [LoopObserver]

    /// Starts recording `loop` in `modes` (the common modes by default). Any thread.
    public init(loop: Loop, modes: [LoopMode] = [.common], threadName: String = "loop") {
        self.loop = loop
        self.threadName = threadName
        self.origin = loop.now
        let box = WeakTracer()
        let first = LoopObserver(activities: [.entry, .beforeTimers, .beforeSources, .afterWaiting], order: .min) {
            _, activity in box.tracer?.activityBegan(activity)
        }
        let last = LoopObserver(activities: [.beforeWaiting, .exit], order: .max) { _, activity in
            box.tracer?.activityBegan(activity)
        }
        first.isInstrumentation = true
        last.isInstrumentation = true
        self.observers = [first, last]
        box.tracer = self
        for mode in modes {
            loop.add(first, forMode: mode)
            loop.add(last, forMode: mode)
        }
        loop.onLoopThread { [weak self] loop in
            // A tracer freed or invalidated before this ran never records callouts.
            guard let self, self.state.withLock({ $0.isRecording }) else { return }
            loop.attach(self)
        }
    }

    deinit {
        self.invalidate()
    }

    /// Stops recording; what was recorded stays available, with the slices still open (a run in progress) ended
    /// now. Any thread.
    public func invalidate() {
        let now = self.loop.now
        self.state.withLock { state in
            guard state.isRecording else { return }
            // Not before the last event: the loop's thread may have read a later time and recorded since `now`.
            let end = max(now, state.events.last?.time ?? now)
            while !state.openSlices.isEmpty {
                state.end("stopped", at: end)
            }
            state.isRecording = false
        }
        for observer in self.observers {
            observer.invalidate()
        }
        let identity = ObjectIdentifier(self)
        self.loop.onLoopThread { loop in
            loop.detachTracer(identity)
        }
    }

    /// The number of events recorded. Any thread.
    public var eventCount: Int {
        self.state.withLock { $0.events.count }
    }

    /// The trace as Trace Event Format JSON (`{"traceEvents": [...]}`). Any thread.
    ///
    /// Slices still open (a run in progress, while recording) are closed at the time of the call, so the JSON always
    /// nests.
    public func json() -> String {
        let (events, openSlices) = self.state.withLock { ($0.events, $0.openSlices) }
        let now = self.loop.now
        let closing = openSlices.reversed().map { Event(name: $0, category: "open", phase: "E", time: now) }
        var json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
        json += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"LoopKit\"}},\n"
        json += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":"
            + LoopTracer.quoted(self.threadName) + "}}"
        for event in events + closing {
            json += ",\n" + self.line(for: event)
        }
        json += "\n]}\n"
        return json
    }

    /// Writes `json()` to the file at `path`, replacing it. Any thread.
    ///
    /// A regular file of the caller's is replaced whole (written beside it, then renamed over it, keeping its group
    /// and permission bits), so that a viewer reloading it never reads half a trace, and a failed write leaves the
    /// previous trace. A symbolic link, a device such as `/dev/stdout`, a pipe, a file with other hard links, another
    /// owner or no write permission, a bind-mounted file, or one where no file can be made beside it is written in
    /// place.
    ///
    /// - Throws: `SystemCallError` naming the call (`open`, `write`, `close`, `rename`) that failed.
    public func write(toFile path: String) throws(SystemCallError) {
        try writeWholeFile(path: path, contents: Array(self.json().utf8))
    }

    private func line(for event: Event) -> String {
        let microseconds = Double(event.time.nanoseconds &- self.origin.nanoseconds) / 1000
        var line = "{\"name\":" + LoopTracer.quoted(event.name) + ",\"cat\":" + LoopTracer.quoted(event.category)
            + ",\"ph\":\"\(event.phase)\",\"ts\":\(microseconds),\"pid\":1,\"tid\":1"
        if event.phase == "i" {
            line += ",\"s\":\"t\""
        }
        return line + "}"
    }

    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    // MARK: Recording (loop thread)

    private func record(_ body: (inout State) -> Void) {
        self.state.withLock { state in
            guard state.isRecording else { return }
            body(&state)
        }
    }

    private func activityBegan(_ activity: LoopActivity) {
        let now = self.loop.now
        let mode = self.loop.currentMode?.name ?? "?"
        self.record { state in
            switch activity {
            case .entry:
                state.begin("run \(mode)", "run", at: now)
                state.instant("entry", at: now)
            case .beforeTimers:
                if state.openSlices.last == "pass" {
                    state.end("pass", at: now)
                }
                state.begin("pass", "pass", at: now)
                state.instant("beforeTimers", at: now)
            case .exit:
                if state.openSlices.last == "pass" {
                    state.end("pass", at: now)
                }
                state.instant("exit", at: now)
                // Only a run slice this tracer began: one made inside a run saw no entry, and must not end the slice
                // of the callout it was made in.
                if state.openSlices.last?.hasPrefix("run ") == true {
                    state.end("run", at: now)
                }
            default:
                state.instant("\(activity)", at: now)
            }
        }
    }

    /// The loop begins or ends its wait, in any mode: a sleep slice in a pass this tracer records (a run of another
    /// mode, nested in a callout, shows as that callout).
    func sleepChanged(isSleeping: Bool) {
        let now = self.loop.now
        self.record { state in
            if isSleeping {
                if state.openSlices.last == "pass" {
                    state.begin("sleep", "sleep", at: now)
                }
            } else if state.openSlices.last == "sleep" {
                state.end("sleep", at: now)
            }
        }
    }

    func calloutBegan(_ callout: Loop.Callout) {
        let now = self.loop.now
        self.record { $0.begin(callout.name, "callout", at: now) }
    }

    func calloutEnded(_ callout: Loop.Callout) {
        let now = self.loop.now
        self.record { $0.end("callout", at: now) }
    }
}

/// Lets the tracer's observers reach it without keeping it alive.
private final class WeakTracer: @unchecked Sendable {  // @unchecked: set once in the tracer's init, then read only
    weak var tracer: LoopTracer?
}
