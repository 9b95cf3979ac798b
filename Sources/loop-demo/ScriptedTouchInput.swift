import LoopKit

/// Touches from a script, delivered as a real system delivers them: written into a pipe by another party, read on
/// the loop by a descriptor source.
///
/// The source is in `common`, so it reads in `default` (the touch-down) and in `tracking` (the moves and the
/// touch-up, inside the nested run that the touch-down started). It takes one record per callback: being
/// level-triggered, it is called again at once while more records wait, and a touch-down's nested run then reads
/// the rest in order. When the writer closes the pipe, the source sees end of file and cancels itself.
///
/// Who writes depends on `playback`: `.thread` is the demo (an input thread sleeping until each event's time),
/// `.loopTimers` is for a loop on a `ManualLoopClock`, where another thread cannot keep virtual time: one-shot timers
/// in `common` write each record at its time.
final class ScriptedTouchInput: TouchInput {
    enum Playback {
        /// An input thread plays the script in real time.
        case thread
        /// Timers on the session's loop play the script, in whatever time the loop's clock keeps.
        case loopTimers
    }

    let script: TouchScript
    let playback: Playback
    private var pipe: DemoPipe?
    private var reader: LoopDescriptorSource?
    private var player: TouchPlayerThread?
    private var timers: [LoopTimer] = []

    init(script: TouchScript, playback: Playback = .thread) {
        self.script = script
        self.playback = playback
    }

    func start(session: TrackingSession, at start: LoopInstant) throws(DemoError) {
        let pipe = try DemoPipe()
        self.pipe = pipe
        let reader = LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable,
                                          on: session.loop.assumeIsolated()) { [weak session] source, _ in
            switch pipe.read(maximum: TouchEvent.recordSize) {
            case .bytes(let record):
                if let event = TouchEvent(record: record) {
                    session?.handle(event)
                }
            case .wouldBlock:
                break
            case .endOfFile:
                source.invalidate()  // the script is over and the writer closed its end
            }
        }
        session.loop.add(reader, forMode: .common)
        self.reader = reader

        switch self.playback {
        case .thread:
            self.player = TouchPlayerThread.start(script: self.script, pipe: pipe, loop: session.loop, start: start)
        case .loopTimers:
            for (index, step) in self.script.steps.enumerated() {
                let isLast = index == self.script.steps.count - 1
                let timer = LoopTimer(fireAt: start + step.offset) { _ in
                    pipe.write(step.event.record)
                    if isLast { pipe.closeWriteEnd() }
                }
                session.loop.add(timer, forMode: .common)
                self.timers.append(timer)
            }
        }
    }

    func stop() {
        self.player?.stopAndWait()
        for timer in self.timers {
            timer.invalidate()
        }
        self.reader?.invalidate()  // before the read end is closed, so the loop never polls a closed descriptor
        self.pipe?.closeWriteEnd()
        self.pipe?.closeReadEnd()
        self.player = nil
        self.timers = []
        self.reader = nil
        self.pipe = nil
    }
}
