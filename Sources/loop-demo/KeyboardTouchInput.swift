import LoopKit

/// Touches from the keyboard (`--interactive`): Enter starts a drag and Enter ends it; `q` (or end of input) quits.
///
/// A descriptor source in `common` watches standard input, so keys are read in `default` and inside the drag's
/// nested `tracking` run alike. It reads one byte per callback and lets the level-triggered source call again for
/// the next, so that an Enter that starts a drag does not swallow the keys typed after it. When standard input is a
/// terminal, it is switched to non-canonical mode without echo (each key arrives at once) and restored on `stop()`.
final class KeyboardTouchInput: TouchInput {
    let descriptor: CInt
    private var reader: LoopDescriptorSource?

    init(descriptor: CInt) {
        self.descriptor = descriptor
    }

    func start(session: TrackingSession, at start: LoopInstant) throws(DemoError) {
        Terminal.enterKeyboardMode(self.descriptor)
        let reader = LoopDescriptorSource(descriptor: self.descriptor, events: .readable,
                                          on: session.loop.assumeIsolated()) { [weak session] source, _ in
            guard let session else { return }
            guard let byte = Terminal.readByte(from: source.descriptor) else {
                source.invalidate()  // end of input: nobody can end a drag any more
                session.quit()
                return
            }
            switch byte {
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                let phase: TouchEvent.Phase = session.isDragging ? .up : .down
                session.handle(TouchEvent(phase: phase, x: 0, y: 0))
            case UInt8(ascii: "q"), UInt8(ascii: "Q"):
                session.quit()
            default:
                break
            }
        }
        session.loop.add(reader, forMode: .common)
        self.reader = reader
    }

    func stop() {
        self.reader?.invalidate()
        self.reader = nil
        Terminal.restoreKeyboard()
    }
}
