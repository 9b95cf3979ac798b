import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import LoopKit

/// A newcomer's and a hostile client's round on `loop-demo` (every command and option with odd values, the echo
/// server against clients that misbehave) and on `LoopHostDriver` driven as GLib drives a source.
@Suite("Hostile demo users", .serialized, .timeLimit(.minutes(3)))
struct HostileDemoTests {
    // MARK: Running loop-demo to its end

    /// What a finished `loop-demo` run left: its status (or the signal that ended it), its outputs.
    struct Finished {
        var status: Int32
        var wasSignalled: Bool
        var output: String
        var errors: String
        var crashed: Bool { self.wasSignalled || self.errors.contains("Fatal error") || self.errors.contains("Backtrace") }
    }

    /// Runs `loop-demo arguments` with standard input at its end (or `input`), killed after `limit` (a hang guard).
    static func run(_ arguments: [String], input: String? = nil, limit: Double = 30) throws -> (Finished, timedOut: Bool) {
        let process = Process()
        process.executableURL = try DemoProcess.executable()
        process.arguments = arguments
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("hostile-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("out"), errURL = directory.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let pid = process.processIdentifier
        let end = Date().addingTimeInterval(limit)
        var timedOut = false
        while process.isRunning {
            if Date() > end {
                timedOut = true
                kill(pid, SIGKILL)
                break
            }
            usleep(10_000)
        }
        process.waitUntilExit()
        let finished = Finished(
            status: process.terminationStatus,
            wasSignalled: process.terminationReason == .uncaughtSignal,
            output: readTextFile(outURL.path) ?? "",
            errors: readTextFile(errURL.path) ?? "")
        return (finished, timedOut)
    }

    /// Spawns `loop-demo arguments` with descriptor `closed` closed in the child (the others go to /dev/null).
    static func spawnWithClosed(_ closed: CInt, _ arguments: [String]) throws -> pid_t {
        let path = try DemoProcess.executable().path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor in CInt(0)...2 where descriptor != closed {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        posix_spawn_file_actions_addclose(&actions, closed)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
        try #require(result == 0)
        return pid
    }

    /// Waits up to `limit` seconds for `pid`; `nil` if it is still running (then it is killed and reaped).
    static func waitStatus(_ pid: pid_t, limit: Double = 20) -> Int32? {
        let end = Date().addingTimeInterval(limit)
        var status: Int32 = 0
        while Date() < end {
            if waitpid(pid, &status, WNOHANG) == pid { return status }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        return nil
    }

    // MARK: The command line

    @Test(arguments: [
        ["echo", "--port", "65536"], ["echo", "--port", "-1"], ["echo", "--port="], ["echo", "--port", "http"],
        ["echo", "--port"], ["echo", "--port", "99999999999999999999999"], ["echo", "--loops", "0"],
        ["echo", "--loops", "1000"], ["echo", "--loops", "-3"], ["echo", "--loops", "2.5"], ["echo", "--loops"],
        ["echo", "--spare-descriptors", "0"], ["echo", "--spare-descriptors", "99999999999999999999"],
        ["echo", "--trace", "t.json"], ["echo", "--no-color"], ["echo", "--port", "1", "extra"],
        ["echo", "--fps", "60"], ["hitches", "--duration", "0.5"], ["hitches", "--duration", "nan"],
        ["--duration", "inf"], ["--duration", "-5"], ["--duration", "1e309"], ["--fps="], ["--fps", "-60"],
        ["ECHO"], ["", "echo"], ["help", "echo", "extra"], ["phases", "--duration", "2"], ["phases", "--no-color=yes"],
        ["--interactive=1"], ["-"], ["-x"], ["main-queue", "--trace", "t.json"], ["main-queue", "--no-color"],
    ])
    func aBadCommandLineExitsWithStatus2AndAMessage(arguments: [String]) throws {
        let (finished, timedOut) = try Self.run(arguments)
        #expect(!timedOut)
        #expect(!finished.crashed, "\(finished.errors)")
        #expect(finished.status == 2, "\(arguments): \(finished.errors)")
        #expect(finished.errors.hasPrefix("loop-demo: "), "\(finished.errors)")
        #expect(finished.errors.contains("usage:"))
        #expect(finished.output.isEmpty)
    }

    @Test func helpOfEveryCommandListedInTheOverviewExitsZero() throws {
        let (overview, _) = try Self.run(["--help"])
        #expect(overview.status == 0)
        for command in ["tracking", "phases", "hitches", "echo"] {
            #expect(overview.output.contains("  \(command) "))
            let (help, _) = try Self.run(["help", command])
            #expect(help.status == 0, "help \(command)")
            let (flag, _) = try Self.run([command, "--port", "bad", "--help"])  // --help wins over mistakes
            #expect(flag.status == 0 && flag.output == help.output, "\(command) --help")
        }
    }

    /// The overview lists `main-queue` as a command, but `loop-demo help main-queue` calls it unknown (status 2).
    @Test func helpForTheMainQueueCommandTheOverviewListsExitsZero() throws {
        let (overview, _) = try Self.run(["--help"])
        try #require(overview.output.contains("main-queue"))
        let (help, timedOut) = try Self.run(["help", "main-queue"])
        #expect(!timedOut)
        #expect(help.status == 0, "loop-demo help main-queue: \(help.errors)")
    }

    /// `loop-demo main-queue --bogus` ignores the unknown option, runs the probe and exits 0.
    @Test func anUnknownOptionOfMainQueueIsAUsageError() throws {
        let (finished, timedOut) = try Self.run(["main-queue", "--bogus"])
        #expect(!timedOut)
        #expect(finished.status == 2, "stdout: \(finished.output)")
        #expect(finished.errors.contains("--bogus"))
    }

    @Test func aPortInUseExitsWithStatus1NamingTheProblem() throws {
        let holder = try DemoProcess(["echo", "--loops", "1"])
        let port = try holder.listeningPort()
        let (finished, timedOut) = try Self.run(["echo", "--port", "\(port)", "--loops", "1"])
        #expect(!timedOut)
        #expect(!finished.crashed)
        #expect(finished.status == 1)
        #expect(finished.errors.contains("EADDRINUSE"), "\(finished.errors)")
        holder.send(SIGTERM)
        #expect(holder.waitForExit().status == 0)
    }

    @Test func aRepeatedPortTakesTheLastAndPort0GetsAFreeOne() throws {
        let server = try DemoProcess(["echo", "--port", "1", "--port", "0", "--loops", "1", "--loops", "2"])
        let port = try server.listeningPort()
        #expect(port != 0 && port != 1)
        let client = try LoopbackClient(port: port)
        try client.send(Array("hi".utf8))
        client.finishSending()
        #expect(try client.receive() == Array("hi".utf8))
        server.send(SIGTERM)
        #expect(server.waitForExit().status == 0)
    }

    @Test func twoHundredFiftySixLoopsServeAndShutDown() throws {
        let server = try DemoProcess(["echo", "--loops=256"])
        let port = try server.listeningPort()
        let clients = try (0..<20).map { _ in try LoopbackClient(port: port) }
        for (index, client) in clients.enumerated() {
            try client.send(Array("client \(index)".utf8))
            client.finishSending()
        }
        for (index, client) in clients.enumerated() {
            #expect(try client.receive() == Array("client \(index)".utf8))
        }
        server.send(SIGTERM)
        let (status, errors) = server.waitForExit()
        #expect(status == 0, "\(errors)")
    }

    /// The option only lowers the limit: asking for more spare descriptors than the limit leaves keeps the limit
    /// (it once raised it, and past the hard limit failed with "errno 22").
    @Test func moreSpareDescriptorsThanTheLimitLeavesKeepsTheLimitAndServes() throws {
        let server = try DemoProcess(["echo", "--loops", "1", "--spare-descriptors", "4096"], descriptorLimit: 512)
        let port = try server.listeningPort()
        #expect(try Self.echo("served", port: port) == "served")
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
        #expect(errors.contains("it stays"), "\(errors)")
    }

    @Test(arguments: [["phases", "--trace", "/nonexistent/dir/t.json"], ["hitches", "--trace", "/"],
                      ["--trace", "/proc/version", "--json"]])
    func anUnwritableTraceFileExitsWithStatus1(arguments: [String]) throws {
        let (finished, timedOut) = try Self.run(arguments)
        #expect(!timedOut)
        #expect(!finished.crashed)
        #expect(finished.status == 1, "\(finished.errors)")
        #expect(finished.errors.contains("cannot write the trace"))
    }

    @Test func anEmptyTraceFileNameIsAUsageMistake() throws {
        let (finished, timedOut) = try Self.run(["phases", "--trace", ""])
        #expect(!timedOut)
        #expect(finished.status == 2, "\(finished.errors)")
        #expect(finished.errors.contains("--trace needs a file name"))
    }

    /// A trace file that could be written at the start but not at the end (its folder removed meanwhile) is a
    /// failure, exit status 1, not a success with a message.
    @Test func aTraceThatCannotBeWrittenAtTheEndExitsWithStatus1() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("t.json").path
        let demo = try DemoProcess(["hitches", "--duration", "60", "--no-color", "--trace", path])
        try #require(waitUntil { FileManager.default.fileExists(atPath: path) })  // written once at the start
        try FileManager.default.removeItem(at: directory)
        try #require(waitUntil { Self.catches(SIGINT, pid: demo.pid) })
        demo.send(SIGINT)  // the end, which writes the trace, comes after the removal whatever the machine's load
        let (status, errors) = demo.waitForExit()
        #expect(demo.process.terminationReason == .exit)
        #expect(status == 1, "\(errors)")
        #expect(errors.contains("cannot write the trace"))
    }

    /// `loop-demo --trace t.json | head -1`: once the reader has gone, writes fail with EPIPE instead of SIGPIPE
    /// killing the demo before it writes its trace.
    @Test func aDemoWhoseOutputReaderHasGoneStillEndsAndWritesItsTrace() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("t.json").path
        let demo = try DemoProcess(["hitches", "--duration", "1", "--no-color", "--trace", path])
        demo.closeOutputReader()
        let (status, errors) = demo.waitForExit()
        #expect(demo.process.terminationReason == .exit, "ended by signal \(status)")
        #expect(status == 0, "\(errors)")
        let trace = try #require(readTextFile(path))
        #expect(trace.contains("\"ph\":\"B\""), "the run's events, not the empty trace written at the start")
    }

    @Test func interactiveWithStandardInputAtItsEndQuits() throws {
        let (finished, timedOut) = try Self.run(["--interactive", "--no-color"])
        #expect(!timedOut)
        #expect(finished.status == 0, "\(finished.errors)")
        #expect(finished.output.contains("no drag happened"))
    }

    @Test func interactiveKeysFromAPipeDragAndQuit() throws {
        let (finished, timedOut) = try Self.run(["--interactive", "--fps", "120", "--no-color"],
                                                input: "\n\nq")
        #expect(!timedOut)
        #expect(finished.status == 0, "\(finished.errors)")
        #expect(finished.output.contains("drag"))
    }

    /// With standard input closed, descriptor 0 is the next thing the process opens (an internal pipe of the loop);
    /// the keyboard source then watches whatever got descriptor 0 and the demo never ends (until a signal).
    @Test func interactiveWithStandardInputClosedEndsInsteadOfHanging() throws {
        let pid = try Self.spawnWithClosed(0, ["--interactive"])
        let status = Self.waitStatus(pid, limit: 20)
        #expect(status != nil, "loop-demo --interactive <&- still ran after 20 s")
    }

    /// With standard error a pipe whose reader has gone (`loop-demo echo 2>&1 | head -1`), the log line of the
    /// shutdown gets EPIPE instead of killing the server with SIGPIPE before it has drained: it exits 0.
    @Test func echoLoggingToAPipeWithNoReaderStillShutsDownCleanly() throws {
        let output = try TestPipe()
        let errors = try TestPipe()
        let path = try DemoProcess.executable().path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output.writeEnd, 1)  // the pipes are close-on-exec: only these
        posix_spawn_file_actions_adddup2(&actions, errors.writeEnd, 2)
        let arguments: [String] = [path, "echo", "--loops", "1"]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        try #require(posix_spawn(&pid, path, &actions, nil, argv, environ) == 0)
        output.closeWriteEnd()
        errors.closeWriteEnd()
        errors.closeReadEnd()  // the reader is gone before the server writes a line there
        var printed = ""
        let giveUp = Date().addingTimeInterval(20)
        while !printed.contains("listening on"), Date() < giveUp {
            var watch = pollfd(fd: output.readEnd, events: Int16(POLLIN), revents: 0)
            _ = poll(&watch, 1, 100)
            printed += output.readAll()
        }
        #expect(printed.contains("listening on"), "stdout: \(printed)")
        kill(pid, SIGTERM)
        let status = try #require(Self.waitStatus(pid))
        #expect(status & 0x7f == 0, "killed by signal \(status & 0x7f)")
        #expect((status >> 8) & 0xff == 0, "exit status \((status >> 8) & 0xff)")
    }

    /// With standard output closed, the listening socket takes descriptor 1; `listening on ...` is then written to
    /// it and SIGPIPE kills the server silently.
    @Test func echoWithStandardOutputClosedDoesNotDieOfSIGPIPE() throws {
        let pid = try Self.spawnWithClosed(1, ["echo", "--loops", "1"])
        usleep(500_000)
        kill(pid, SIGTERM)
        let status = try #require(Self.waitStatus(pid))
        #expect(status & 0x7f != SIGPIPE, "killed by SIGPIPE before it could serve")
    }

    /// Whether process `pid` has a handler for `signal` (its `SigCgt` mask in /proc).
    static func catches(_ signal: Int32, pid: pid_t) -> Bool {
        guard let status = readTextFile("/proc/\(pid)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
              let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << UInt64(signal - 1)) != 0
    }

    /// The tracking demo hides the cursor on a terminal: a hang-up or a Ctrl-\ ends it through its normal end too,
    /// which shows the cursor again, with 128 + the signal's number.
    @Test(arguments: [SIGHUP, SIGQUIT])
    func aHangUpOrAQuitEndsTheTrackingDemoThroughItsNormalEnd(signal: Int32) throws {
        let demo = try DemoProcess(["--duration", "600", "--json"])
        // SIGHUP is caught last. Not SIGQUIT itself: Swift's crash handler catches it from the start.
        try #require(waitUntil { Self.catches(SIGHUP, pid: demo.pid) })
        demo.send(signal)
        let (status, errors) = demo.waitForExit()
        #expect(demo.process.terminationReason == .exit)
        #expect(status == 128 + signal, "\(errors)")
    }

    @Test(arguments: [["hitches", "--duration", "600", "--no-color"], ["--duration", "600", "--json"]])
    func sigintEndsALongDemoWithStatus130AndItsSummary(arguments: [String]) throws {
        let demo = try DemoProcess(arguments)
        // Not before its handler is installed: until then SIGINT's default action would end it (not a LoopKit fault).
        try #require(waitUntil { Self.catches(SIGINT, pid: demo.pid) })
        demo.send(SIGINT)
        let (status, errors) = demo.waitForExit()
        #expect(status == 130, "\(errors)")
        #expect(!errors.contains("Fatal error"))
    }
}

// MARK: - The echo server against hostile clients

extension HostileDemoTests {
    /// The server's resident memory, in KiB.
    static func residentKiB(_ pid: pid_t) throws -> Int {
        let status = try #require(readTextFile("/proc/\(pid)/status"))
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    static func echo(_ text: String, port: UInt16) throws -> String {
        let client = try LoopbackClient(port: port)
        try client.send(Array(text.utf8))
        client.finishSending()
        return String(decoding: try client.receive(), as: UTF8.self)
    }

    static func stop(_ server: DemoProcess) -> (status: Int32, errors: String) {
        server.send(SIGTERM)
        return server.waitForExit()
    }

    @Test func aClientThatSendsNothingAndHalfClosesGetsAnEmptyEchoAndTheEnd() throws {
        let server = try DemoProcess(["echo", "--loops", "2"])
        let port = try server.listeningPort()
        for _ in 0..<10 {
            let client = try LoopbackClient(port: port)
            client.finishSending()
            #expect(try client.receive(timeout: .seconds(20)) == [])
        }
        #expect(try Self.echo("still here", port: port) == "still here")
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
    }

    @Test func aClientThatNeverReadsNeitherGrowsTheServerNorStallsOthers() throws {
        let server = try DemoProcess(["echo", "--loops", "1"])  // one loop: the hog shares it with the others
        let port = try server.listeningPort()
        #expect(try Self.echo("warm up", port: port) == "warm up")
        let before = try Self.residentKiB(server.pid)
        let hog = try LoopbackClient(port: port)
        var small = 64 * 1024
        setsockopt(hog.descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let sent = LoopLock(0)
        let writer = Thread {
            let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)
            var timeout = timeval(tv_sec: 3, tv_usec: 0)  // the send blocks once the server stops reading
            setsockopt(hog.descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            for _ in 0..<(64 * 16) {  // up to 64 MiB
                guard (try? hog.send(chunk)) != nil else { return }
                sent.withLock { $0 += chunk.count }
            }
        }
        writer.start()
        #expect(waitUntil(limit: .seconds(30)) { sent.withLock { $0 } >= 1 << 20 })
        usleep(1_000_000)
        for index in 0..<5 {
            #expect(try Self.echo("meanwhile \(index)", port: port) == "meanwhile \(index)")
        }
        let total = sent.withLock { $0 }
        let grown = try Self.residentKiB(server.pid) - before
        #expect(total < 32 << 20, "the server kept reading \(total) bytes from a client that never reads")
        #expect(grown < 16 * 1024, "the server grew by \(grown) KiB for a client that never reads")
        shutdown(hog.descriptor, Int32(SHUT_RDWR))
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
    }

    @Test func aClientThatResetsMidTransferCostsOnlyItsOwnConnection() throws {
        let server = try DemoProcess(["echo", "--loops", "2"])
        let port = try server.listeningPort()
        for round in 0..<20 {
            let client = try LoopbackClient(port: port)
            try client.send([UInt8](repeating: UInt8(round), count: 200_000))
            _ = try client.receive(upTo: 1000)
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(client.descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            // deinit closes: a reset with the server's output queued and its input unread
        }
        #expect(try Self.echo("after resets", port: port) == "after resets")
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
        #expect(!errors.contains("Fatal error"))
    }

    @Test func fiveHundredConnectionsOpenedAndClosedRapidlyLeaveTheServerServing() throws {
        let server = try DemoProcess(["echo", "--loops", "2"])
        let port = try server.listeningPort()
        for index in 0..<500 {
            let client = try LoopbackClient(port: port)
            if index % 2 == 0 { try client.send([1, 2, 3]) }
            if index % 3 == 0 {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(client.descriptor, SOL_SOCKET, SO_LINGER, &linger,
                           socklen_t(MemoryLayout<Glibc.linger>.size))
            }
        }
        #expect(try Self.echo("after the flood", port: port) == "after the flood")
        // Every closed connection was closed by the server too: no descriptor leaked.
        #expect(waitUntil(limit: .seconds(20)) {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.pid)/fd"))?.count ?? 0) < 64
        })
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
    }

    @Test func aClientThatSendsOneByteAtATimeGetsEveryByteBackInOrder() throws {
        let server = try DemoProcess(["echo", "--loops", "1"])
        let port = try server.listeningPort()
        let client = try LoopbackClient(port: port)
        var one: Int32 = 1
        setsockopt(client.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let payload = EchoServerTests.pseudoRandomBytes(count: 3000, seed: 7)
        var echoed: [UInt8] = []
        for (index, byte) in payload.enumerated() {
            try client.send([byte])
            if index % 100 == 99 {  // read back as we go, a byte at a time too
                echoed += try client.receive(upTo: index + 1 - echoed.count)
            }
        }
        client.finishSending()
        echoed += try client.receive()
        #expect(echoed == payload)
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
    }

    @Test func aClientThatHalfClosesWhileBackPressuredGetsAllOfItsEchoThenTheEnd() throws {
        let server = try DemoProcess(["echo", "--loops", "1"])
        let port = try server.listeningPort()
        let client = try LoopbackClient(port: port)
        let payload = EchoServerTests.pseudoRandomBytes(count: 8 << 20, seed: 3)
        let writer = Thread {
            try? client.send(payload)
            client.finishSending()
        }
        writer.start()
        usleep(1_000_000)  // the server stops reading: the client's send blocks
        #expect(try client.receive() == payload)
        let (status, errors) = Self.stop(server)
        #expect(status == 0, "\(errors)")
    }

    @Test func sigtermWhileManyClientsAreMidTransferEchoesWhatWasReadAndExitsZero() throws {
        let server = try DemoProcess(["echo", "--loops", "3"])
        let port = try server.listeningPort()
        let payloads = (0..<8).map { EchoServerTests.pseudoRandomBytes(count: 4 << 20, seed: 100 + UInt64($0)) }
        let clients = try payloads.map { _ in try LoopbackClient(port: port) }
        let silent = try LoopbackClient(port: port)  // connected, sends nothing, never ends
        for (client, payload) in zip(clients, payloads) {
            Thread {
                try? client.send(payload)
                client.finishSending()
            }.start()
        }
        var firsts: [[UInt8]] = []
        for client in clients {
            firsts.append(try client.receive(upTo: 1000))
        }
        server.send(SIGTERM)
        for (index, client) in clients.enumerated() {
            let echoed = firsts[index] + (try client.receive())
            #expect(echoed.count >= 1000)
            #expect(echoed[...] == payloads[index][..<echoed.count], "client \(index): echo is not a prefix")
        }
        #expect(try silent.receive() == [])  // the end of the server's output
        silent.finishSending()
        let (status, errors) = server.waitForExit()
        #expect(status == 0, "\(errors)")
        #expect(errors.contains("shutting down"))
    }

    @Test func aSecondSignalDuringTheShutdownLeavesTheServerExitingZero() throws {
        let server = try DemoProcess(["echo", "--loops", "1"])
        let port = try server.listeningPort()
        let lingering = try LoopbackClient(port: port)  // holds the shutdown open until it ends its input
        try lingering.send(Array("x".utf8))
        #expect(try lingering.receive(upTo: 1) == Array("x".utf8))
        server.send(SIGTERM)
        #expect(try lingering.receive() == [])
        server.send(SIGINT)
        // Noted in the log when the loop takes it before the lingering client ends (not awaited: a timing question).
        lingering.finishSending()
        let (status, errors) = server.waitForExit()
        #expect(status == 0, "\(errors)")
    }
}

// MARK: - LoopHostDriver as GLib drives it

extension HostileDemoTests {
    /// One GLib-like iteration: prepare, poll the driver's descriptor and `others`, check, dispatch when ready.
    /// Returns the ready flags of `others`.
    @discardableResult
    static func glibIteration(_ driver: LoopHostDriver, others: [CInt] = [], cap: Int32 = 5_000) -> [Bool] {
        let timeout = driver.prepare()
        var fds = [pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)]
            + others.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let milliseconds = timeout.map { Int32(clamping: Int64(($0 / .milliseconds(1)).rounded(.up))) } ?? cap
        _ = poll(&fds, nfds_t(fds.count), min(milliseconds, cap))
        let isLoopReady = fds[0].revents != 0 || timeout == .zero || (timeout.map { $0 <= .zero } ?? false)
        if isLoopReady || timeout != nil {
            driver.dispatch()  // GLib's check said ready (or the timeout passed): dispatch
        }
        return fds.dropFirst().map { $0.revents != 0 }
    }

    @Test func theHostPollsItsOwnDescriptorsBesideTheDriversAndEachSideHandlesItsOwn() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        let loopPipe = try TestPipe(), hostPipe = try TestPipe()
        let seen = Recorder<String>()
        loop.add(LoopDescriptorSource(descriptor: loopPipe.readEnd, events: .readable) { _, _ in
            seen.append("loop:" + loopPipe.readAll())
        }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(30)) { _ in seen.append("timer") }, forMode: .default)
        let feeder = startThread {
            usleep(50_000)
            hostPipe.write("h")
            usleep(50_000)
            loopPipe.write("l")
            usleep(50_000)
            loop.perform { seen.append("block") }
        }
        let start = loop.now
        while seen.count < 4, loop.now < start + .seconds(30) {
            let ready = Self.glibIteration(driver, others: [hostPipe.readEnd])
            if ready[0] { seen.append("host:" + hostPipe.readAll()) }
        }
        feeder.join()
        #expect(Set(seen.elements) == ["timer", "host:h", "loop:l", "block"])
    }

    @Test func aDispatchWithoutPrepareRunsOnePassWithoutBlocking() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        #expect(driver.dispatch() == .timedOut)  // nothing to do: returns, does not sleep an hour
        let ran = Recorder<Int>()
        loop.perform { ran.append(1) }
        driver.dispatch()
        #expect(ran.elements == [1])
        onAnotherThread { loop.perform { ran.append(2) } }
        driver.dispatch()
        #expect(ran.elements == [1, 2])
        #expect(driver.prepare() != .zero)  // and the cycle carries on normally
        driver.dispatch()
    }

    @Test func prepareTwiceThenWorkFromAnotherThreadStillWakesTheHost() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let driver = try LoopHostDriver(loop: loop)
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        #expect(driver.prepare() != .zero)
        #expect(driver.prepare() != .zero)
        let ran = Recorder<Int>()
        onAnotherThread { loop.perform { ran.append(1) } }
        var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&watched, 1, 30_000) == 1)
        #expect(driver.prepare() == .zero)  // a third prepare sees the work
        driver.dispatch()
        #expect(ran.elements == [1])
    }

    /// The last reference to a driver dropped on another thread (a `LoopBound` that held it went there): the loop's
    /// host state is changed on its own thread, at its next pass, and a new driver made before that pass stays.
    @Test func aDriverFreedOnAnotherThreadIsDetachedOnTheLoopsThread() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        let handOff = HostDriverHandOff(try LoopHostDriver(loop: loop))
        _ = handOff.driver?.prepare()
        #expect(loop.hostDrivers.count == 1)
        onAnotherThread { handOff.driver = nil }
        #expect(loop.hostDrivers.count == 1, "not changed from the other thread")
        let again = try LoopHostDriver(loop: loop)  // applies the queued detach first
        #expect(loop.hostDrivers.map(\.identity) == [ObjectIdentifier(again)])
        #expect(!loop.isHostWaitAnnounced)
        withExtendedLifetime(again) {}
    }

    @Test func aDriverDestroyedWhileTheHostSleepsLeavesTheLoopRunnable() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let ran = Recorder<Int>()
        loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: .default)
        var driver: LoopHostDriver? = try LoopHostDriver(loop: loop)
        #expect(driver!.prepare() != .zero)
        driver = nil  // the host gave up mid-sleep
        #expect(!loop.isWaiting)
        let producer = startThread {
            guard waitUntil({ loop.isWaiting }) else { return }
            loop.perform {
                ran.append(1)
                loop.stop()
            }
        }
        // The loop is run the ordinary way now: the block from another thread must wake it.
        #expect(loop.run(mode: .default, before: loop.now + .seconds(30)) == .stopped)
        producer.join()
        #expect(ran.elements == [1])
        // A new driver on the same loop works.
        let again = try LoopHostDriver(loop: loop)
        onAnotherThread { loop.perform { ran.append(2) } }
        let start = loop.now
        while ran.count < 2, loop.now < start + .seconds(30) {
            Self.glibIteration(again)
        }
        #expect(ran.elements == [1, 2])
    }

    @Test func twoDriversOnOneLoopForTwoModesEachRunTheirOwnWork() throws {
        let loop = try Loop()
        defer { loop.invalidate() }
        let other = LoopMode("other")
        let first = try LoopHostDriver(loop: loop, mode: .default)
        let second = try LoopHostDriver(loop: loop, mode: other)
        let ran = Recorder<String>()
        loop.add(LoopTimer(interval: .milliseconds(20)) { _ in ran.append("default timer") }, forMode: .default)
        loop.add(LoopTimer(interval: .milliseconds(40)) { _ in ran.append("other timer") }, forMode: other)
        let pipe = try TestPipe()
        loop.add(LoopDescriptorSource(descriptor: pipe.readEnd, events: .readable) { _, _ in
            ran.append("other descriptor:" + pipe.readAll())
        }, forMode: other)
        let producer = startThread {
            usleep(80_000)
            loop.perform(inModes: [other]) { ran.append("other block") }
            loop.perform { ran.append("default block") }
            usleep(50_000)
            pipe.write("p")
        }
        let start = loop.now
        while ran.count < 5, loop.now < start + .seconds(30) {
            // The host prepares both, polls both descriptors at once, dispatches each that is ready.
            let a = first.prepare(), b = second.prepare()
            var fds = [pollfd(fd: first.descriptor, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: second.descriptor, events: Int16(POLLIN), revents: 0)]
            let wait = [a, b].compactMap { $0 }.min().map { Int32(($0 / .milliseconds(1)).rounded(.up)) } ?? 1000
            _ = poll(&fds, 2, min(wait, 1000))
            first.dispatch()
            second.dispatch()
        }
        producer.join()
        #expect(Set(ran.elements) == ["default timer", "other timer", "other block", "default block",
                                      "other descriptor:p"])
    }
}

/// Holds a driver so that another thread can drop the last reference to it.
final class HostDriverHandOff: @unchecked Sendable {
    var driver: LoopHostDriver?

    init(_ driver: LoopHostDriver) {
        self.driver = driver
    }
}
