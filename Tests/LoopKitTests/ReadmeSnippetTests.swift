#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import LoopKit
import Testing

/// Every Swift snippet of README.md, verbatim (without its `import` lines, which are above), so that the build
/// compiles them; a test checks that the README still shows exactly these. Each is a function that no test calls:
/// they would block, or need a socket or a main thread of their own. What a snippet leaves undefined (`socket`,
/// `running`) is a parameter, or a function here (`render`).
enum ReadmeSnippets {
    /// The display-link snippet's frame work.
    static func render(until deadline: LoopInstant) {}

    // The Swift concurrency snippet: an actor on a loop, keeping its executor.
    actor Session {
        let executor: LoopExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
        init(loop: Loop) { self.executor = loop.executor }   // the loop's common modes
        func received(_ bytes: [UInt8]) { /* on the loop's thread, between its other callbacks */ }
    }

    static func aLoopOnItsOwnThread(socket: CInt) throws {
        let thread = try LoopThread(name: "io")          // a thread running its loop's default mode until shutdown
        let loop = thread.loop

        // A timer in the common modes keeps firing while the loop runs `tracking`.
        loop.add(LoopTimer(interval: .milliseconds(100), repeats: true, tolerance: .milliseconds(5)) { _ in
            print("tick")
        }, forMode: .common)

        // A descriptor source calls back while `socket` is readable (level-triggered: again while data is left); the loop
        // never reads it, the handler does. Cancel the source, then close the descriptor: its number may be reused at once.
        let reader = LoopDescriptorSource(descriptor: socket, events: .readable) { source, events in
            guard !events.contains(.invalid) else { return }   // closed behind the loop's back: the loop cancels the source
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(source.descriptor, &buffer, buffer.count)
            if count > 0 { /* use buffer[..<count] */ }
            // 0 is the peer's end of input (a TCP close brings `readable`, seldom `hangUp`); EAGAIN is nothing yet.
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) {
                source.invalidate()
                close(source.descriptor)
            }
        }
        loop.add(reader, forMode: .default)

        loop.perform { print("runs on the loop's thread") }   // any thread; wakes the loop
        thread.shutdownAndJoin()                               // sticky: never lost, even before the loop started
    }

    static func runningTheCurrentThreadsLoop() {
        let loop = Loop.current                                  // created on first use, released when the thread exits
        // .finished, .stopped, .timedOut or .handledSource
        let result = loop.run(mode: .default, before: loop.now + .seconds(5))
        _ = result
    }

    static func aLoopOnAManualClock() throws {
        let clock = ManualLoopClock()
        let loop = try Loop(clock: clock)
        loop.add(LoopTimer(interval: .milliseconds(10), repeats: true) { _ in print(clock.now) }, forMode: .default)
        loop.run(mode: .default, before: clock.now + .seconds(1))   // 100 fires, no real time
    }

    static func aToolsMain() throws {
        // main.swift
        let interrupt = try LoopSignalSource(signal: SIGINT, on: Loop.main.assumeIsolated()) { _ in
            Loop.main.stop()                              // Ctrl-C ends the run below
        }
        Task { @MainActor in
            print("the main actor runs on Loop.main")
        }
        DispatchQueue.main.async { print("so does the main queue") }
        Loop.main.run()                     // .stopped, never .finished: the main queue keeps it alive
        interrupt.invalidate()                            // SIGINT's default action again
    }

    static func aDisplayLinkAndItsHitchMonitor(loop: Loop) {
        let link = LoopDisplayLink(display: .default, preferredRate: 120) { link, frame in
            render(until: frame.targetTimestamp)          // the frame budget: 8.33 ms at 120 Hz
        }
        loop.add(link, forMode: .common)                  // keeps animating while the loop runs `tracking`
        let monitor = HitchMonitor(loop: loop)
        monitor.attach(to: link)
        monitor.onHang { hang in print("hang of \(hang.duration)") }
        // later: monitor.report.hitchTimeRatio, .rating, .skippedFrames, .longestBusyPass
    }

    static func aLoopGroup() throws {
        let group = try LoopGroup(name: "server")
        let loop = group.next()                            // round-robin; group.any() prefers the caller's own loop
        loop.perform { /* accept, read, write on this loop */ }
        group.shutdownGracefully { print("every thread has ended") }   // sticky; or `await group.shutdownGracefully()`
    }

    static func aPollHost(running: Bool) throws {
        let driver = try LoopHostDriver(loop: Loop.current)
        while running {
            let timeout = driver.prepare()                 // nil: no timer; .zero: work waiting now
            var watched = pollfd(fd: driver.descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&watched, 1, timeout.map { Int32(clamping: Int64(($0 / .milliseconds(1)).rounded(.up))) } ?? -1)
            driver.dispatch()
        }
    }

    /// The awaited-calls snippet's idle sweep.
    static func closeIdleConnections() {}

    static func awaitedCalls(loop: Loop, connections: [CInt]) async throws {
        let count = try await loop.submit { connections.count }           // on the loop's thread, at its next drain
        try await loop.submit(after: .seconds(30)) { closeIdleConnections() }
        _ = count
    }

    static func theIsolatedView(loop: Loop) {
        let isolated = loop.assumeIsolated()               // on the loop's thread only
        var frames = 0                                     // not Sendable: a captured var
        let timer = LoopTimer(interval: .milliseconds(16), repeats: true, on: isolated) { _ in frames += 1 }
        loop.add(timer, forMode: .common)
        isolated.perform { print(frames) }
    }
}

@Suite("README's snippets")
struct ReadmeSnippetTests {
    /// The README's Swift blocks, each without its indentation, `import` lines and the blank line after them.
    private static func readmeSnippets() throws -> [[String]] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let lines = try String(contentsOf: readme, encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false)
        var snippets: [[String]] = []
        var current: [String]?
        for line in lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if current != nil, trimmed == "```" {
                snippets.append(Array(current!.drop { $0.isEmpty }))  // the blank line after the imports
                current = nil
            } else if current != nil, !trimmed.hasPrefix("import ") {
                current!.append(trimmed)
            }
        }
        return snippets
    }

    @Test func everySwiftSnippetOfTheReadmeIsCompiledVerbatimHere() throws {
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        let snippets = try Self.readmeSnippets()
        #expect(snippets.count == 10)
        for snippet in snippets {
            let found = source.indices.contains { start in
                start + snippet.count <= source.count && Array(source[start..<(start + snippet.count)]) == snippet
            }
            #expect(found, "README snippet not in ReadmeSnippetTests.swift: \(snippet.first ?? "")")
        }
    }
}
