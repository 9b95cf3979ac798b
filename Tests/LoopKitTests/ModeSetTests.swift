import Testing
@testable import LoopKit

@Suite("Mode sets")
struct ModeSetTests {
    @Test func aModeSetHoldsEachModeOnceAndIteratesInInsertionOrder() {
        var modes: ModeSet = []
        #expect(modes.isEmpty)
        let inserted = [modes.insert(.default), modes.insert(.default), modes.insert(.tracking), modes.insert("custom")]
        #expect(inserted == [true, false, true, true])
        #expect(modes.count == 3)
        #expect(Array(modes) == [.default, .tracking, "custom"])
        #expect(modes.contains(.tracking) && !modes.contains("other"))
        let removed = [modes.remove(.default), modes.remove(.default)]
        #expect(removed == [true, false])
        #expect(Array(modes) == [.tracking, "custom"])
        let rest = [modes.remove("custom"), modes.remove(.tracking)]
        #expect(rest == [true, true])
        #expect(modes.isEmpty && Array(modes).isEmpty)
    }
}
