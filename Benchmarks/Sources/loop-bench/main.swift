import Foundation

// loop-bench: LoopKit beside its peers. See `--help`, and the Benchmarks section of README.md for how to read the output.

let scenarios: [any Scenario] = [
    WakeupScenario(), PingPongScenario(), TimerScenario(), DisplayLinkScenario(), ThroughputScenario(),
    ProducersScenario(), IdleScenario(), ScaleScenario(), CountersScenario(), EchoScenario(), ScaleEchoScenario(),
    ActorScenario(),
]

let options: Options
do {
    options = try Options(arguments: Array(CommandLine.arguments.dropFirst()), scenarios: scenarios.map(\.name),
                          reports: ScaleScenario.reports)
} catch {
    FileHandle.standardError.write(Data("loop-bench: \(error)\n".utf8))
    exit(64)
}
if options.showHelp {
    print(Options.usage(scenarios: scenarios))
    exit(0)
}
if options.isDispatchEchoServer {
    DispatchEchoServer.serve(queues: options.echoServerQueues)  // the echo scenario's child process; never returns
}
if let count = options.idleConnectionsToHold, let port = options.port {
    IdleConnectionHolder.hold(count: count, port: port)  // scale/echo's child process; never returns
}

#if DEBUG
let build = "debug"
let warning = """
    ************************************************************************************************
    loop-bench was built in DEBUG: its figures would measure the optimizer's absence, not LoopKit.
    Build and run it with:   swift run -c release loop-bench
    ************************************************************************************************
    """
FileHandle.standardError.write(Data((warning + "\n").utf8))
if !options.allowDebug {
    FileHandle.standardError.write(Data("loop-bench: refusing to run a debug build (--allow-debug overrides).\n".utf8))
    exit(2)
}
#else
let build = "release"
#endif

// "scale/timers" runs the scale scenario for that table alone.
let onlyReports = Set(options.only.filter { $0.contains("/") })
let context = BenchContext(isQuick: options.isQuick, onlyReports: onlyReports)
let selected = scenarios.filter { scenario in
    options.only.isEmpty || options.only.contains(scenario.name)
        || onlyReports.contains { $0.hasPrefix(scenario.name + "/") }
}
let cores = ProcessInfo.processInfo.activeProcessorCount
let loadAverage = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
    .split(separator: " ").prefix(3).joined(separator: " ") ?? "unknown"
let date = ISO8601DateFormatter().string(from: Date())
let allocationCounting = System.allocationHookIsActive
    ? "counted: malloc family interposed in the executable (CLoopBench/alloc_hook.c), per-thread counters"
    : "unavailable: the malloc interposition did not take effect"
let syscallCounting = SyscallCounter.isAvailable
    ? "counted: perf_event_open on the raw_syscalls/syscalls tracepoints, per thread"
    : "unavailable: perf_event_open on tracepoints refused (not root, or no tracefs)"

let memoryMonitors = System.runningMemoryMonitors
let memoryMonitoring = memoryMonitors.isEmpty
    ? "none running"
    : "DAMON running (kdamond \(memoryMonitors.map(String.init).joined(separator: ", "))): its sampling can hold a "
        + "processor for milliseconds, making whichever timer wakes there that late"

let provenance = BuildProvenance.ofRunningExecutable()
if !provenance.sourcesNewerThanBuild.isEmpty {
    FileHandle.standardError.write(Data(("loop-bench: " + provenance.summary + "\n").utf8))
}

// The producer thread's sleeps (the gaps between samples) should last what they say.
System.setTimerSlack(nanoseconds: 1_000)

print("# loop-bench \(options.isQuick ? "(quick: a tenth of the samples, a smoke run)" : "")")
print("")
print("Machine: \(cores) cores (\(System.processorModel)), kernel \(System.kernelRelease), \(build) build, \(date); "
      + "load average at start \(loadAverage).")
print("Heap allocations: \(allocationCounting). System calls: \(syscallCounting).")
print("Kernel memory monitors: \(memoryMonitoring).")
print(provenance.summary)
print("Ratio columns: the implementation's p50 ÷ the reference's p50 (for throughput, rate ÷ rate).")
print("")

let started = System.now
var runs: [JSONOutput.Run] = []
for run in 1...options.runs {
    let runLabel = options.runs == 1 ? "" : "[run \(run)/\(options.runs)] "
    if options.runs > 1 {
        print("# Run \(run) of \(options.runs)")
        print("")
    }
    let runStart = System.now
    var reports: [ScenarioReport] = []
    for (index, scenario) in selected.enumerated() {
        context.progress("\(runLabel)[\(index + 1)/\(selected.count)] \(scenario.name): \(scenario.summary) …")
        let scenarioStart = System.now
        let produced = scenario.run(context)
        reports += produced
        for report in produced {
            print(TablePrinter.render(report))
            print("")
        }
        context.progress("      \(scenario.name) done in \(Format.number(Double(System.now - scenarioStart) / 1e9)) s")
    }
    let verdicts = VerdictJudge(reports: reports).verdicts().filter {
        options.only.isEmpty || $0.met != nil || $0.wasNotRun
    }
    print(options.runs == 1 ? "## Verdicts (the benchmark's targets)" : "## Verdicts of run \(run)")
    print("")
    for verdict in verdicts {
        print("- " + verdict.line)
    }
    print("")
    let seconds = Double(System.now - runStart) / 1e9
    if options.runs > 1 {
        print("Run \(run): \(Format.number(seconds)) s.")
        print("")
    }
    runs.append(JSONOutput.Run(run: run, seconds: seconds, reports: reports, verdicts: verdicts))
}

let targets = TargetAcrossRuns.collect(runs.map(\.verdicts))
if options.runs > 1 {
    print(TargetAcrossRuns.render(targets, runs: options.runs).joined(separator: "\n"))
    print("")
}
print("Whole run: \(Format.number(Double(System.now - started) / 1e9)) s.")

if let path = options.jsonPath {
    let machine = JSONOutput.Machine(cores: cores, processor: System.processorModel,
                                     kernel: System.kernelRelease, date: date, build: build,
                                     quick: options.isQuick, runs: options.runs, loadAverageAtStart: loadAverage,
                                     allocationCounting: allocationCounting, syscallCounting: syscallCounting,
                                     memoryMonitoring: memoryMonitoring,
                                     treeCommit: provenance.treeCommit,
                                     sourcesNewerThanBuild: provenance.sourcesNewerThanBuild)
    do {
        try JSONOutput.write(to: path, machine: machine, runs: runs, targets: targets)
        context.progress("wrote \(path)")
    } catch {
        context.progress("loop-bench: cannot write \(path): \(error)")
        exit(1)
    }
}
if let path = options.svgPath {
    let caption = "loop-bench, \(cores) cores, kernel \(System.kernelRelease), \(date)"
        + (options.isQuick ? " (quick run)" : "") + (options.runs > 1 ? ", run \(options.runs) of \(options.runs)" : "")
    do {
        try SVGOutput.render(runs.last?.reports ?? [], caption: caption).write(toFile: path, atomically: true, encoding: .utf8)
        context.progress("wrote \(path)")
    } catch {
        context.progress("loop-bench: cannot write \(path): \(error)")
        exit(1)
    }
}
