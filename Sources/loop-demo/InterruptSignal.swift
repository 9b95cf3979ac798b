import Dispatch
import Foundation
import LoopKit
import Synchronization

/// Delivers Ctrl-C (SIGINT) and SIGTERM to a loop, so that a demo ends through its normal path: the summary is
/// printed, the trace written and the terminal restored.
///
/// The signals are caught by a dispatch signal source on a global queue, which signals a `LoopSource` in `common`:
/// the callback then runs on the loop's thread, in `default` or in a drag's `tracking` alike. A second signal means
/// the loop is not answering (a callback stuck in a long computation): it restores the terminal and exits at once.
final class InterruptSignal {
    private let signals: [CInt]
    private let loopSource: LoopSource
    private let dispatchSources: [any DispatchSourceSignal]

    /// Starts catching `signals` for `loop`; `handler` runs on the loop's thread. Loop thread.
    init(loop: Loop, signals: [CInt] = [SIGINT, SIGTERM], handler: @escaping () -> Void) {
        self.signals = signals
        let loopSource = LoopSource { _ in
            // Wipe the "^C" the terminal echoed, through standard error so that stdout (--json) stays clean.
            if Terminal.isTerminal(Terminal.standardError) {
                Terminal.writeError("\r" + Terminal.clearToEndOfLine)
            }
            handler()
        }
        loop.add(loopSource, forMode: .common)
        self.loopSource = loopSource
        let received = Atomic<Int>(0)
        self.dispatchSources = signals.map { number in
            signal(number, SIG_IGN)  // the dispatch source, not the default action, handles it now
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if received.add(1, ordering: .relaxed).newValue == 1 {
                    loopSource.signal()
                } else {
                    Terminal.restore()
                    exit(130)
                }
            }
            source.resume()
            return source
        }
    }

    /// Stops catching the signals: their default action applies again. Loop thread.
    func cancel() {
        for source in self.dispatchSources {
            source.cancel()
        }
        for number in self.signals {
            signal(number, SIG_DFL)
        }
        self.loopSource.invalidate()
    }
}
