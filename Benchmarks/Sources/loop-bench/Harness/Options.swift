/// The command line of loop-bench.
struct Options {
    /// `--only` names: a scenario ("scale"), or one table of it ("scale/timers").
    var only: [String] = []
    var isQuick = false
    /// `--runs N`: run the whole benchmark N times in one process and judge each target on the median of its runs.
    var runs = 1
    var jsonPath: String?
    var svgPath: String?
    var allowDebug = false
    var showHelp = false
    /// `--echo-server-dispatch`: serve as the echo scenario's Dispatch peer (`DispatchEchoServer`) instead of
    /// benchmarking. The scenario starts loop-bench so in a child process; not in `--help`.
    var isDispatchEchoServer = false
    /// `--queues K`: the Dispatch echo server's serial queues.
    var echoServerQueues = 1
    /// `--hold-idle-connections N --port P`: hold `scale/echo`'s idle connections (`IdleConnectionHolder`) instead
    /// of benchmarking; not in `--help`.
    var idleConnectionsToHold: Int?
    var port: Int?

    enum ParseError: Error, CustomStringConvertible {
        case missingValue(String)
        case unknownOption(String)
        case unknownScenario(String, known: [String])
        case invalidValue(String, String)

        var description: String {
            switch self {
            case .missingValue(let option): "\(option) needs a value"
            case .unknownOption(let option): "unknown option \(option) (see --help)"
            case .unknownScenario(let name, let known):
                "unknown scenario \(name); the scenarios are: \(known.joined(separator: ", "))"
            case .invalidValue(let option, let value): "\(option) takes a positive number, not \(value)"
            }
        }
    }

    /// `scenarios` are the scenarios' names; `reports` the tables that `--only` may pick out of one, such as
    /// "scale/timers".
    init(arguments: [String], scenarios: [String], reports: [String] = []) throws(ParseError) {
        var remaining = arguments[...]
        func value(for option: String) throws(ParseError) -> String {
            guard let value = remaining.popFirst() else { throw .missingValue(option) }
            return value
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--only":
                let name = try value(for: argument)
                guard scenarios.contains(name) || reports.contains(name) else {
                    throw .unknownScenario(name, known: scenarios + reports)
                }
                self.only.append(name)
            case "--quick": self.isQuick = true
            case "--runs":
                let text = try value(for: argument)
                guard let runs = Int(text), runs > 0 else { throw .invalidValue(argument, text) }
                self.runs = runs
            case "--json": self.jsonPath = try value(for: argument)
            case "--svg": self.svgPath = try value(for: argument)
            case "--allow-debug": self.allowDebug = true
            case "--help", "-h": self.showHelp = true
            case "--echo-server-dispatch": self.isDispatchEchoServer = true
            case "--queues":
                let text = try value(for: argument)
                guard let queues = Int(text), queues > 0 else { throw .invalidValue(argument, text) }
                self.echoServerQueues = queues
            case "--hold-idle-connections":
                let text = try value(for: argument)
                guard let count = Int(text), count > 0 else { throw .invalidValue(argument, text) }
                self.idleConnectionsToHold = count
            case "--port":
                let text = try value(for: argument)
                guard let port = Int(text), port > 0 else { throw .invalidValue(argument, text) }
                self.port = port
            default: throw .unknownOption(argument)
            }
        }
    }

    static func usage(scenarios: [any Scenario]) -> String {
        let list = scenarios.map { "  \($0.name.padding(toLength: 12, withPad: " ", startingAt: 0)) \($0.summary)" }
        return """
            loop-bench: LoopKit beside Foundation's RunLoop, Dispatch and the bare-poll floor, in one process.

            USAGE: swift run -c release loop-bench [options]

            OPTIONS:
              --only NAME     run only this scenario, or one of its tables (scale/timers); repeatable
              --quick         a tenth of the samples and durations: a smoke run, not a measurement
              --runs N        run everything N times in one process; print each run's tables and verdicts, then
                              each target's ratio per run and the median: a target is met when its median ratio
                              meets it and no run misses it by more than 10% (a count that must be 0: no run above 0)
              --json FILE     write every figure of every run, each run's verdicts and the medians, as JSON
              --svg FILE      write latency CDFs (one panel per scenario, log time axis) as SVG, of the last run
              --allow-debug   run even in a debug build (the figures are then meaningless)
              --help          this text

            SCENARIOS (about four minutes in all; with --runs N, N times that):
            \(list.joined(separator: "\n"))

            `echo` runs the loop-demo built beside loop-bench (`swift build -c release` builds both).
            Tables go to standard output, progress to standard error. Ratios compare implementations measured in the
            same run; on a shared or virtual machine only those ratios, and the counters, are worth comparing.
            """
    }
}
