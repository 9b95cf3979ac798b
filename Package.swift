// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "LoopKit",
    products: [
        .library(name: "LoopKit", targets: ["LoopKit"]),
        .executable(name: "loop-demo", targets: ["loop-demo"]),
    ],
    targets: [
        // The few Linux calls Glibc's Swift module leaves out (ppoll, pipe2, gettid, prctl), as NIO's CNIOLinux.
        .target(name: "CLoopKitSystem"),
        .target(name: "LoopKit", dependencies: ["CLoopKitSystem"]),
        .executableTarget(name: "loop-demo", dependencies: ["LoopKit"]),
        .testTarget(name: "LoopKitTests", dependencies: ["LoopKit", "loop-demo"]),
    ],
    swiftLanguageModes: [.v6]
)
