// ThreadSanitizer reports a race on every value a `Synchronization.Mutex` guards on Linux, without LoopKit:
//     swiftc -sanitize=thread -g mutex.swift -o mutex && ./mutex
// prints "WARNING: ThreadSanitizer: Swift access race" inside `withLock`, although every access holds the lock (TSan
// does not see the futex hand-off). This is why LoopKit and its tests use `LoopLock` (a pthread mutex) and need no
// TSan suppression.
import Dispatch
import Synchronization

final class Box: Sendable {
    let values = Mutex<[Int]>([])
}

let box = Box()
let group = DispatchGroup()
for thread in 0..<4 {
    DispatchQueue.global().async(group: group) {
        for index in 0..<20_000 {
            box.values.withLock { values in
                values.append(thread * index)
                if values.count > 64 { values.removeAll() }
            }
        }
    }
}
group.wait()
print(box.values.withLock { $0.count })
