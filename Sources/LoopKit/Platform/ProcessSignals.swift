#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLoopKitSystem

/// Process-signal handlers that count deliveries and write to a pipe, for `LoopSignalSource`.
enum ProcessSignals {
    /// Adds a listener that counts each delivery of `number` and makes `pipe` readable; the first listener of a
    /// signal installs the async-signal-safe handler (sigaction(2)). Several listeners of one signal all see it.
    ///
    /// - Returns: The listener's slot, for `uninstall` and `takeCount`.
    /// - Throws: `SystemCallError` naming `sigaction`: `EINVAL` for a signal that cannot be caught, `EBUSY` when the
    ///   signal already has as many listeners as LoopKit keeps (16).
    static func install(_ number: CInt, notifying pipe: WakeupPipe) throws(SystemCallError) -> CInt {
        guard case .processed(let slot) = try nonBlockingCall("sigaction", {
            cloopkit_signal_install(number, pipe.writeEnd)
        }) else {
            throw SystemCallError(call: "sigaction", code: EAGAIN)  // the install never says this
        }
        return slot
    }

    /// Removes the listener in `slot`; the last listener of `number` gives the signal back the disposition it had
    /// before the first (sigaction(2)), e.g. `SIG_IGN` under nohup.
    ///
    /// Returns once no handler call can still write to the listener's pipe (one already running on another thread is
    /// waited for), so the pipe may be closed and its descriptor numbers reused.
    static func uninstall(_ number: CInt, slot: CInt) {
        cloopkit_signal_uninstall(number, slot)
    }

    /// The deliveries of `number` counted for the listener in `slot` since the last call.
    static func takeCount(_ number: CInt, slot: CInt) -> Int {
        Int(cloopkit_signal_take(number, slot))
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
