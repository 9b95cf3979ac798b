import Foundation

/// `scale/echo`'s idle connections, held by a child process of their own (`loop-bench --hold-idle-connections N
/// --port P`), so that the benchmark's own descriptors are only the busy connections: with every server holding its
/// idle connections at once (22,200 in all, for two servers at four n), the client could not hold them under its
/// descriptor limit, and the servers would have to be measured one after the other instead of taking turns.
///
/// The child opens `N` connections to 127.0.0.1:`P`, waits until the server has taken them all, prints
/// `holding N`, and holds them until it is stopped (SIGTERM, which ends it and closes them). If it cannot, it prints
/// why, after `server failed: ` when the server is at fault (a server that cannot hold its idle connections misses its
/// targets; a machine that cannot open them runs none).
enum IdleConnectionHolder {
    /// How long the child may take to connect and print `holding N`: 10,000 connects under a loaded machine.
    static let startTimeoutMilliseconds = 60_000

    /// The arguments that make loop-bench hold `count` idle connections to `port` (parsed by `Options`).
    static func arguments(count: Int, port: Int) -> [String] {
        ["--hold-idle-connections", String(count), "--port", String(port)]
    }

    /// The child's work: connects, reports, and holds the connections until the parent stops it. Never returns.
    static func hold(count: Int, port: Int) -> Never {
        _ = System.raiseDescriptorLimit(to: count + 256)
        let client: EchoClient
        do {
            client = try EchoClient(port: port, connections: 0, idleConnections: count)
        } catch {
            let blame = error.isServers ? Self.serverFailedPrefix : ""
            print(blame + "cannot hold \(count) connections to port \(port): \(error)")
            exit(1)
        }
        print("holding \(count)")
        fflush(nil)  // every stream: the parent waits for the line
        while true {
            withExtendedLifetime(client) { _ = pause() }  // until SIGTERM
        }
    }

    /// What the child's failure line starts with when the server is at fault.
    static let serverFailedPrefix = "server failed: "

    /// Starts the child for `count` connections to `port` and waits for its `holding` line.
    ///
    /// - Returns: The child, or why it could not hold them.
    static func start(count: Int, port: Int) -> Result<ChildProcess, HolderFailure> {
        guard let child = ChildProcess(path: System.executablePath, arguments: Self.arguments(count: count, port: port))
        else {
            return .failure(HolderFailure(reason: "cannot start loop-bench to hold the idle connections"))
        }
        switch child.readLine(timeoutMilliseconds: Self.startTimeoutMilliseconds) {
        case .line(let line) where line == "holding \(count)":
            return .success(child)
        case .line(let line) where line.hasPrefix(Self.serverFailedPrefix):
            _ = child.stop()
            let reason = line.dropFirst(Self.serverFailedPrefix.count)
            return .failure(HolderFailure(reason: "the idle-connection holder: \(reason)", byServer: true))
        case .line(let line):
            _ = child.stop()
            return .failure(HolderFailure(reason: "the idle-connection holder printed `\(line)`"))
        case .ended:
            return .failure(HolderFailure(reason: "the idle-connection holder stopped (it \(child.stop()))"))
        case .timedOut:
            // Ten thousand loopback connects take about a second: a server that has not taken them in a minute has
            // stopped accepting (the kernel drops SYNs once its accept queue is full, and connect(2) retries them).
            _ = child.stop()
            return .failure(HolderFailure(reason: "the server did not take the idle-connection holder's "
                                              + "\(count) connections within \(Self.startTimeoutMilliseconds / 1_000) s",
                                          byServer: true))
        }
    }

    struct HolderFailure: Error {
        let reason: String
        /// Whether the server is at fault (see `serverFailedPrefix`).
        var byServer = false
    }
}
