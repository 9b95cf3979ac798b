import Foundation

/// A `loop-demo` process started by a test: the command's own process, with its own main thread (the test runner's
/// is not the test's).
final class DemoProcess {
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()

    /// How long a started `loop-demo` may run before it is killed: a hang guard, so that a server that never ends
    /// fails its test (its reads see the end of its output) instead of blocking the whole suite.
    static let lifetimeLimit: Double = 180

    /// Starts `loop-demo` with `arguments` (under a descriptor limit of `descriptorLimit`, set by the shell that
    /// starts it, when given); it is killed if it still runs after `lifetimeLimit` seconds.
    init(_ arguments: [String], descriptorLimit: Int? = nil) throws {
        if let descriptorLimit {
            self.process.executableURL = URL(fileURLWithPath: "/bin/sh")
            self.process.arguments = ["-c", "ulimit -n \(descriptorLimit) && exec \"$0\" \"$@\"",
                                      try Self.executable().path] + arguments
        } else {
            self.process.executableURL = try Self.executable()
            self.process.arguments = arguments
        }
        self.process.standardOutput = self.output
        self.process.standardError = self.errors
        try self.process.run()
        self.process.killIfStillRunning(after: Self.lifetimeLimit, "loop-demo \(arguments.joined(separator: " "))")
    }

    /// The `loop-demo` built beside this test bundle (or in the package's debug folder).
    static func executable() throws -> URL {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let candidates = [bundle.deletingLastPathComponent().appendingPathComponent("loop-demo"),
                          URL(fileURLWithPath: ".build/debug/loop-demo")]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw DemoProcessError("loop-demo is not built; run `swift build` first")
        }
        return found
    }

    var pid: pid_t { self.process.processIdentifier }

    /// The first line of standard output (without its newline), read as it comes.
    func readLine() throws -> String {
        var line = Data()
        while true {
            let byte = try self.output.fileHandleForReading.read(upToCount: 1) ?? Data()
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// The port of an echo server's `listening on 127.0.0.1:PORT` line.
    func listeningPort() throws -> UInt16 {
        let line = try self.readLine()
        guard line.hasPrefix("listening on 127.0.0.1:"), let port = UInt16(line.split(separator: ":").last ?? "")
        else {
            throw DemoProcessError("loop-demo echo did not say where it listens: '\(line)'")
        }
        return port
    }

    /// The process's CPU time so far (user and system), from `/proc`.
    func cpuSeconds() throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(self.pid)/stat", encoding: .utf8)
        let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
        let ticks = Double(fields[11])! + Double(fields[12])!  // utime and stime, fields 14 and 15 of the line
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Closes the test's end of the process's standard output, as a reader that has gone (`| head -1`) does.
    func closeOutputReader() {
        try? self.output.fileHandleForReading.close()
    }

    /// Sends `signal` to the process.
    func send(_ signal: Int32) {
        kill(self.pid, signal)
    }

    /// Waits for the process to end; returns its exit status and what it wrote to standard error.
    func waitForExit() -> (status: Int32, errors: String) {
        let errors = self.errors.fileHandleForReading.readDataToEndOfFile()
        self.process.waitUntilExit()
        return (self.process.terminationStatus, String(decoding: errors, as: UTF8.self))
    }

    /// Ends the process if a test left it running.
    deinit {
        if self.process.isRunning {
            kill(self.pid, SIGKILL)
            self.process.waitUntilExit()
        }
    }
}

extension Process {
    /// A hang guard for a started process: kills it (SIGKILL) if it still runs after `seconds`, saying so, so that
    /// whatever waits for it (its output's end, its exit) ends and the test fails instead of blocking the suite.
    func killIfStillRunning(after seconds: Double, _ description: String) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            guard self.isRunning else { return }
            print("\(description) still ran after \(seconds) s; killed")
            kill(self.processIdentifier, SIGKILL)
        }
    }
}

struct DemoProcessError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
