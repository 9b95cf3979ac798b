import Dispatch
import LoopKit

/// The session behind `loop-demo phases`: a few passes of a loop with one of each kind of work, recorded as an
/// observer sees them.
///
/// The work is chained, so the order follows from the loop's rules and not from timing: a block queued before the
/// run; a one-shot timer 20 ms in; the timer asks another thread to signal a source 15 ms later; the source asks
/// that thread to write into a pipe 15 ms later; the descriptor source on the pipe reads it and queues a block,
/// which stops the loop. An observer of every activity records each one with its time, and each callback records
/// what it handled.
///
/// Loop-confined: create and run it on the loop's thread.
final class PhasesTour {
    /// One line of the record.
    struct Event: Equatable {
        enum Kind: Equatable {
            /// An observer callback.
            case activity(LoopActivity)
            /// A callback that handled something: `item` is "block", "timer", "source" or "descriptor", or "signal"
            /// for the signal that ended the tour early.
            case handled(item: String, detail: String)
        }

        /// Time since the tour started.
        let time: Duration
        let kind: Kind
    }

    let loop: Loop
    /// What the tour recorded.
    private(set) var events: [Event] = []
    /// How the run ended.
    private(set) var result: RunResult?
    private var start: LoopInstant

    init(loop: Loop) {
        self.loop = loop
        self.start = loop.now
    }

    /// Runs the tour; returns when the last block has stopped the loop (or `stop(becauseOf:)` was called, or after
    /// 10 s).
    ///
    /// - Throws: `DemoError` when the pipe cannot be opened.
    @available(*, noasync)
    func run() throws(DemoError) -> [Event] {
        let loop = self.loop
        let pipe = try DemoPipe()
        let helper = DispatchQueue(label: "phases-helper")  // "another thread"
        self.start = loop.now

        let isolated = loop.assumeIsolated()
        let observer = LoopObserver(activities: .allActivities, on: isolated) { [unowned self] _, activity in
            self.record(.activity(activity))
        }
        let source = LoopSource(on: isolated) { [unowned self] _ in
            self.record(.handled(item: "source", detail: "\"mailbox\" runs: another thread signalled it. "
                + "It asks that thread to write into the pipe in 15 ms"))
            helper.asyncAfter(deadline: .now() + .milliseconds(15)) { pipe.write(Array("ping".utf8)) }
        }
        let reader = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable, on: isolated) {
            [unowned self] _, events in
            var text = ""
            if case .bytes(let bytes) = pipe.read(maximum: 64) {
                text = String(decoding: bytes, as: UTF8.self)
            }
            let readable = events.contains(.readable) ? "readable" : "\(events)"
            self.record(.handled(item: "descriptor", detail: "the pipe (fd \(pipe.readEnd)) is \(readable): "
                + "the handler reads \"\(text)\" and queues a block with perform"))
            let tour = LoopConfined(self)
            loop.perform {
                tour.value.record(.handled(item: "block", detail: "queued by the descriptor handler: runs at the end "
                    + "of the same pass. It calls stop()"))
                loop.stop()
            }
        }
        let timer = LoopTimer(interval: .milliseconds(20), on: isolated) { [unowned self] _ in
            self.record(.handled(item: "timer", detail: "\"tick\" fires, 20 ms after it was added. It asks another "
                + "thread to signal the source in 15 ms"))
            helper.asyncAfter(deadline: .now() + .milliseconds(15)) { source.signal() }
        }
        loop.add(observer, forMode: .default)
        loop.add(source, forMode: .default)
        loop.add(reader, forMode: .default)
        loop.add(timer, forMode: .default)
        let tour = LoopConfined(self)
        loop.perform {
            tour.value.record(.handled(item: "block", detail: "queued with perform before the run"))
        }

        self.result = loop.run(mode: .default, before: self.start + .seconds(10))  // the deadline is a hang guard

        observer.invalidate()
        timer.invalidate()
        source.invalidate()
        reader.invalidate()
        // The write end first: a write the helper queue delays past this (a Ctrl-C right after the mailbox ran)
        // then finds it closed, instead of writing into a pipe with no reader (SIGPIPE).
        pipe.closeWriteEnd()
        pipe.closeReadEnd()
        return self.events
    }

    /// Ends the tour early because `signal` arrived (Ctrl-C), and records it: it is what ended the sleep. Loop thread.
    func stop(becauseOf signal: CInt) {
        let name = InterruptSignal.name(of: signal)
        self.record(.handled(item: "signal", detail: "\(name) arrived: stop() ends the run"))
        self.loop.stop()
    }

    private func record(_ kind: Event.Kind) {
        self.events.append(Event(time: self.loop.now - self.start, kind: kind))
    }
}

@available(*, unavailable, message: "PhasesTour is confined to its loop's thread")
extension PhasesTour: Sendable {}
