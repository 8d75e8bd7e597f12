import HoistHTTP
import Testing

/// `printable`: text from outside as one line a terminal shows as it is, bounded on request.
@Suite struct PrintableTextTests {
    @Test func linesControlsAndReorderingCharactersAreShownEscaped() {
        #expect(printable("a\nhoist: forged") == #"a\u{A}hoist: forged"#)
        #expect(printable("a\r\nb\u{0B}c\u{0C}d") == #"a\u{D}\u{A}b\u{B}c\u{C}d"#)
        #expect(printable("\u{1B}]0;owned\u{07}") == #"\u{1B}]0;owned\u{7}"#)
        #expect(printable("x\u{7F}\u{85}\u{9B}y") == #"x\u{7F}\u{85}\u{9B}y"#)
        #expect(printable("evil\u{202E}txt.exe\u{2066}\u{2069}\u{200E}\u{200F}\u{061C}")
            == #"evil\u{202E}txt.exe\u{2066}\u{2069}\u{200E}\u{200F}\u{61C}"#)
        #expect(printable("a\u{2028}b\u{2029}c") == #"a\u{2028}b\u{2029}c"#)
        // A tab moves no line; letters of any script and emoji stay as they are.
        #expect(printable("a\tb é 日本 🙂") == "a\tb é 日本 🙂")
    }

    @Test func aMessageOfSeveralLinesKeepsItsNewlinesOnlyWhenAsked() {
        #expect(printable("one\ntwo\r", keepingNewlines: true) == #"one\#ntwo\u{D}"#)
    }

    @Test func aLimitCutsTheEscapedTextAndSaysSo() {
        let long = String(repeating: "x", count: 3000)
        #expect(printable(long, limit: outsideTextLimit) == String(repeating: "x", count: 500) + "…")
        #expect(printable("short", limit: outsideTextLimit) == "short")
        #expect(printable("\n\n\n", limit: 12) == #"\u{A}\u{A}"# + "…")   // 10 escaped, never a cut escape
        #expect(printable(String(repeating: "y", count: 500), limit: 500).count == 500)
    }
}
