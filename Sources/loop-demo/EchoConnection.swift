import LoopKit

/// One client of the echo server: what it sends comes back, byte for byte, through a descriptor source on its loop.
///
/// The source watches `.readable` while the connection takes input and its queued output is under
/// `outputLimit` (back-pressure: a client that does not read stops being read), and `.writable` while output is
/// queued. Input the peer ends is answered in full, then the connection closes. At the server's shutdown a connection
/// stops reading, sends what it queued, ends its output and reads (and drops) what the peer still sends until the peer
/// ends too: closing with input unread would make the kernel answer with a reset, which can throw away output the
/// peer has not read yet. Loop thread only: created, driven and closed on its loop's thread.
final class EchoConnection {
    /// What the connection still does.
    private enum Phase {
        /// Reading and echoing.
        case open
        /// No more reading (the peer ended its input, or the server is shutting down): flush, then close.
        case flushing
        /// Output flushed and ended at shutdown, with the peer still sending: drop its input until it ends, then close.
        case lingering
        case closed
    }

    /// Queued output past which the connection stops reading.
    static let outputLimit = 256 * 1024

    let descriptor: CInt
    private let connections: EchoConnections
    private var phase = Phase.open
    private var source: LoopDescriptorSource?
    /// Bytes read but not yet sent: `output[sent...]`.
    private var output: [UInt8] = []
    private var sent = 0
    /// The peer ended its input (all of it was read): closing then sends no reset.
    private var hasInputEnded = false

    /// Starts serving `descriptor` on `loop`, the calling thread's loop, in its common modes.
    init(descriptor: CInt, loop: Loop, connections: EchoConnections) {
        self.descriptor = descriptor
        self.connections = connections
        // The handler holds the connection, and the connection its source, until `close()` lets both go.
        let source = LoopDescriptorSource(descriptor: descriptor, events: .readable, on: loop.assumeIsolated()) {
            _, events in self.handle(events)
        }
        self.source = source
        loop.add(source, forMode: .common)
    }

    /// Stops reading; closes once the queued output is sent (at once when none is).
    func finish() {
        guard self.phase == .open else { return }
        self.phase = .flushing
        self.updateInterest()
    }

    /// Closes at once, dropping queued output.
    func close() {
        guard self.phase != .closed else { return }
        self.phase = .closed
        // Invalidate before closing: the loop must not watch a number that a new connection may reuse.
        self.source?.invalidate()
        self.source = nil  // the source's handler holds this connection: let both go
        EchoSocket.close(self.descriptor)
        self.connections.didClose(self)
    }

    private func handle(_ events: DescriptorEvents) {
        if events.contains(.readable), self.phase == .open {
            self.readAndEcho()
        }
        if events.contains(.readable), self.phase == .lingering {
            self.readAndDrop()
            return
        }
        if self.phase != .closed, self.sent < self.output.count {
            self.flush()  // what was just read, or what waited for `.writable`
        }
        if self.phase != .closed, !events.isDisjoint(with: [.error, .invalid])
            || (events.contains(.hangUp) && !events.contains(.readable)) {
            self.close()  // nothing more can be read or written: a hang-up with input left is read first
            return
        }
        self.updateInterest()
    }

    /// One read (the source is level-triggered: more input brings another call), echoed at once as far as the
    /// socket takes it.
    private func readAndEcho() {
        let result = self.connections.withScratch { buffer in
            let result = EchoSocket.read(self.descriptor, into: buffer)
            if case .moved(let count) = result {
                self.output.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
            return result
        }
        switch result {
        case .moved, .wouldBlock:
            break
        case .endOfInput:
            self.phase = .flushing
            self.hasInputEnded = true
        case .failed(let code):
            EchoServer.log("connection \(self.descriptor): read failed: \(EchoSocket.describe(code))")
            self.close()
        }
    }

    /// Reads and drops what the peer still sends after the output ended; closes at its end (or an error, or a
    /// hang-up). The drain's deadline closes a peer that never ends. At most `Self.dropReadsPerCallout` reads a
    /// callout: a peer that sends as fast as this reads must not keep the loop (and that deadline) waiting; the
    /// source is level-triggered, so the rest comes at the next pass.
    private func readAndDrop() {
        for _ in 0..<Self.dropReadsPerCallout {
            let result = self.connections.withScratch { EchoSocket.read(self.descriptor, into: $0) }
            switch result {
            case .moved:
                continue
            case .wouldBlock:
                return
            case .endOfInput, .failed:
                self.close()
                return
            }
        }
    }

    static let dropReadsPerCallout = 16

    /// Sends queued output until the socket takes no more.
    private func flush() {
        while self.sent < self.output.count {
            let result = self.output.withUnsafeBytes {
                EchoSocket.send(self.descriptor, UnsafeRawBufferPointer(rebasing: $0[self.sent...]))
            }
            switch result {
            case .moved(let count):
                self.sent += count
            case .wouldBlock, .endOfInput:
                if self.sent >= Self.outputLimit {
                    // Drop the sent part, so that a client reading slowly cannot grow the buffer without bound.
                    self.output.removeFirst(self.sent)
                    self.sent = 0
                }
                return
            case .failed(let code):
                EchoServer.log("connection \(self.descriptor): send failed: \(EchoSocket.describe(code))")
                self.close()
                return
            }
        }
        self.output.removeAll(keepingCapacity: self.output.capacity <= 4 * Self.outputLimit)
        self.sent = 0
    }

    /// Watches what the connection can act on next, or closes a flushed connection that reads no more.
    private func updateInterest() {
        guard self.phase != .closed, let source = self.source else { return }
        if self.phase == .lingering {
            source.events = .readable  // only the peer's end (or the drain's deadline) closes it now
            return
        }
        let hasOutput = self.sent < self.output.count
        if self.phase == .flushing && !hasOutput {
            if self.hasInputEnded {
                self.close()
            } else {
                self.phase = .lingering
                EchoSocket.endOutput(self.descriptor)
                source.events = .readable
            }
            return
        }
        var events: DescriptorEvents = []
        if self.phase == .open && self.output.count - self.sent < Self.outputLimit {
            events.insert(.readable)
        }
        if hasOutput {
            events.insert(.writable)
        }
        source.events = events
    }
}
