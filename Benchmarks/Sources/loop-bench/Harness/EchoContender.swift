import Foundation

/// One server of the echo scenario: its child process, the client connected to it, and what was measured.
///
/// A contender that cannot start, or fails during the run, keeps the reason in `problem` and is stopped at once; its
/// rows then say "not run" (or "failed", when the server itself misbehaved) with that reason, and nothing it measured
/// is reported. Used from one thread.
final class EchoContender {
    /// How long a server may take to print its `listening on 127.0.0.1:PORT` line.
    static let startTimeoutMilliseconds = 10_000

    let name: String
    /// The command line, for the notes.
    let command: String
    private(set) var problem: String?
    /// Whether `problem` is the server's own failure (it stopped, printed something else, or broke a connection), not
    /// the machine's (the program missing, the descriptor limit).
    private(set) var serverFailed = false
    private var server: ChildProcess?
    private var client: EchoClient?
    /// The child process that holds the idle connections, if any.
    private var idleHolder: ChildProcess?

    // MARK: Measured
    private(set) var roundTripTimes: [UInt64] = []
    private(set) var roundTrips = 0
    private(set) var measuredNanoseconds: UInt64 = 0
    private(set) var serverCPUNanoseconds: UInt64 = 0
    private(set) var serverThreads: Int?
    /// One rate per counted bulk transfer, in MB/s.
    private(set) var bulkRates: [Double] = []
    /// How the server ended, once stopped.
    private(set) var ending: ChildProcess.Ending?

    var isRunning: Bool { self.problem == nil }

    /// The row of a contender that did not run (or failed): "not run", and why.
    var notRunResult: ImplementationResult {
        ImplementationResult(implementation: self.name, distribution: nil, notRunReason: self.problem,
                             failed: self.serverFailed)
    }

    var messagesPerSecond: Double { Double(self.roundTrips) / (Double(self.measuredNanoseconds) / 1e9) }

    /// Starts `path` with `arguments`, waits for its `listening on 127.0.0.1:PORT` line, and connects a client with
    /// `connections` busy connections, and `idleConnections` idle ones held by a child process
    /// (`IdleConnectionHolder`).
    init(name: String, path: String, arguments: [String], connections: Int = EchoClient.connectionCount,
         idleConnections: Int = 0) {
        self.name = name
        self.command = ([(path as NSString).lastPathComponent] + arguments).joined(separator: " ")
        guard let server = ChildProcess(path: path, arguments: arguments) else {
            self.problem = "cannot start \(path)"
            return
        }
        self.server = server
        let prefix = "listening on 127.0.0.1:"
        switch server.readLine(timeoutMilliseconds: Self.startTimeoutMilliseconds) {
        case .line(let line) where line.hasPrefix(prefix):
            guard let port = Int(line.dropFirst(prefix.count)) else {
                self.fail("`\(self.command)` printed `\(line)`, not a port")
                return
            }
            if idleConnections > 0 {
                switch IdleConnectionHolder.start(count: idleConnections, port: port) {
                case .success(let holder):
                    self.idleHolder = holder
                case .failure(let failure):
                    self.fail("`\(self.command)`: \(failure.reason)", byServer: failure.byServer)
                    return
                }
            }
            do {
                self.client = try EchoClient(port: port, connections: connections)
            } catch {
                // The client's own limits are the machine's; a connection refused or dropped is the server's.
                self.fail("`\(self.command)`: \(error)", byServer: error.isServers)
            }
        case .line(let line):
            self.fail("`\(self.command)` printed `\(line)` instead of `\(prefix)PORT`")
        case .ended:
            self.fail("`\(self.command)` stopped before it listened (it \(server.stop()))")
        case .timedOut:
            self.fail("`\(self.command)` did not print `\(prefix)PORT` within "
                      + "\(Self.startTimeoutMilliseconds / 1_000) s")
        }
    }

    /// A contender that is not run, for `reason`.
    init(name: String, command: String, notRun reason: String) {
        self.name = name
        self.command = command
        self.problem = reason
    }

    /// Runs the closed loop for `duration` nanoseconds; `counted` keeps the figures, otherwise it is a warm-up.
    func exchangeMessages(for duration: UInt64, counted: Bool) {
        guard self.isRunning, let client = self.client, let server = self.server else { return }
        var discarded: [UInt64] = []
        // Room for 500,000 round trips a second, reserved before the turn rather than grown during it.
        self.roundTripTimes.reserveCapacity(self.roundTripTimes.count + Int(duration / 2_000))
        let cpuBefore = server.cpuNanoseconds
        do {
            if counted {
                self.roundTrips += try client.exchangeMessages(for: duration, recordingInto: &self.roundTripTimes)
                self.measuredNanoseconds += duration
                if let cpuBefore, let cpuAfter = server.cpuNanoseconds {
                    self.serverCPUNanoseconds += cpuAfter &- cpuBefore
                }
            } else {
                _ = try client.exchangeMessages(for: duration, recordingInto: &discarded)
            }
        } catch {
            self.fail("failed during a message turn: \(error)")
        }
    }

    /// Echoes `payload` once on the bulk connection; `counted` keeps the rate, otherwise it is a warm-up.
    func transferBulk(_ payload: UnsafeRawBufferPointer, counted: Bool) {
        guard self.isRunning, let client = self.client else { return }
        do {
            let elapsed = try client.transferBulk(payload)
            if counted {
                self.bulkRates.append(Double(payload.count) / (Double(elapsed) / 1e9) / 1e6)
            }
        } catch {
            self.fail("failed during a bulk transfer: \(error)")
        }
    }

    /// Counts the server process's threads, all of them, idle ones included.
    func countServerThreads() {
        self.serverThreads = self.server?.threadCount
    }

    /// Closes the client's connections and the idle ones, then stops the server (SIGTERM) and reaps it. Calling it
    /// again does nothing.
    func stop() {
        self.client = nil
        if let holder = self.idleHolder {
            self.idleHolder = nil
            _ = holder.stop()
        }
        if let server = self.server {
            self.ending = server.stop()
        }
    }

    /// Records why the contender stops here, and stops it. `byServer`: the server misbehaved, rather than the machine
    /// could not hold the run.
    private func fail(_ reason: String, byServer: Bool = true) {
        if self.problem == nil {
            self.problem = reason
            self.serverFailed = byServer
        }
        self.stop()
    }
}
