/// Carries a loop-confined value into a `@Sendable` closure that will run on that same loop's thread, such as a
/// block given to `Loop.perform`.
///
/// The compiler cannot know that `perform` runs its block on the loop's thread; this box says so at the one place
/// where it matters. Unwrap it only on the loop's thread.
// @unchecked Sendable: `value` is created on the loop's thread and read only there (inside a block the loop runs).
struct LoopConfined<Value: AnyObject>: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
