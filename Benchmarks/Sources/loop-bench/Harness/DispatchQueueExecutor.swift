import Dispatch

/// A serial executor that runs jobs on a serial `DispatchQueue`: what a Linux user writes to put actors on a queue,
/// since this platform's Dispatch has no `DispatchSerialQueue` (whose queues are executors on Apple's platforms).
final class DispatchQueueExecutor: SerialExecutor {  // checked Sendable: its one stored property is a `let`
    let queue: DispatchQueue

    init(label: String) {
        self.queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
