import Dispatch

/// One connection of the Dispatch echo server: a read source and a write source on its lane's serial queue.
///
/// What is read is written back at once. What the socket does not take waits in `pending`, the write source runs
/// until it is gone, and reading pauses while more than `pendingLimit` bytes wait, so that a client that does not
/// read cannot make the server buffer without bound. The descriptor is closed once both sources are cancelled, as
/// Dispatch requires.
// @unchecked Sendable: every `var` is touched only on `queue`: the sources' handlers run there, and the lane calls
// `start()` and `close()` there.
final class DispatchEchoConnection: @unchecked Sendable {
    /// The most output that may wait before reading pauses.
    static let pendingLimit = 256 * 1024
    /// The most one read takes.
    static let readSize = 64 * 1024

    /// Where a source stands: Dispatch sources start inactive, and one suspended or inactive must not be released.
    private enum SourceState {
        case inactive
        case running
        case suspended
    }

    // MARK: Immutable
    private let descriptor: CInt
    private let readSource: DispatchSourceRead
    private let writeSource: DispatchSourceWrite
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readSize, alignment: 16)
    private let onClosed: (DispatchEchoConnection) -> Void

    // MARK: On `queue` only
    private var pending: [UInt8] = []
    /// Bytes of `pending` already written.
    private var written = 0
    private var readState = SourceState.inactive
    private var writeState = SourceState.inactive
    private var isClosed = false
    private var liveSources = 2

    private var pendingCount: Int { self.pending.count - self.written }

    /// - Parameters:
    ///   - descriptor: A connected, non-blocking socket; the connection owns it from now on.
    ///   - onClosed: Called on `queue` once the descriptor is closed.
    init(descriptor: CInt, queue: DispatchQueue, onClosed: @escaping (DispatchEchoConnection) -> Void) {
        self.descriptor = descriptor
        self.onClosed = onClosed
        self.readSource = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        self.writeSource = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
        // The handlers hold the connection until Dispatch releases them after cancellation.
        self.readSource.setEventHandler { self.readable() }
        self.writeSource.setEventHandler { self.writable() }
        self.readSource.setCancelHandler { self.sourceCancelled() }
        self.writeSource.setCancelHandler { self.sourceCancelled() }
    }

    /// Starts reading.
    func start() {
        self.readSource.activate()
        self.readState = .running
    }

    /// Cancels both sources; the descriptor is closed once both cancellation handlers have run.
    func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        for (source, state) in [(self.readSource as DispatchSourceProtocol, self.readState),
                                (self.writeSource, self.writeState)] {
            source.cancel()
            // A cancelled source runs its cancellation handler only once it is active and resumed.
            switch state {
            case .inactive: source.activate()
            case .suspended: source.resume()
            case .running: break
            }
        }
    }

    // MARK: Handlers

    private func readable() {
        guard !self.isClosed else { return }
        // One read per event: Dispatch's sources are level-triggered, so whatever is left fires the handler again.
        switch LoopbackSocket.receive(self.descriptor, into: self.buffer) {
        case .transferred(let count): self.echo(UnsafeRawBufferPointer(rebasing: self.buffer[..<count]))
        case .wouldBlock: break
        case .closed, .failed: self.close()
        }
    }

    private func echo(_ bytes: UnsafeRawBufferPointer) {
        var taken = 0
        if self.pendingCount == 0 {
            switch LoopbackSocket.send(self.descriptor, bytes) {
            case .transferred(let count): taken = count
            case .wouldBlock: break
            case .closed, .failed:
                self.close()
                return
            }
        }
        guard taken < bytes.count else { return }
        self.pending.append(contentsOf: bytes[taken...])
        self.setWriting(true)
        if self.pendingCount > Self.pendingLimit {
            self.setReading(false)
        }
    }

    private func writable() {
        guard !self.isClosed else { return }
        writing: while self.pendingCount > 0 {
            let result = self.pending.withUnsafeBytes {
                LoopbackSocket.send(self.descriptor, UnsafeRawBufferPointer(rebasing: $0[self.written...]))
            }
            switch result {
            case .transferred(let count): self.written += count
            case .wouldBlock: break writing
            case .closed, .failed:
                self.close()
                return
            }
        }
        if self.pendingCount == 0 {
            self.pending.removeAll(keepingCapacity: true)
            self.written = 0
            self.setWriting(false)
        } else if self.written > Self.pendingLimit {
            self.pending.removeFirst(self.written)  // keep the buffer from growing while it never quite drains
            self.written = 0
        }
        if self.pendingCount <= Self.pendingLimit {
            self.setReading(true)
        }
    }

    private func sourceCancelled() {
        self.liveSources -= 1
        guard self.liveSources == 0 else { return }
        LoopbackSocket.close(self.descriptor)
        self.buffer.deallocate()
        self.onClosed(self)
    }

    // MARK: Pausing the sources

    private func setReading(_ reading: Bool) {
        switch (self.readState, reading) {
        case (.running, false):
            self.readSource.suspend()
            self.readState = .suspended
        case (.suspended, true):
            self.readSource.resume()
            self.readState = .running
        default: break
        }
    }

    private func setWriting(_ writing: Bool) {
        switch (self.writeState, writing) {
        case (.inactive, true):
            self.writeSource.activate()
            self.writeState = .running
        case (.running, false):
            self.writeSource.suspend()
            self.writeState = .suspended
        case (.suspended, true):
            self.writeSource.resume()
            self.writeState = .running
        default: break
        }
    }
}
