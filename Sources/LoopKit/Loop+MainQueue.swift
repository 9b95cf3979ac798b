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
        // A run nested in a main-queue block (a modal loop in @MainActor code) leaves the main queue out, as CF's
        // does: libdispatch's callback would return at once inside its outer call (its own guard), so the nested run
        // would wake for the handle and call that a handled source while no work ran. The handle is not watched until
        // the drain returns; libdispatch pokes it again then for what is left.
        let source = LoopDescriptorSource(descriptor: handle, events: .readable) { [unowned self] source, _ in
            source.events = []
            let wasDraining = self.isDrainingMainQueue
            self.isDrainingMainQueue = true
            cloopkit_main_queue_drain(handle)
            self.isDrainingMainQueue = wasDraining
            source.events = .readable
        }
        self.mainQueueSource = source
        self.add(source, forMode: .common)
    }

    /// Whether the only source or timer of `items` is the main queue, inside main-queue work: the mode is empty then,
    /// as CF's `__CFRunLoopModeIsEmpty` has it, and a run of it nested in that work returns `.finished` instead of
    /// waiting for work that cannot run before the run returns. Loop thread.
    func holdsOnlyTheMainQueueWhileItIsBusy(_ items: ModeItems) -> Bool {
        self.isDrainingMainQueue && items.timers.count == 0 && items.sources.isEmpty
            && items.descriptorSources.count == 1 && items.descriptorSources[0] === self.mainQueueSource
    }
}
