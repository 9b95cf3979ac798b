import CoreFoundation
import Foundation
@testable import LoopKit

/// What a differential scenario may do to a run loop: the ground CFRunLoop and LoopKit's `Loop` share.
///
/// A scenario is written once against this protocol and run twice, each time on a fresh thread with that thread's
/// fresh loop: once on `CFDifferentialLoop` (the real CFRunLoop of swift-corelibs-foundation) and once on
/// `LoopKitDifferentialLoop`. Every observer call, callback and run result writes one line to the trace, so the two
/// traces compare line by line. Modes, activities and results use LoopKit's names on both sides; CF's activity bits
/// are read through `LoopActivity(rawValue:)`, which is only right because the bit values match.
///
/// Callers use an adapter on its scenario's thread, except `perform`, `wakeUp`, `stop`, `isWaiting`, `log` and
/// `DifferentialSource.signal()`, which both loops allow from any thread.
protocol DifferentialLoop: AnyObject, Sendable {
    /// The lines written so far.
    var trace: Recorder<String> { get }
    /// `true` for CFRunLoop: only the tests of a documented difference look at it, to use each side's idiom.
    var isCoreFoundation: Bool { get }
    /// Whether the loop is asleep (`CFRunLoopIsWaiting`, `Loop.isWaiting`).
    var isWaiting: Bool { get }

    // The requirements spell out every argument; scenarios call the shorter forms in the extension below.

    /// An observer that logs "`name` `activity`", then calls `action`.
    func addObserver(name: String, activities: LoopActivity, mode: LoopMode, order: Int, repeats: Bool,
                     action: (@Sendable (LoopActivity) -> Void)?)
    /// One-shot timers, each due its delay after one reading of the clock, that log their names when they fire.
    func addTimers(_ timers: [(name: String, delay: Duration)], mode: LoopMode, action: (@Sendable () -> Void)?)
    /// A one-shot timer an hour away: it keeps `mode` alive and never fires during a test.
    func addKeepAlive(in mode: LoopMode)
    /// A signalled (version-0) source that logs `name`, then calls `action`.
    func addSource(name: String, order: Int, modes: [LoopMode], action: (@Sendable () -> Void)?)
        -> any DifferentialSource
    /// A block for `mode` that logs `name`, then calls `action`.
    func addBlock(name: String, mode: LoopMode, action: (@Sendable () -> Void)?)
    func addCommonMode(_ mode: LoopMode)
    /// Runs `mode` for at most `seconds` (0: one pass that does not wait), then logs "`mode` → `result`".
    func runMode(_ mode: LoopMode, seconds: Double, returnAfterSourceHandled: Bool) -> RunResult
    func stop()
    func wakeUp()
}

/// A source made by `DifferentialLoop.addSource`; `signal()` is safe from any thread on both sides.
protocol DifferentialSource: Sendable {
    func signal()
}

extension DifferentialLoop {
    func log(_ line: String) {
        self.trace.append(line)
    }

    func observe(_ name: String, _ activities: LoopActivity, in mode: LoopMode, order: Int = 0, repeats: Bool = true,
                 then action: (@Sendable (LoopActivity) -> Void)? = nil) {
        self.addObserver(name: name, activities: activities, mode: mode, order: order, repeats: repeats, action: action)
    }

    /// A one-shot timer due `delay` from now that logs `name`, then calls `action`.
    func addTimer(_ name: String, in mode: LoopMode, after delay: Duration = .zero,
                  then action: (@Sendable () -> Void)? = nil) {
        self.addTimers([(name, delay)], mode: mode, action: action)
    }

    @discardableResult
    func addSource(_ name: String, order: Int = 0, in modes: [LoopMode] = [.default],
                   then action: (@Sendable () -> Void)? = nil) -> any DifferentialSource {
        self.addSource(name: name, order: order, modes: modes, action: action)
    }

    func perform(_ name: String, in mode: LoopMode, then action: (@Sendable () -> Void)? = nil) {
        self.addBlock(name: name, mode: mode, action: action)
    }

    @discardableResult
    func run(_ mode: LoopMode, for seconds: Double, returnAfterSourceHandled: Bool = false) -> RunResult {
        self.runMode(mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled)
    }
}

/// The two traces of one scenario.
struct DifferentialTraces {
    let coreFoundation: [String]
    let loopKit: [String]
}

/// Runs `scenario` on CFRunLoop and on LoopKit, each on a fresh thread (started here and joined) with a fresh loop.
///
/// - Parameter cfTrackingIsCommon: Whether the CF side first adds "tracking" to its common modes, as LoopKit's common
///   set holds `tracking` from the start (CF's holds only the default mode until AppKit or the caller adds one).
func runOnBothLoops(cfTrackingIsCommon: Bool = true,
                    _ scenario: @escaping @Sendable (any DifferentialLoop) -> Void) -> DifferentialTraces {
    let cfTrace = Recorder<String>()
    let loopKitTrace = Recorder<String>()
    onAnotherThread {
        scenario(CFDifferentialLoop(trace: cfTrace, trackingIsCommon: cfTrackingIsCommon))
    }
    onAnotherThread {
        scenario(LoopKitDifferentialLoop(trace: loopKitTrace))
    }
    return DifferentialTraces(coreFoundation: cfTrace.elements, loopKit: loopKitTrace.elements)
}

/// Runs `body` on a fresh thread, started here and joined, and returns what it appended.
func traceOnFreshThread(_ body: @escaping @Sendable (Recorder<String>) -> Void) -> [String] {
    let trace = Recorder<String>()
    onAnotherThread { body(trace) }
    return trace.elements
}

// MARK: - CFRunLoop

/// The calling thread's CFRunLoop behind `DifferentialLoop`.
// @unchecked Sendable: the run loop is a CFRunLoop, which CF lets any thread stop, wake, test for waiting and queue
// blocks on; everything else is called on the thread that created the adapter (the scenario's thread).
final class CFDifferentialLoop: DifferentialLoop, @unchecked Sendable {
    let trace: Recorder<String>
    /// Not retained: the thread owns its run loop, and the callbacks that capture this adapter are the run loop's, so
    /// a retain would be a cycle and the run loop would outlive its thread (CF frees it in the thread's destructor).
    /// Every use is while the scenario's thread lives (helper threads are joined inside the scenario).
    private let unretainedRunLoop: Unmanaged<CFRunLoop>
    var runLoop: CFRunLoop { self.unretainedRunLoop.takeUnretainedValue() }
    var isCoreFoundation: Bool { true }

    init(trace: Recorder<String>, trackingIsCommon: Bool) {
        self.trace = trace
        self.unretainedRunLoop = Unmanaged.passUnretained(CFRunLoopGetCurrent())
        if trackingIsCommon {
            CFRunLoopAddCommonMode(self.runLoop, Self.cfMode(.tracking))
        }
    }

    /// CF's name for `mode`. CF tells the common pseudo-mode by pointer, so `.common` must be CF's own constant.
    static func cfMode(_ mode: LoopMode) -> CFString {
        switch mode {
        case .default: kCFRunLoopDefaultMode
        case .common: kCFRunLoopCommonModes
        default: CFStringCreateWithCString(kCFAllocatorSystemDefault, mode.name, CFStringBuiltInEncodings.UTF8.rawValue)
        }
    }

    var isWaiting: Bool {
        CFRunLoopIsWaiting(self.runLoop)
    }

    func addObserver(name: String, activities: LoopActivity, mode: LoopMode, order: Int, repeats: Bool,
                     action: (@Sendable (LoopActivity) -> Void)?) {
        let observer = CFRunLoopObserverCreateWithHandler(
            kCFAllocatorSystemDefault, CFOptionFlags(activities.rawValue), repeats, CFIndex(order)
        ) { _, cfActivity in
            let activity = LoopActivity(rawValue: UInt32(cfActivity.rawValue))
            self.log("\(name) \(activity)")
            action?(activity)
        }
        CFRunLoopAddObserver(self.runLoop, observer, Self.cfMode(mode))
    }

    func addTimers(_ timers: [(name: String, delay: Duration)], mode: LoopMode, action: (@Sendable () -> Void)?) {
        let now = CFAbsoluteTimeGetCurrent()
        for (name, delay) in timers {
            let fireDate = now + Self.seconds(delay)
            let timer = CFRunLoopTimerCreateWithHandler(kCFAllocatorSystemDefault, fireDate, 0, 0, 0) { _ in
                self.log(name)
                action?()
            }
            CFRunLoopAddTimer(self.runLoop, timer, Self.cfMode(mode))
        }
    }

    func addKeepAlive(in mode: LoopMode) {
        let timer = CFRunLoopTimerCreateWithHandler(
            kCFAllocatorSystemDefault, CFAbsoluteTimeGetCurrent() + 3600, 0, 0, 0) { _ in }
        CFRunLoopAddTimer(self.runLoop, timer, Self.cfMode(mode))
    }

    func addSource(name: String, order: Int, modes: [LoopMode], action: (@Sendable () -> Void)?)
        -> any DifferentialSource {
        let source = CFSignalledSource(order: order) {
            self.log(name)
            action?()
        }
        for mode in modes {
            CFRunLoopAddSource(self.runLoop, source.source, Self.cfMode(mode))
        }
        return source
    }

    func addBlock(name: String, mode: LoopMode, action: (@Sendable () -> Void)?) {
        CFRunLoopPerformBlock(self.runLoop, Self.cfMode(mode)) {
            self.log(name)
            action?()
        }
    }

    func addCommonMode(_ mode: LoopMode) {
        CFRunLoopAddCommonMode(self.runLoop, Self.cfMode(mode))
    }

    func runMode(_ mode: LoopMode, seconds: Double, returnAfterSourceHandled: Bool) -> RunResult {
        let result: RunResult = switch CFRunLoopRunInMode(Self.cfMode(mode), seconds, returnAfterSourceHandled) {
        case .finished: .finished
        case .stopped: .stopped
        case .timedOut: .timedOut
        case .handledSource: .handledSource
        @unknown default: fatalError("CFRunLoopRunInMode returned an unknown result")
        }
        self.log("\(mode) → \(result)")
        return result
    }

    func stop() {
        CFRunLoopStop(self.runLoop)
    }

    func wakeUp() {
        CFRunLoopWakeUp(self.runLoop)
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// A CF version-0 source whose perform callback calls a closure.
// @unchecked Sendable: CFRunLoopSourceSignal is safe from any thread; `source` is otherwise used on its loop's thread.
final class CFSignalledSource: DifferentialSource, @unchecked Sendable {
    /// What the source's `info` points at; CF retains it through the context's retain and release callbacks.
    private final class Callback {
        let perform: () -> Void
        init(_ perform: @escaping () -> Void) { self.perform = perform }
    }

    let source: CFRunLoopSource

    init(order: Int, _ perform: @escaping () -> Void) {
        let callback = Callback(perform)
        var context = CFRunLoopSourceContext(
            version: 0,
            info: Unmanaged.passUnretained(callback).toOpaque(),
            retain: { info in UnsafeRawPointer(Unmanaged<Callback>.fromOpaque(info!).retain().toOpaque()) },
            release: { info in Unmanaged<Callback>.fromOpaque(info!).release() },
            copyDescription: nil,
            equal: nil,
            hash: nil,
            schedule: nil,
            cancel: nil,
            perform: { info in Unmanaged<Callback>.fromOpaque(info!).takeUnretainedValue().perform() }
        )
        self.source = withExtendedLifetime(callback) {  // until CF has retained it
            CFRunLoopSourceCreate(kCFAllocatorSystemDefault, CFIndex(order), &context)
        }
    }

    func signal() {
        CFRunLoopSourceSignal(self.source)
    }
}

// MARK: - LoopKit

/// The calling thread's `Loop.current` behind `DifferentialLoop`.
final class LoopKitDifferentialLoop: DifferentialLoop {
    let trace: Recorder<String>
    let loop: Loop
    var isCoreFoundation: Bool { false }

    init(trace: Recorder<String>) {
        self.trace = trace
        self.loop = Loop.current
    }

    var isWaiting: Bool {
        self.loop.isWaiting
    }

    func addObserver(name: String, activities: LoopActivity, mode: LoopMode, order: Int, repeats: Bool,
                     action: (@Sendable (LoopActivity) -> Void)?) {
        self.loop.add(LoopObserver(activities: activities, repeats: repeats, order: order) { _, activity in
            self.log("\(name) \(activity)")
            action?(activity)
        }, forMode: mode)
    }

    func addTimers(_ timers: [(name: String, delay: Duration)], mode: LoopMode, action: (@Sendable () -> Void)?) {
        let now = self.loop.now
        for (name, delay) in timers {
            self.loop.add(LoopTimer(fireAt: now + delay) { _ in
                self.log(name)
                action?()
            }, forMode: mode)
        }
    }

    func addKeepAlive(in mode: LoopMode) {
        self.loop.add(LoopTimer(interval: .seconds(3600)) { _ in }, forMode: mode)
    }

    func addSource(name: String, order: Int, modes: [LoopMode], action: (@Sendable () -> Void)?)
        -> any DifferentialSource {
        let source = LoopSource(order: order) { _ in
            self.log(name)
            action?()
        }
        for mode in modes {
            self.loop.add(source, forMode: mode)
        }
        return source
    }

    func addBlock(name: String, mode: LoopMode, action: (@Sendable () -> Void)?) {
        self.loop.perform(inModes: [mode]) {
            self.log(name)
            action?()
        }
    }

    func addCommonMode(_ mode: LoopMode) {
        self.loop.addCommonMode(mode)
    }

    func runMode(_ mode: LoopMode, seconds: Double, returnAfterSourceHandled: Bool) -> RunResult {
        let deadline = seconds <= 0 ? self.loop.now : self.loop.now + .nanoseconds(Int64(seconds * 1e9))
        let result = self.loop.run(mode: mode, before: deadline, returnAfterSourceHandled: returnAfterSourceHandled)
        self.log("\(mode) → \(result)")
        return result
    }

    func stop() {
        self.loop.stop()
    }

    func wakeUp() {
        self.loop.wakeUp()
    }
}

extension LoopSource: DifferentialSource {}
