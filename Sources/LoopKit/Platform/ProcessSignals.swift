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
    /// - Returns: The listener's ticket, for `uninstall` and `takeCount`: its slot, and which listener of that slot.
    /// - Throws: `SystemCallError` naming `sigaction`: `EINVAL` for a signal that cannot be caught or is raised by a
    ///   fault (`SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGTRAP`, `SIGSYS`), `EBUSY` when the
    ///   signal already has as many listeners as LoopKit keeps (16).
    static func install(_ number: CInt, notifying pipe: WakeupPipe) throws(SystemCallError) -> CInt {
        guard case .processed(let ticket) = try nonBlockingCall("sigaction", {
            cloopkit_signal_install(number, pipe.writeEnd)
        }) else {
            throw SystemCallError(call: "sigaction", code: EAGAIN)  // the install never says this
        }
        return ticket
    }

    /// Removes the listener with `ticket` (a second call does nothing); the last listener of `number` gives the signal back the disposition it had
    /// before the first (sigaction(2)), e.g. `SIG_IGN` under nohup.
    ///
    /// Returns once no handler call can still write to the listener's pipe (one already running on another thread is
    /// waited for), so the pipe may be closed and its descriptor numbers reused.
    ///
    /// - Returns: The deliveries counted for the listener and not taken (0 from a second call): none is counted after.
    @discardableResult
    static func uninstall(_ number: CInt, ticket: CInt) -> Int {
        Int(cloopkit_signal_uninstall(number, ticket))
    }

    /// The deliveries of `number` counted for the listener with `ticket` since the last call; 0 once it is removed,
    /// even when another listener has taken its slot.
    static func takeCount(_ number: CInt, ticket: CInt) -> Int {
        Int(cloopkit_signal_take(number, ticket))
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
