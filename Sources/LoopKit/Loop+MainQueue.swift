import CLoopKitSystem

/// The main queue on the main loop: while the main thread runs `Loop.main` in a common mode, the work of
/// `DispatchQueue.main` (and so of `@MainActor` code, whose executor it is on Linux) runs as a source, as CFRunLoop
/// serves it. In a mode that is not common, the main queue waits.
extension Loop {
    /// Adds the main-queue source to the common modes, the first time the main thread runs the main loop. Loop
    /// thread (the main thread).
    func serveMainQueueIfNeeded() {
        guard self.isMainLoop, !self.isServingMainQueue else { return }
        self.isServingMainQueue = true
        let handle = cloopkit_main_queue_handle()
        guard handle >= 0 else { return }  // a libdispatch without the run-loop hooks: nothing to serve
        // A run nested in a main-queue block calls this again when more work is queued meanwhile: the drain reads
        // the handle, and libdispatch's callback returns at once while its outer call runs (its own guard), so the
        // nested run neither runs main-queue work out of order nor spins; the outer drain pokes the handle again for
        // what is left. The same as CF, which leaves the main queue out of such a run.
        let source = LoopDescriptorSource(descriptor: handle, events: .readable) { _, _ in
            cloopkit_main_queue_drain(handle)
        }
        self.add(source, forMode: .common)
    }
}
