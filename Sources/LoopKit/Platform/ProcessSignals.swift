#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// Process-signal handlers that count deliveries and write to a pipe, for `LoopSignalSource`.
enum ProcessSignals {
    /// Counts each delivery of `number` and makes `pipe` readable (sigaction(2) with an async-signal-safe handler).
    ///
    /// - Throws: `SystemCallError` naming `sigaction`: `EINVAL` for a signal that cannot be caught, `EBUSY` when
    ///   another `LoopSignalSource` already handles it.
    static func install(_ number: CInt, notifying pipe: WakeupPipe) throws(SystemCallError) {
        _ = try nonBlockingCall("sigaction") { cloopkit_signal_install(number, pipe.writeEnd) }
    }

    /// Gives `number` back the disposition it had before `install` (sigaction(2)), e.g. `SIG_IGN` under nohup.
    ///
    /// Returns once no handler call can still write to the pipe (one already running on another thread is waited
    /// for), so the pipe may be closed and its descriptor numbers reused.
    static func uninstall(_ number: CInt) {
        cloopkit_signal_uninstall(number)
    }

    /// The deliveries of `number` since the last call.
    static func takeCount(_ number: CInt) -> Int {
        Int(cloopkit_signal_take(number))
    }

    /// Sends `number` to this process (kill(2)).
    static func raiseInProcess(_ number: CInt) {
        do {
            _ = try nonBlockingCall("kill") { kill(getpid(), number) }
        } catch {
            trap("LoopSignalSource.sendToThisProcess(_:)", error)  // EINVAL: not a signal number
        }
    }
}
