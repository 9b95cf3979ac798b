import Dispatch
import Foundation
import LoopKit
import Synchronization

/// `loop-demo echo`: a TCP echo server on loopback, built on a `LoopGroup` and descriptor sources.
///
/// The main thread runs `Loop.main`, which catches SIGINT and SIGTERM. The group's first loop accepts; each connection
/// goes to `group.next()` and stays on that loop's thread. On a signal the server shuts down gracefully: it stops
/// accepting, lets every connection send what it has queued (a few seconds at most) and close, shuts the group down,
/// and returns 0.
final class EchoServer {
    /// How long a shutdown waits for connections to take their queued output.
    static let shutdownGrace = Duration.seconds(5)

    private let options: DemoCommand.EchoOptions

    init(options: DemoCommand.EchoOptions) {
        self.options = options
    }

    /// A line on standard error. Any thread.
    static func log(_ line: String) {
        Terminal.writeError("loop-demo echo: \(line)\n")
    }

    /// Serves until SIGINT or SIGTERM. Main thread.
    ///
    /// - Returns: The exit status: 0 after a graceful shutdown.
    /// - Throws: `DemoError` when the socket, the loops or the signal sources cannot be set up.
    @available(*, noasync)
    func run() throws(DemoError) -> Int32 {
        let (listening, port) = try EchoSocket.listen(port: self.options.port)
        let group: LoopGroup
        do {
            group = try LoopGroup(name: "echo", threadCount: self.options.loops)
        } catch {
            EchoSocket.close(listening)
            throw DemoError("cannot start the loops: \(error)")
        }
        let connections = group.loops.map { loop in
            Self.onLoop(loop) { LoopBound(EchoConnections(loop: loop), loop: loop) }
        }
        let acceptingLoop = group.loops[0]
        let listener = Self.onLoop(acceptingLoop) {
            LoopBound(EchoListener(descriptor: listening, loop: acceptingLoop) { descriptor in
                let loop = group.next()
                let target = connections.first { $0.loop === loop }!
                loop.perform { target.value.serve(descriptor) }
            }, loop: acceptingLoop)
        }

        var isShuttingDown = false
        let signals = try InterruptSignal(loop: Loop.main) { _ in
            guard !isShuttingDown else {
                Self.log("already shutting down")
                return
            }
            isShuttingDown = true
            Self.log("shutting down: no new connections; flushing the open ones")
            Self.shutDown(group: group, listener: listener, connections: connections)
        }
        var setUpError: DemoError?
        let spare = self.options.spareDescriptors
        Loop.main.assumeIsolated().perform {
            // In the first pass: the main loop's first run has taken the main queue's descriptor from libdispatch,
            // which traps if none is left, so the limit must come after it.
            do throws(DemoError) {
                if let spare { try Self.limitDescriptors(spare: spare) }
            } catch {
                setUpError = error
                Loop.main.stop()
                return
            }
            Terminal.write("listening on 127.0.0.1:\(port)\n")
        }
        Loop.main.run()
        if setUpError != nil {
            // Not the shutdown path, which closed it first: a connection accepted now would be handed to a loop
            // that has ended.
            Self.onLoop(acceptingLoop) { listener.value.close() }
        }
        group.syncShutdownGracefully()  // every loop thread has ended when this returns, and no helper thread lives on
        // Only now: a second Ctrl-C or SIGTERM during the shutdown above is caught (and ignored), not the default
        // action that would end the process before its connections are flushed.
        signals.invalidate()
        if let setUpError {
            throw setUpError
        }
        Self.log("stopped")
        return DemoMain.success
    }

    /// Closes the listener, then drains every loop's connections, then stops the main loop (whose thread then shuts
    /// the group down).
    private static func shutDown(
        group: LoopGroup,
        listener: LoopBound<EchoListener>,
        connections: [LoopBound<EchoConnections>]
    ) {
        let loopsLeft = Atomic(connections.count)
        listener.loop.perform {
            listener.value.close()
            // Queued after every hand-off of an accepted connection (blocks from one thread run in order), so each
            // loop drains the connections it was given, none of them later.
            for registry in connections {
                registry.loop.perform {
                    registry.value.drain(within: Self.shutdownGrace) {
                        guard loopsLeft.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
                        Loop.main.stop()  // the main thread then shuts the group down and joins it
                    }
                }
            }
        }
    }

    /// Runs `body` on `loop`'s thread and returns its result; the calling thread waits.
    private static func onLoop<Value: Sendable>(_ loop: Loop, _ body: @escaping @Sendable () -> Value) -> Value {
        let result = Mutex<Value?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.perform {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// Lowers the process's soft descriptor limit so that `spare` more descriptors can be opened (the lowest free
    /// numbers; the limit bounds numbers, and descriptors inherited from the parent may hold some), to see the
    /// server survive running out of them. A limit that leaves no more than `spare` already stays as it is.
    private static func limitDescriptors(spare: Int) throws(DemoError) {
        var current = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &current)
        var limit: CInt = 0
        var free = 0
        while free < spare && rlim_t(limit) < current.rlim_cur {  // only the numbers the limit lets the process open
            if fcntl(limit, F_GETFD) == -1 && errno == EBADF {
                free += 1
            }
            limit += 1
        }
        guard rlim_t(limit) < current.rlim_cur else {  // lowers only
            Self.log("the descriptor limit (\(current.rlim_cur)) leaves at most \(spare) spare already; it stays")
            return
        }
        current.rlim_cur = rlim_t(limit)
        guard setrlimit(RLIMIT_NOFILE_VALUE, &current) == 0 else {
            throw DemoError("cannot limit descriptors to \(limit): \(EchoSocket.describe(errno))")
        }
    }

    #if canImport(Glibc)
    private static let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
    #endif
}
