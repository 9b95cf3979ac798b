/// A failure that ends a demo with exit status 1 (not a usage error): a pipe that cannot be opened, a trace file
/// that cannot be written.
struct DemoError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
