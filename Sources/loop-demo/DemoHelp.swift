/// The texts of `--help` and of the short usage printed after a mistake.
enum DemoHelp {
    /// The short usage: one line per command.
    static let usage = """
        usage: loop-demo [tracking] [--fps 60|120] [--duration SECONDS] [--interactive]
                         [--json] [--trace FILE] [--no-color]
               loop-demo phases [--trace FILE] [--no-color]
               loop-demo hitches [--duration SECONDS] [--trace FILE] [--no-color]
               loop-demo echo [--port N] [--loops K] [--spare-descriptors N]
               loop-demo main-queue [--foundation | --host-driver]
               loop-demo help [COMMAND]
        """

    /// The help of `command`, or the overview.
    static func text(for command: DemoCommand.Name?) -> String {
        switch command {
        case nil: self.overview
        case .tracking: self.tracking
        case .phases: self.phases
        case .hitches: self.hitches
        case .echo: self.echo
        case .mainQueue: self.mainQueue
        }
    }

    private static let common = """
          --trace FILE         also write what the loop did to FILE, in the Trace Event
                               Format (open it in ui.perfetto.dev or chrome://tracing)
          --no-color           no colour, even on a terminal (there is none when
                               stdout is not a terminal, nor when NO_COLOR is set)
          -h, --help           show this help
        """

    private static let overview = """
        loop-demo: see what LoopKit's run loop does, in a few seconds.

        commands:
          tracking   (the default) a timer in `default` stops while the loop runs
                     `tracking` for a drag; a timer and a display link in `common` don't
          phases     the anatomy of a pass: observer activities, and what was handled
                     in between
          hitches    a 120 Hz display link with some heavy frames, measured by the
                     hitch monitor
          echo       a TCP echo server on 127.0.0.1, on a loop group
          main-queue DispatchQueue.main and @MainActor code on Loop.main (with
                     --foundation: the same program on Foundation's RunLoop.main;
                     with --host-driver: Loop.main driven by a poll(2) host loop)

        \(usage)

        `loop-demo COMMAND --help` tells more. Ctrl-C ends tracking, phases and hitches,
        which still print what they saw, and shuts echo down gracefully; main-queue
        takes well under a second.
        """

    private static let tracking = """
        loop-demo tracking: why a timer stops while you drag.

        A scripted session on the main thread's loop: idle, a drag, idle again (3 s;
        the drag is the middle 40 %). An input thread writes touch events into a pipe;
        a descriptor source on the loop reads them. On touch-down the handler runs the
        loop nested in the `tracking` mode until touch-up, as UIKit does. Meanwhile:
          refresh feed   a 10 Hz timer in `default`   -> stops during the drag
          clock          a 10 Hz timer in `common`    -> keeps firing
          animation      a display link in `common`   -> keeps animating
        The timeline is drawn live, then a table of fires before / during / after the
        drag and a verdict.

        usage: loop-demo [tracking] [options]

        options:
          --fps 60|120         the display link's rate (default 60)
          --duration SECONDS   the session's length, 1 to 600 (default 3;
                               with --interactive: until q)
          --interactive        drag from the keyboard: Enter starts a drag, Enter ends
                               it, q quits
          --json               print only the summary, as JSON: {"segments":[{"name",
                               "mode","seconds","fires":{"defaultTimer","commonTimer",
                               "displayLink"}}],"fps","seconds","interrupted"}
        \(common)
        """

    private static let phases = """
        loop-demo phases: the anatomy of a pass.

        Runs the main thread's loop in `default` for a few passes with a timer, a
        signalled source (signalled from another thread), a descriptor source on a pipe
        (written from another thread) and blocks, and prints every activity an observer
        sees, with its time and what the loop handled in between.

        usage: loop-demo phases [options]

        options:
        \(common)
        """

    private static let hitches = """
        loop-demo hitches: frames that miss their deadline.

        Runs a 120 Hz display link (8.33 ms per frame) on the main thread's loop. Each
        frame's work is light (1 ms) except scripted heavy ones; a hitch monitor
        measures every frame. Prints a bar per second and the totals: frames, skipped
        frames, hitches and the hitch time ratio (ms of hitch per second) with its
        rating: good below 5 ms/s, warning 5 to 10, critical above 10.

        usage: loop-demo hitches [options]

        options:
          --duration SECONDS   how long to run, 1 to 600 (default 3; the heavy frames
                               repeat every 3 s)
        \(common)
        """

    private static let echo = """
        loop-demo echo: a TCP echo server on loopback, built on LoopKit.

        Listens on 127.0.0.1 and sends back every byte it receives. The first of K loop
        threads accepts; each connection then lives on one loop (round-robin), read and
        written by a descriptor source. A connection whose client does not read stops
        being read (256 KiB queued at most). Errors are logged to standard error and
        survived; out of descriptors, accepting pauses and retries every 100 ms.
        SIGINT or SIGTERM shuts down gracefully: no new connections, queued output is
        sent (5 s at most), then exit 0. Prints `listening on 127.0.0.1:PORT` when
        ready. Talk to it with `nc 127.0.0.1 PORT`.

        usage: loop-demo echo [options]

        options:
          --port N             the port (default 0: any free one)
          --loops K            loop threads, 1 to 256 (default: one per processor)
          --spare-descriptors N
                               once set up, lower the descriptor limit so that only
                               N more can be opened, to see it run out and survive
                               (a limit that leaves fewer stays)
          -h, --help           show this help
        """

    private static let mainQueue = """
        loop-demo main-queue: the main queue and @MainActor code on Loop.main.

        The main thread runs Loop.main in its common modes, and DispatchQueue.main.async,
        Task { @MainActor in } and MainActor.run all run between the loop's callouts,
        without Foundation. Then the loop runs a mode that is not common for 100 ms: the
        main queue waits, as on CFRunLoop, and runs once a common mode runs again.
        Prints one line per check and exits 0 when every one ran (1 otherwise).

        usage: loop-demo main-queue [options]

        options:
          --foundation         the same program on Foundation's RunLoop.main
          --host-driver        Loop.main driven by a poll(2) host loop through a
                               LoopHostDriver, as a GUI toolkit's main loop would
          -h, --help           show this help
        """
}
