import Foundation
// Foundation's Process, with nothing else: LeakSanitizer reports the weak-reference side table Process.run forms.
let process = Process()
process.executableURL = URL(fileURLWithPath: "/bin/true")
try process.run()
process.waitUntilExit()
