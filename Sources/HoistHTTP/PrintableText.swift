/// DEL, the C1 controls, and the characters that reorder or break the text after them
/// (bidirectional marks, overrides and isolates; Unicode's line and paragraph separators): what
/// a terminal obeys beyond the C0 controls. `printable` escapes them, and so do JSON lines
/// (which escape C0 themselves).
public func reordersOrControlsTerminal(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x7f...0x9f, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
    default: return false
    }
}

/// The most characters of a text from outside (a server's error message, a database's, a
/// journal row, a hook's error) that a message quotes: `printable(text, limit: outsideTextLimit)`.
public let outsideTextLimit = 500

/// `text` as one line of visible text for a terminal: control characters (newlines and carriage
/// returns that would forge a line of Hoist's own, escape sequences that retitle or recolour the
/// terminal) and the characters that reorder or break what follows them (bidirectional
/// overrides and isolates, which make `evil\u{202E}txt.exe` show as `evilexe.txt`; Unicode's
/// line and paragraph separators) shown escaped, as `\u{1B}`; a tab stays. With `limit`, at
/// most that many Unicode scalars of the result (an escape is never cut), then `…`.
///
/// The rule (ARCHITECTURE.md, "Text from outside is one line"): whatever a server, a database,
/// a journal row or a hook says goes through it, bounded (`limit: outsideTextLimit`), where it
/// enters a message, and everything printed goes through it again. With `keepingNewlines`, a
/// message of several lines Hoist wrote itself (a manifest's located error) keeps them; what
/// it quotes from outside is one line already.
public func printable(_ text: String, keepingNewlines: Bool = false, limit: Int? = nil) -> String {
    func hidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A: return !keepingNewlines
        case 0x09: return false
        case 0..<0x20: return true
        default: return reordersOrControlsTerminal(scalar)
        }
    }
    let limit = limit ?? .max
    // Most text has nothing to escape and is short enough: as it is, no new string.
    if !text.unicodeScalars.contains(where: hidden), limit == .max || text.unicodeScalars.count <= limit { return text }
    var result = String.UnicodeScalarView()
    var count = 0
    for scalar in text.unicodeScalars {
        let piece = hidden(scalar) ? Array(("\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}").unicodeScalars) : [scalar]
        count += piece.count
        guard count <= limit else { return String(result) + "…" }
        result.append(contentsOf: piece)
    }
    return String(result)
}
