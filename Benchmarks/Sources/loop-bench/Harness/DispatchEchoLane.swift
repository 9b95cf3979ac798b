import Dispatch

/// One serial queue of the Dispatch echo server and the connections it serves.
// @unchecked Sendable: `connections` is touched only on `queue`.
final class DispatchEchoLane: @unchecked Sendable {
    let queue: DispatchQueue
    private var connections: [ObjectIdentifier: DispatchEchoConnection] = [:]

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    /// Serves `descriptor` on this lane until either side closes it; `onClosed` runs once it is closed. On `queue`.
    func adopt(_ descriptor: CInt, onClosed: @escaping () -> Void) {
        let connection = DispatchEchoConnection(descriptor: descriptor, queue: self.queue) { [unowned self] closed in
            self.connections[ObjectIdentifier(closed)] = nil
            onClosed()
        }
        self.connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    /// Closes every connection of the lane. On `queue`.
    func closeAll() {
        for connection in self.connections.values {
            connection.close()  // the descriptor closes, and the entry goes, once both sources are cancelled
        }
    }
}
