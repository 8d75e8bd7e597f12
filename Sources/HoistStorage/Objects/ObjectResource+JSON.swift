import Foundation

/// The object resource's JSON, read and written by hand: every small upload writes one (the
/// multipart body, a local bucket's sidecar) and reads one (the server's answer), and
/// Foundation's `JSONEncoder`/`JSONDecoder` cost about an eighth of the CPU of a 4 KiB upload.
/// The result is the `Codable` form's, byte for byte when written and field for field when read
/// (`ObjectResourceJSONTests` checks both against Foundation on random resources).
extension ObjectResource {
    /// The resource as JSON: the fields that are set, in the `Codable` form's order (custom
    /// metadata by key).
    public func jsonData() -> Data {
        var out = [UInt8]()
        out.reserveCapacity(256)
        appendJSON(to: &out)
        return Data(out)
    }

    /// Appends `jsonData()`'s bytes to `out`.
    func appendJSON(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        func key(_ name: String) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            Self.appendString(name, to: &out)
            out.append(UInt8(ascii: ":"))
        }
        func field(_ name: String, _ value: String?) {
            guard let value else { return }
            key(name)
            Self.appendString(value, to: &out)
        }
        field("bucket", bucket)
        field("name", name)
        field("size", size.map(String.init))
        field("md5Hash", md5Hash)
        field("crc32c", crc32c)
        field("generation", generation.map(String.init))
        field("metageneration", metageneration.map(String.init))
        field("timeCreated", timeCreated.map(RFC3339.string))
        field("updated", updated.map(RFC3339.string))
        for header in Self.headerFields { field(header.name, self[keyPath: header.keyPath]) }
        if let metadata {
            key("metadata")
            out.append(UInt8(ascii: "{"))
            for (index, pair) in metadata.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.appendString(pair.key, to: &out)
                out.append(UInt8(ascii: ":"))
                Self.appendString(pair.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Whether a string's bytes hold a quote, a backslash or a control character (a loop over
    /// the span: `utf8.contains(where:)` cost 10 instructions a byte).
    private static func needsEscape(_ bytes: Span<UInt8>) -> Bool {
        for index in bytes.indices {
            let byte = bytes[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
        }
        return false
    }

    private static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most names and values need no escape: copied whole (a byte at a time cost 40
        // instructions a byte, 8,800 a small upload).
        if !needsEscape(text.utf8Span.span) {
            out.append(contentsOf: text.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Reads a GCS object resource: the fields Hoist knows, every other key (ACLs, owners,
    /// encryption) skipped whatever it holds.
    /// - Throws: `ObjectResource.JSONError` for anything that is not such a JSON object (the
    ///   caller reports the server's answer).
    public init(json data: Data) throws {
        var reader = JSONReader(data.withUnsafeBytes { Array($0) })   // (a copy, not an element-wise one)
        self.init()
        try reader.expect(UInt8(ascii: "{"))
        if try reader.consume(UInt8(ascii: "}")) { try reader.end(); return }
        repeat {
            let field = try reader.field(in: Self.jsonFields)
            try reader.expect(UInt8(ascii: ":"))
            switch field {
            case .bucket: bucket = try reader.optionalString()
            case .name: name = try reader.optionalString()
            case .md5Hash: md5Hash = try reader.optionalString()
            case .crc32c: crc32c = try reader.optionalString()
            case .size: size = try reader.integer()
            case .generation: generation = try reader.integer()
            case .metageneration: metageneration = try reader.integer()
            case .timeCreated: timeCreated = try reader.date()
            case .updated: updated = try reader.date()
            case .metadata: metadata = try reader.stringMap()
            case .header(let index): self[keyPath: Self.headerFields[index].keyPath] = try reader.optionalString()
            case nil: try reader.skipValue(depth: 0)
            }
        } while try reader.consume(UInt8(ascii: ","))
        try reader.expect(UInt8(ascii: "}"))
        try reader.end()
    }

    /// The keys read, as bytes (a server's answer's keys are matched without making strings).
    fileprivate static let jsonFields: [(name: [UInt8], field: JSONField)] = {
        let fixed: [(String, JSONField)] = [
            ("bucket", .bucket), ("name", .name), ("md5Hash", .md5Hash), ("crc32c", .crc32c), ("size", .size),
            ("generation", .generation), ("metageneration", .metageneration), ("timeCreated", .timeCreated),
            ("updated", .updated), ("metadata", .metadata),
        ]
        return (fixed + headerFields.enumerated().map { ($1.name, .header($0)) }).map { (Array($0.utf8), $1) }
    }()

    /// JSON that is not an object resource.
    public struct JSONError: Error, CustomStringConvertible {
        public let description: String
    }
}

/// A key of the object resource that `init(json:)` reads.
private enum JSONField {
    case bucket, name, md5Hash, crc32c, size, generation, metageneration, timeCreated, updated, metadata
    /// `ObjectResource.headerFields[index]`.
    case header(Int)
}

/// A forward-only reader of JSON bytes (RFC 8259), with a depth bound for skipped values.
private struct JSONReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    private func failure(_ what: String) -> ObjectResource.JSONError {
        ObjectResource.JSONError(description: "\(what) at byte \(index)")
    }

    private mutating func skipSpace() {
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    mutating func consume(_ byte: UInt8) throws -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func expect(_ byte: UInt8) throws {
        guard try consume(byte) else { throw failure("expected '\(Character(UnicodeScalar(byte)))'") }
    }

    mutating func end() throws {
        skipSpace()
        guard index == bytes.count else { throw failure("text after the object") }
    }

    /// Consumes `word` (ASCII) when the bytes at `index` spell it (no copies: every string
    /// field of an answer asks for `null` first).
    private mutating func literal(_ word: [UInt8]) -> Bool {
        guard index + word.count <= bytes.count else { return false }
        for offset in word.indices where bytes[index + offset] != word[offset] { return false }
        index += word.count
        return true
    }

    private static let null = Array("null".utf8), `true` = Array("true".utf8), `false` = Array("false".utf8)
    private static let unicodeEscape = Array("\\u".utf8)

    mutating func null() -> Bool {
        skipSpace()
        return literal(Self.null)
    }

    mutating func optionalString() throws -> String? {
        null() ? nil : try string()
    }

    mutating func string() throws -> String {
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a string") }
        index += 1
        let start = index
        // Most strings have no escapes: one slice, decoded once.
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
            index += 1
        }
        guard index < bytes.count else { throw failure("unterminated string") }
        if bytes[index] == UInt8(ascii: "\"") {
            index += 1
            return try utf8(bytes[start..<index - 1])
        }
        var text = Array(bytes[start..<index])
        while true {
            guard index < bytes.count else { throw failure("unterminated string") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return try utf8(text[...])
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw failure("unterminated string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard literal(Self.unicodeEscape) else { throw failure("a lone surrogate") }
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let value = Unicode.Scalar(scalar) else { throw failure("a lone surrogate") }
                    text += Array(String(Character(value)).utf8)
                default:
                    throw failure("a bad escape")
                }
            case 0..<0x20:
                throw failure("a control character in a string")
            default:
                text.append(byte)
            }
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("a short \\u escape") }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            guard let digit = Character(UnicodeScalar(byte)).hexDigitValue else { throw failure("a bad \\u escape") }
            value = value << 4 | UInt32(digit)
        }
        index += 4
        return value
    }

    /// ASCII needs no validating (`String(validating:)` looks up generic metadata every call).
    private func utf8(_ slice: ArraySlice<UInt8>) throws -> String {
        if !slice.contains(where: { $0 >= 0x80 }) { return String(decoding: slice, as: UTF8.self) }
        guard let text = String(validating: slice, as: UTF8.self) else { throw failure("a string that is not UTF-8") }
        return text
    }

    /// The field a key names in `table`, nil for another key. A plain ASCII key (every key of a
    /// server's answer) is matched as bytes; one with escapes or other text is read as a string.
    mutating func field(in table: [(name: [UInt8], field: JSONField)]) throws -> JSONField? {
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a string") }
        let start = index + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20, bytes[end] < 0x80 {
            end += 1
        }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            index = end + 1
            let key = bytes[start..<end]
            return table.first { $0.name.count == key.count && $0.name.elementsEqual(key) }?.field
        }
        let key = Array(try string().utf8)
        return table.first { $0.name == key }?.field
    }

    /// A 64-bit integer, as GCS writes them (a decimal string) or as a number.
    mutating func integer() throws -> Int64? {
        if null() { return nil }
        skipSpace()
        let quoted = index < bytes.count && bytes[index] == UInt8(ascii: "\"")
        let start = quoted ? index + 1 : index
        var end = start
        if end < bytes.count, bytes[end] == UInt8(ascii: "-") { end += 1 }
        while end < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) { end += 1 }
        if quoted, end == bytes.count || bytes[end] != UInt8(ascii: "\"") {
            // Escapes, a `+`, or not a number: as Swift reads the string.
            let text = try string()
            guard let value = Int64(text) else { throw failure("not an integer: \(text)") }
            return value
        }
        guard let value = Self.int64(bytes[start..<end]) else { throw failure("expected an integer") }
        index = quoted ? end + 1 : end
        return value
    }

    /// `-`? then digits, as an `Int64`; nil when empty or out of range.
    private static func int64(_ text: ArraySlice<UInt8>) -> Int64? {
        var at = text.startIndex
        let negative = at < text.endIndex && text[at] == UInt8(ascii: "-")
        if negative { at += 1 }
        guard at < text.endIndex else { return nil }
        var value: Int64 = 0
        while at < text.endIndex {
            let digit = Int64(text[at] &- UInt8(ascii: "0"))
            let (shifted, over) = value.multipliedReportingOverflow(by: 10)
            let (next, out) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            if over || out { return nil }
            value = next
            at += 1
        }
        return value
    }

    mutating func date() throws -> Date? {
        guard let text = try optionalString() else { return nil }
        guard let date = RFC3339.date(text) else { throw failure("not an RFC 3339 time: \(text)") }
        return date
    }

    mutating func stringMap() throws -> [String: String]? {
        if null() { return nil }
        try expect(UInt8(ascii: "{"))
        var result: [String: String] = [:]
        if try consume(UInt8(ascii: "}")) { return result }
        repeat {
            let key = try string()
            try expect(UInt8(ascii: ":"))
            result[key] = try string()
        } while try consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
        return result
    }

    /// Skips a string as `string()` reads it, with the same checks, without making a `String`
    /// of it (an answer's skipped fields, such as `selfLink` and `acl`, are most of its bytes).
    mutating func skipString() throws {
        skipSpace()
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            index += 1
            while index < bytes.count, bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20, bytes[index] < 0x80 {
                index += 1
                if bytes[index - 1] == UInt8(ascii: "\"") { return }
            }
        }
        // An escape, a control character, non-ASCII bytes or the end: read it whole.
        index = start
        _ = try string()
    }

    /// A byte of a JSON number: `+-0123456789.eE`.
    private static func isNumberByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "e"),
             UInt8(ascii: "E"): true
        default: false
        }
    }

    /// Skips any value, nested at most 64 deep.
    mutating func skipValue(depth: Int) throws {
        guard depth < 64 else { throw failure("nesting deeper than 64") }
        skipSpace()
        guard index < bytes.count else { throw failure("expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "{"):
            index += 1
            if try consume(UInt8(ascii: "}")) { return }
            repeat {
                try skipString()
                try expect(UInt8(ascii: ":"))
                try skipValue(depth: depth + 1)
            } while try consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "}"))
        case UInt8(ascii: "["):
            index += 1
            if try consume(UInt8(ascii: "]")) { return }
            repeat { try skipValue(depth: depth + 1) } while try consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "]"))
        default:
            if literal(Self.true) || literal(Self.false) || literal(Self.null) { return }
            let start = index
            while index < bytes.count, Self.isNumberByte(bytes[index]) { index += 1 }
            guard index > start else { throw failure("expected a value") }
        }
    }
}
