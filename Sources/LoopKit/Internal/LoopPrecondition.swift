/// Traps with `message` unless `condition` holds, in every build.
///
/// `precondition`'s message is stripped under `-O`, so a user of a release build would see only "Fatal error" with
/// no word of which call they got wrong; `fatalError` keeps its message. Every check on a caller's input goes through
/// this, with a message that names the call and the problem.
@inline(__always)
func loopPrecondition(
    _ condition: @autoclosure () -> Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() {
        fatalError(message(), file: file, line: line)
    }
}
