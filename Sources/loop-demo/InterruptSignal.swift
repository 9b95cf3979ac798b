import Foundation
import LoopKit

/// Delivers Ctrl-C (SIGINT) and SIGTERM to a loop, so that a demo ends through its normal path: the summary is
/// printed, the trace written and the terminal restored.
///
/// Each signal is a `LoopSignalSource` in `common`: the handler runs on the loop's thread, in `default` or inside a
/// drag's `tracking` run alike, so a drag does not hold off a Ctrl-C. `invalidate()` gives the signals their default
/// action back.
final class InterruptSignal {
    private let sources: [LoopSignalSource]

    /// Starts catching `signals` for `loop`; `handler` runs on the loop's thread, once per burst of signals, with the
    /// signal's number. Loop thread.
    ///
    /// - Throws: `DemoError` when a signal cannot be caught (e.g. out of descriptors for its pipe).
    init(loop: Loop, signals: [CInt] = [SIGINT, SIGTERM], handler: @escaping (CInt) -> Void) throws(DemoError) {
        var sources: [LoopSignalSource] = []
        for number in signals {
            do {
                sources.append(try LoopSignalSource(signal: number, on: loop.assumeIsolated()) { _ in
                    // Wipe the "^C" the terminal echoed, through standard error so that stdout (--json) stays clean.
                    if Terminal.isTerminal(Terminal.standardError) {
                        Terminal.writeError("\r" + Terminal.clearToEndOfLine)
                    }
                    handler(number)
                })
            } catch {
                sources.forEach { $0.invalidate() }
                throw DemoError("cannot catch signal \(number): \(error)")
            }
        }
        self.sources = sources
    }

    /// How the user knows `signal`: "Ctrl-C" for SIGINT, "Ctrl-\" for SIGQUIT, else its name ("SIGTERM").
    static func name(of signal: CInt) -> String {
        switch signal {
        case SIGINT: "Ctrl-C"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        case SIGQUIT: "Ctrl-\\"
        default: "signal \(signal)"
        }
    }

    /// Stops catching the signals: their default action applies again. Any thread.
    func invalidate() {
        for source in self.sources {
            source.invalidate()
        }
    }
}
