import Foundation

/// A number of bytes: `512`, `4KiB`, `10 MB`, `1.5GiB` (KB, MB, GB, TB are powers of 1000;
/// KiB, MiB, GiB, TiB of 1024).
public struct ByteSize: Decodable, Sendable, Equatable, Comparable, CustomStringConvertible {
    public let bytes: Int64
    public init(bytes: Int64) { self.bytes = bytes }
    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, ByteSize.parse) }

    static let units: [(String, Double)] = [
        ("TiB", 1_099_511_627_776), ("GiB", 1_073_741_824), ("MiB", 1_048_576), ("KiB", 1024),
        ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("kB", 1e3), ("B", 1),
    ]

    public static func parse(_ text: String) throws(ValueError) -> ByteSize {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var number = trimmed
        var factor = 1.0
        for (unit, value) in units where trimmed.hasSuffix(unit) {
            number = String(trimmed.dropLast(unit.count)).trimmingCharacters(in: .whitespaces)
            factor = value
            break
        }
        guard let amount = Double(number), amount >= 0, amount.isFinite else {
            if let suggestion = suggestion(for: trimmed) {
                throw ValueError("bad size '\(text)': units are case-sensitive (did you mean '\(suggestion)'?)")
            }
            throw ValueError("bad size '\(text)': write a number with an optional unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB")
        }
        let bytes = (amount * factor).rounded()
        guard bytes < ByteSize.largest else {
            throw ValueError("size '\(text)' is too large: at most 8 EiB (9223372036854775807 bytes)")
        }
        return ByteSize(bytes: Int64(bytes))
    }

    /// `text` with its unit spelled right, when only the unit's case is wrong (`50mb` -> `50MB`).
    package static func suggestion(for text: String) -> String? {
        for (unit, _) in units where text.lowercased().hasSuffix(unit.lowercased()) {
            let number = String(text.dropLast(unit.count))
            guard let amount = Double(number.trimmingCharacters(in: .whitespaces)), amount >= 0 else { return nil }
            return number + unit
        }
        return nil
    }

    /// The first size that does not fit an `Int64` (2^63), as a `Double`.
    static let largest = 9_223_372_036_854_775_808.0

    public static func < (a: ByteSize, b: ByteSize) -> Bool { a.bytes < b.bytes }
    public var description: String { "\(bytes) B" }
}

