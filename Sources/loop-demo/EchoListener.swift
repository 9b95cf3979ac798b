import LoopKit

/// The echo server's listening socket: accepts connections on its loop and hands each to `serve`.
///
/// When the process runs out of descriptors (`EMFILE`) or the system of memory, a connection waits in the backlog:
/// retrying at once would spin the loop (the socket stays readable), so the listener stops watching it for
/// `retryDelay`, logging once until an accept succeeds again. Loop thread only.
final class EchoListener {
    /// How long accepting pauses after the process or the system ran out of something.
    static let retryDelay = Duration.milliseconds(100)
    /// Connections accepted per callout at most, so that a flood of them does not hold off the loop's other work.
    private static let acceptsPerCallout = 64

    private let descriptor: CInt
    private let loop: Loop
    private let serve: (CInt) -> Void
    private var source: LoopDescriptorSource?
    private var isPausedForResources = false

    /// Starts accepting on `descriptor`, a listening socket, on `loop` (the calling thread's loop).
    init(descriptor: CInt, loop: Loop, serve: @escaping (CInt) -> Void) {
        self.descriptor = descriptor
        self.loop = loop
        self.serve = serve
        let source = LoopDescriptorSource(descriptor: descriptor, events: .readable, on: loop.assumeIsolated()) {
            _, _ in self.acceptWaiting()  // held until `close()` invalidates the source
        }
        self.source = source
        loop.add(source, forMode: .common)
    }

    /// Stops accepting and closes the socket; connections still in the backlog are refused.
    func close() {
        guard let source = self.source else { return }
        source.invalidate()  // before the close: the number may be reused at once
        self.source = nil
        EchoSocket.close(self.descriptor)
    }

    private func acceptWaiting() {
        for _ in 0..<Self.acceptsPerCallout {
            guard self.source != nil else { return }  // `serve` may have closed the listener
            switch EchoSocket.accept(from: self.descriptor) {
            case .success(let connection):
                if self.isPausedForResources {
                    self.isPausedForResources = false
                    EchoServer.log("accepting again")
                }
                self.serve(connection)
            case .failure(let error) where error.isWouldBlock:
                return
            case .failure(let error) where error.isResourceExhaustion:
                self.pause(for: error)
                return
            case .failure(let error):
                // The peer gave up before the accept (ECONNABORTED) and the like: that connection only.
                EchoServer.log("accept failed: \(EchoSocket.describe(error.code)); going on")
            }
        }
    }

    private func pause(for error: EchoSocket.AcceptError) {
        if !self.isPausedForResources {
            self.isPausedForResources = true
            EchoServer.log("accept failed: \(EchoSocket.describe(error.code)); retrying every "
                           + "\(Self.retryDelay) until a descriptor is free")
        }
        self.source?.events = []
        self.loop.assumeIsolated().schedule(after: Self.retryDelay) {
            self.source?.events = .readable
        }
    }
}
