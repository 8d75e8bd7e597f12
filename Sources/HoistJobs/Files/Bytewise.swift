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

    public static func == (a: Bytewise, b: Bytewise) -> Bool { a.text.utf8.elementsEqual(b.text.utf8) }

    public static func < (a: Bytewise, b: Bytewise) -> Bool { a.text.utf8.lexicographicallyPrecedes(b.text.utf8) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(text.utf8.count)
        for byte in text.utf8 { hasher.combine(byte) }
    }
}

extension String {
    /// Whether the two strings are the same bytes (not merely canonically equivalent).
    public func hasSameBytes(as other: String) -> Bool { utf8.elementsEqual(other.utf8) }
}
