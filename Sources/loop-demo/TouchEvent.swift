/// One touch event, as an input thread sends it to the loop: a finger goes down, moves, or lifts.
///
/// On the wire it is a fixed-size text record such as `"D 0120 0300\n"`: fixed-size so that the reader can take
/// exactly one record per callback (the level-triggered source calls again while more are waiting), and small so
/// that a write is atomic (under `PIPE_BUF`) and a record never arrives torn.
struct TouchEvent: Equatable, Sendable, CustomStringConvertible {
    enum Phase: Character, Sendable {
        case down = "D"
        case moved = "M"
        case up = "U"
    }

    var phase: Phase
    var x: Int
    var y: Int

    /// The size of a record on the wire.
    static let recordSize = 12

    /// The wire record: phase, x and y (0...9999), newline.
    var record: [UInt8] {
        Array("\(self.phase.rawValue) \(TouchEvent.digits(self.x)) \(TouchEvent.digits(self.y))\n".utf8)
    }

    /// Decodes a wire record; `nil` if it is not one.
    init?(record: [UInt8]) {
        guard record.count == TouchEvent.recordSize, record[1] == 32, record[6] == 32, record[11] == 10,
              let phase = Phase(rawValue: Character(Unicode.Scalar(record[0]))),
              let x = Int(String(decoding: record[2..<6], as: UTF8.self)),
              let y = Int(String(decoding: record[7..<11], as: UTF8.self))
        else { return nil }
        self.init(phase: phase, x: x, y: y)
    }

    init(phase: Phase, x: Int, y: Int) {
        self.phase = phase
        self.x = x
        self.y = y
    }

    private static func digits(_ value: Int) -> String {
        let text = String(min(max(value, 0), 9999))
        return String(repeating: "0", count: 4 - text.count) + text
    }

    var description: String {
        switch self.phase {
        case .down: "touch down at (\(self.x), \(self.y))"
        case .moved: "touch moved to (\(self.x), \(self.y))"
        case .up: "touch up at (\(self.x), \(self.y))"
        }
    }
}
