/// What the command line asks for, parsed; `parse` is the whole grammar of `loop-demo`.
///
/// ```
/// loop-demo [tracking] [--fps 60|120] [--duration SECONDS] [--interactive] [--json] [--trace FILE] [--no-color]
/// loop-demo phases [--trace FILE] [--no-color]
/// loop-demo hitches [--duration SECONDS] [--trace FILE] [--no-color]
/// loop-demo echo [--port N] [--loops K] [--spare-descriptors N]
/// loop-demo help [COMMAND]        loop-demo [COMMAND] --help | -h
/// ```
///
/// Options take their value as the next argument or after `=` (`--fps=120`). `--help` (or `-h`) anywhere after a known
/// command asks for that command's help and wins over mistakes in its options; first, it asks for the overview.
enum DemoCommand: Equatable {
    case tracking(TrackingOptions)
    case phases(CommonOptions)
    case hitches(HitchesOptions)
    case echo(EchoOptions)
    /// `main-queue`: the main queue and `@MainActor` code on the main thread's loop, or on what `runner` names.
    case mainQueue(MainQueueProbe.Runner)
    /// Print the help of a command (`nil`: the overview) and exit 0.
    case help(Name?)

    /// The subcommands.
    enum Name: String, CaseIterable, Sendable {
        case tracking, phases, hitches, echo
        case mainQueue = "main-queue"
    }

    /// Options every command takes.
    struct CommonOptions: Equatable {
        var tracePath: String?
        var noColor = false
    }

    struct TrackingOptions: Equatable {
        var common = CommonOptions()
        var fps = 60
        /// `nil`: the default, 3 s for the script, until `q` for `--interactive`.
        var duration: Duration?
        var interactive = false
        var json = false
    }

    struct HitchesOptions: Equatable {
        var common = CommonOptions()
        var duration: Duration = .seconds(3)
    }

    struct EchoOptions: Equatable {
        /// 0: any free port (the server prints the one it got).
        var port: UInt16 = 0
        /// `nil`: one loop per processor.
        var loops: Int?
        /// How many more descriptors the server may open once it is set up (a lower soft limit), to see it survive
        /// running out of them.
        var spareDescriptors: Int?
    }

    /// A mistake on the command line: exit status 2, with `message` and the short usage on standard error.
    struct UsageError: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    /// Parses the arguments after the program name.
    ///
    /// - Throws: `UsageError` for an unknown command or option, a missing or bad value, or a bad combination.
    static func parse(_ arguments: [String]) throws(UsageError) -> DemoCommand {
        var rest = arguments[...]
        var name = Name.tracking
        if let first = rest.first, !first.hasPrefix("-") {
            rest = rest.dropFirst()
            if first == "help" {
                return try self.parseHelp(rest)
            }
            guard let command = Name(rawValue: first) else {
                throw UsageError(description: "unknown command '\(first)'")
            }
            name = command
        }
        if rest.contains(where: { $0 == "--help" || $0 == "-h" }) {
            // The default command's help after one of its own options (`--fps 120 --help`); the overview for a
            // bare `--help`.
            let isBare = arguments.first == "--help" || arguments.first == "-h"
            return .help(isBare ? nil : name)
        }

        var common = CommonOptions()
        var tracking = TrackingOptions()
        var hitches = HitchesOptions()
        var echo = EchoOptions()
        var runner: MainQueueProbe.Runner?
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("-"), argument != "-" else {
                throw UsageError(description: "unexpected argument '\(argument)'")
            }
            let (option, attached) = self.split(argument)
            func value() throws(UsageError) -> String {
                if let attached { return attached }
                guard let next = rest.popFirst() else { throw UsageError(description: "\(option) needs a value") }
                return next
            }
            switch (option, name) {
            case ("--trace", let command) where command != .echo && command != .mainQueue:
                let path = try value()
                guard !path.isEmpty else { throw UsageError(description: "--trace needs a file name") }
                common.tracePath = path
            case ("--no-color", let command) where attached == nil && command != .echo && command != .mainQueue:
                common.noColor = true
            case ("--fps", .tracking):
                let text = try value()
                guard let fps = Int(text), fps == 60 || fps == 120 else {
                    throw UsageError(description: "--fps must be 60 or 120 (got '\(text)')")
                }
                tracking.fps = fps
            case ("--duration", .tracking), ("--duration", .hitches):
                let duration = try self.duration(try value())
                tracking.duration = duration
                hitches.duration = duration
            case ("--port", .echo):
                let text = try value()
                guard let port = UInt16(text) else {
                    throw UsageError(description: "--port must be a port number from 0 to 65535 (got '\(text)')")
                }
                echo.port = port
            case ("--loops", .echo):
                let text = try value()
                guard let loops = Int(text), (1...256).contains(loops) else {
                    throw UsageError(description: "--loops must be a number from 1 to 256 (got '\(text)')")
                }
                echo.loops = loops
            case ("--spare-descriptors", .echo):
                let text = try value()
                guard let spare = Int(text), (1...65536).contains(spare) else {
                    throw UsageError(description: "--spare-descriptors must be a number from 1 to 65536 (got '\(text)')")
                }
                echo.spareDescriptors = spare
            case ("--interactive", .tracking) where attached == nil:
                tracking.interactive = true
            case ("--json", .tracking) where attached == nil:
                tracking.json = true
            case ("--foundation", .mainQueue) where attached == nil, ("--host-driver", .mainQueue) where attached == nil:
                let chosen: MainQueueProbe.Runner = option == "--foundation" ? .foundation : .hostDriver
                if let runner, runner != chosen {
                    throw UsageError(description: "--foundation and --host-driver cannot be combined")
                }
                runner = chosen
            default:
                throw UsageError(description: attached != nil && self.takesFlag(option, name)
                    ? "\(option) takes no value"
                    : "unknown option '\(option)' for '\(name.rawValue)'")
            }
        }
        if tracking.interactive && tracking.json {
            throw UsageError(description: "--interactive and --json cannot be combined")
        }
        switch name {
        case .tracking:
            tracking.common = common
            return .tracking(tracking)
        case .phases:
            return .phases(common)
        case .hitches:
            hitches.common = common
            return .hitches(hitches)
        case .echo:
            return .echo(echo)
        case .mainQueue:
            return .mainQueue(runner ?? .loopKit)
        }
    }

    private static func parseHelp(_ rest: ArraySlice<String>) throws(UsageError) -> DemoCommand {
        // `help tracking --help` asks for the same help twice: `--help` wins here too.
        let rest = rest.filter { $0 != "--help" && $0 != "-h" }
        guard let topic = rest.first else { return .help(nil) }
        guard rest.count == 1, let command = Name(rawValue: topic) else {
            throw UsageError(description: "no help for '\(rest.joined(separator: " "))'")
        }
        return .help(command)
    }

    /// Whether `command` takes `option` as a flag (an option without a value), for the message when it got one.
    private static func takesFlag(_ option: String, _ command: Name) -> Bool {
        switch (option, command) {
        case ("--no-color", .tracking), ("--no-color", .phases), ("--no-color", .hitches),
             ("--interactive", .tracking), ("--json", .tracking), ("--foundation", .mainQueue),
             ("--host-driver", .mainQueue):
            true
        default:
            false
        }
    }

    /// `--name=value` into its parts; `--name` alone has no attached value.
    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// Seconds from 1 to 600, as given to `--duration`.
    private static func duration(_ text: String) throws(UsageError) -> Duration {
        guard let seconds = Double(text), seconds.isFinite, seconds >= 1, seconds <= 600 else {
            throw UsageError(description: "--duration must be a number of seconds from 1 to 600 (got '\(text)')")
        }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }
}
