import CLoopBench
import Dispatch
import Foundation

/// The echo scenario's Dispatch peer: a TCP echo server written with Dispatch read and write sources, as a Dispatch
/// user would write one, run in a child process by `loop-bench --echo-server-dispatch --queues K`.
///
/// K serial queues (lanes) serve the connections, which are dealt to them round-robin; a read source on lane 0
/// accepts. So the server has K threads' worth of handlers, as `loop-demo echo --loops K` has K loops. Each connection
/// is a `DispatchEchoConnection`. The server prints `listening on 127.0.0.1:PORT` once it accepts, as `loop-demo echo`
/// does, and on SIGTERM stops accepting, closes every connection and exits 0.
// @unchecked Sendable: `nextLane` is touched only on lane 0's queue, where the accept handler runs; the rest is `let`.
final class DispatchEchoServer: @unchecked Sendable {
    let port: Int
    private let listener: CInt
    private let lanes: [DispatchEchoLane]
    private let acceptSource: DispatchSourceRead
    /// Entered once per open descriptor, the listener's included; left when it is closed.
    private let openDescriptors = DispatchGroup()
    private var nextLane = 0

    /// The arguments that make loop-bench serve as this server (parsed by `Options`).
    static func arguments(queues: Int) -> [String] {
        ["--echo-server-dispatch", "--queues", String(queues)]
    }

    /// Listens on an ephemeral port of 127.0.0.1 and starts accepting, or returns `nil` when it cannot listen.
    init?(queues: Int) {
        guard let (listener, port) = LoopbackSocket.listen() else { return nil }
        self.listener = listener
        self.port = port
        self.lanes = (0..<queues).map { DispatchEchoLane(queue: DispatchQueue(label: "bench.echo.lane\($0)")) }
        self.acceptSource = DispatchSource.makeReadSource(fileDescriptor: listener, queue: self.lanes[0].queue)
        let openDescriptors = self.openDescriptors
        openDescriptors.enter()
        self.acceptSource.setEventHandler { [unowned self] in self.acceptWaiting() }
        self.acceptSource.setCancelHandler {
            LoopbackSocket.close(listener)
            openDescriptors.leave()
        }
        self.acceptSource.activate()
    }

    /// Serves until SIGTERM, then shuts down and exits: 0 after a clean shutdown, 1 when it cannot listen or the
    /// connections do not close.
    static func serve(queues: Int) -> Never {
        // First, before Dispatch starts a thread: every thread must have SIGTERM blocked for sigwait to receive it.
        _ = cbench_block_sigterm()
        guard let server = DispatchEchoServer(queues: queues) else {
            FileHandle.standardError.write(Data("loop-bench echo server: cannot listen on 127.0.0.1\n".utf8))
            exit(1)
        }
        FileHandle.standardOutput.write(Data("listening on 127.0.0.1:\(server.port)\n".utf8))  // write(2): unbuffered
        _ = cbench_wait_sigterm()
        exit(server.shutdown() ? 0 : 1)
    }

    /// Accepts every waiting connection and deals each to the next lane. Runs on lane 0.
    private func acceptWaiting() {
        while case .connection(let descriptor) = LoopbackSocket.accept(self.listener) {
            // `.noneWaiting` ends the round; so does `.failed` (a connection reset before it was accepted): the
            // source fires again while others wait.
            let lane = self.lanes[self.nextLane % self.lanes.count]
            self.nextLane += 1
            let openDescriptors = self.openDescriptors
            openDescriptors.enter()
            lane.queue.async {
                lane.adopt(descriptor) { openDescriptors.leave() }
            }
        }
    }

    /// Stops accepting, closes every connection, and waits up to 5 s until every descriptor is closed.
    ///
    /// - Returns: Whether every descriptor closed in time.
    private func shutdown() -> Bool {
        // Cancelled on lane 0, so that no accept is under way: every adoption it queued is ahead of `closeAll` below.
        self.lanes[0].queue.sync { self.acceptSource.cancel() }
        for lane in self.lanes {
            lane.queue.sync { lane.closeAll() }
        }
        return self.openDescriptors.wait(timeout: .now() + .seconds(5)) == .success
    }
}
