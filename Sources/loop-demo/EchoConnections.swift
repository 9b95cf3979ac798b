import LoopKit

/// The connections of one loop of the echo server: it opens them, forgets them when they close, and drains them
/// at shutdown. Loop thread only: created, used and dropped on its loop's thread.
final class EchoConnections {
    let loop: Loop
    private var open: [CInt: EchoConnection] = [:]
    /// One read buffer for every connection of the loop: they are served one at a time.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// Set by `drain`: called once the last connection has closed.
    private var onDrained: (@Sendable () -> Void)?
    private var drainDeadline: LoopScheduledTask?

    init(loop: Loop) {
        self.loop = loop
    }

    deinit {
        self.scratch.deallocate()
    }

    /// How many connections are open.
    var count: Int { self.open.count }

    /// Serves `descriptor`, a connection just accepted; closes it at once if the loop is draining.
    func serve(_ descriptor: CInt) {
        guard self.onDrained == nil else {
            EchoSocket.close(descriptor)
            return
        }
        self.open[descriptor] = EchoConnection(descriptor: descriptor, loop: self.loop, connections: self)
    }

    /// Stops reading every connection, lets each send what it has queued and close; closes the rest after `grace`.
    /// Calls `done` (once) when none is left.
    func drain(within grace: Duration, then done: @escaping @Sendable () -> Void) {
        self.onDrained = done
        for connection in Array(self.open.values) {
            connection.finish()  // may close it, and so call didClose
        }
        guard !self.open.isEmpty else {
            self.reportDrained()
            return
        }
        self.drainDeadline = self.loop.assumeIsolated().schedule(after: grace) {
            EchoServer.log("\(self.open.count) connection(s) did not take their output in time; closing them")
            for connection in Array(self.open.values) {
                connection.close()
            }
        }
    }

    /// Called by a connection as it closes.
    func didClose(_ connection: EchoConnection) {
        self.open[connection.descriptor] = nil
        if self.open.isEmpty, self.onDrained != nil {
            self.reportDrained()
        }
    }

    /// Runs `body` with the loop's read buffer.
    func withScratch<Result>(_ body: (UnsafeMutableRawBufferPointer) -> Result) -> Result {
        body(self.scratch)
    }

    private func reportDrained() {
        self.drainDeadline?.cancel()
        self.drainDeadline = nil
        let done = self.onDrained
        self.onDrained = {}  // still draining (late connections close at once), but reported only once
        done?()
    }
}
