/// An object a loop tells of what it does (a tracer, a hitch monitor, a host driver), held weakly, with an identity
/// that outlives it: it is detached by that identity, from its `deinit` too, without loading the weak reference while
/// the list changes (the last release of one would run that `deinit` in the middle of the change).
struct WeakAttachment<Object: AnyObject> {
    weak var object: Object?
    let identity: ObjectIdentifier

    init(_ object: Object) {
        self.object = object
        self.identity = ObjectIdentifier(object)
    }
}
