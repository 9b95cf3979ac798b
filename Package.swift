// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "LoopKit",
    // Synchronization's Mutex and Atomic, and UInt128, need these on Apple platforms; Linux has them with Swift 6.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "LoopKit", targets: ["LoopKit"]),
        .executable(name: "loop-demo", targets: ["loop-demo"]),
        .executable(name: "loop-bench", targets: ["loop-bench"]),
    ],
    targets: [
        // The few Linux calls Glibc's Swift module leaves out (ppoll, pipe2, gettid, prctl), as NIO's CNIOLinux.
        .target(name: "CLoopKitSystem"),
        .target(name: "LoopKit", dependencies: ["CLoopKitSystem"]),
        .executableTarget(name: "loop-demo", dependencies: ["LoopKit", "CLoopKitSystem"]),
        .testTarget(name: "LoopKitTests", dependencies: ["LoopKit", "CLoopKitSystem", "loop-demo"]),
        // The benchmark program (`swift run -c release loop-bench`): LoopKit beside Foundation's RunLoop, Dispatch and
        // the bare-poll floor. An executable, never a test, so `swift test` times nothing. Its C part holds the Linux
        // calls Glibc's module leaves out (eventfd, epoll, perf_event_open, thread CPU clocks) and the counting malloc.
        .target(name: "CLoopBench", path: "Benchmarks/Sources/CLoopBench"),
        .executableTarget(
            name: "loop-bench",
            dependencies: ["LoopKit", "CLoopKitSystem", "CLoopBench"],
            path: "Benchmarks/Sources/loop-bench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
