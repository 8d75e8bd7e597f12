/// A string compared, ordered and hashed by its UTF-8 bytes.
///
/// Swift's `String` compares and hashes by canonical equivalence: "café" written with U+00E9
/// and written with "e" + U+0301 are one string to it. File systems, SQLite, PostgreSQL and
/// buckets keep them apart: they are two files, two journal rows, two objects. Paths and object
/// names are keyed and compared as bytes (`Bytewise`, `String.hasSameBytes(as:)`), or a run
/// merges the two files into one row and uploads both again each time
/// (`NameBytesTests.canonicallyEquivalentTwinsAreTwoFilesToTheJournal`).
public struct Bytewise: Hashable, Comparable, Sendable {
    public let text: String

    public init(_ text: String) { self.text = text }

    /// A journal row's key: its file's path and its destination, joined by a NUL (which
    /// neither can hold), compared as bytes.
    public static func row(source: String, destination: String) -> Bytewise { Bytewise(source + "\u{0}" + destination) }

    public static func == (a: Bytewise, b: Bytewise) -> Bool { a.text.hasSameBytes(as: b.text) }

    public static func < (a: Bytewise, b: Bytewise) -> Bool { a.text.precedesBytewise(b.text) }

    /// String's own hash (its fast path over the bytes): canonically equivalent twins share it,
    /// a collision that `==` then tells apart.
    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}

extension String {
    /// Whether the two strings are the same bytes (not merely canonically equivalent).
    /// A walk compares every file's path with its journal row's: a loop over the two spans,
    /// several times faster than `utf8.elementsEqual`'s generic one.
    public func hasSameBytes(as other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        let mine = utf8Span.span, theirs = other.utf8Span.span
        for index in mine.indices where mine[index] != theirs[index] { return false }
        return true
    }

    /// Whether this string's UTF-8 bytes start with `prefix`'s (`hasPrefix` compares canonically:
    /// the NFD form of a prefix would pass it).
    public func hasPrefixBytewise(_ prefix: String) -> Bool {
        guard utf8.count >= prefix.utf8.count else { return false }
        let mine = utf8Span.span, theirs = prefix.utf8Span.span
        for index in theirs.indices where mine[index] != theirs[index] { return false }
        return true
    }

    /// Whether this string's UTF-8 bytes come before `other`'s (a shorter prefix first), as
    /// SQLite and PostgreSQL (C collation) order them. A loop over the two spans: the generic
    /// `utf8.lexicographicallyPrecedes` took ten times the instructions, once per walked file.
    public func precedesBytewise(_ other: String) -> Bool { bytesPrecede(utf8Span.span, other.utf8Span.span) }
}

/// Whether bytes `a` come before bytes `b` (a shorter prefix first).
func bytesPrecede(_ a: Span<UInt8>, _ b: Span<UInt8>) -> Bool {
    let common = min(a.count, b.count)
    var index = 0
    while index < common {
        let (x, y) = (a[index], b[index])
        if x != y { return x < y }
        index += 1
    }
    return a.count < b.count
}
