import Foundation

/// An object's metadata as the GCS JSON API spells it: the value backends exchange.
///
/// `StorageMetadata` is the mutable class users see; `ObjectResource` is its `Sendable`
/// twin that crosses threads and is stored beside local objects. Its `Codable` form is the
/// GCS object resource (`size` and `generation` as decimal strings, RFC 3339 times,
/// custom metadata under `metadata`).
public struct ObjectResource: Codable, Sendable, Equatable {
    public var bucket: String?
    /// The object's full path in its bucket (GCS calls it `name`).
    public var name: String?
    public var size: Int64?
    /// Base64 of the MD5 digest of the object's bytes.
    public var md5Hash: String?
    /// Base64 of the big-endian CRC32C of the object's bytes.
    public var crc32c: String?
    public var generation: Int64?
    public var metageneration: Int64?
    public var timeCreated: Date?
    public var updated: Date?
    public var contentType: String?
    public var cacheControl: String?
    public var contentDisposition: String?
    public var contentEncoding: String?
    public var contentLanguage: String?
    /// Custom metadata (GCS: `metadata`).
    public var metadata: [String: String]?

    public init(
        bucket: String? = nil, name: String? = nil, size: Int64? = nil, md5Hash: String? = nil,
        crc32c: String? = nil, generation: Int64? = nil, metageneration: Int64? = nil,
        timeCreated: Date? = nil, updated: Date? = nil, contentType: String? = nil,
        cacheControl: String? = nil, contentDisposition: String? = nil, contentEncoding: String? = nil,
        contentLanguage: String? = nil, metadata: [String: String]? = nil
    ) {
        self.bucket = bucket
        self.name = name
        self.size = size
        self.md5Hash = md5Hash
        self.crc32c = crc32c
        self.generation = generation
        self.metageneration = metageneration
        self.timeCreated = timeCreated
        self.updated = updated
        self.contentType = contentType
        self.cacheControl = cacheControl
        self.contentDisposition = contentDisposition
        self.contentEncoding = contentEncoding
        self.contentLanguage = contentLanguage
        self.metadata = metadata
    }

    /// Only the fields a client may write (the rest are the server's).
    public var writable: ObjectResource {
        ObjectResource(
            contentType: contentType, cacheControl: cacheControl, contentDisposition: contentDisposition,
            contentEncoding: contentEncoding, contentLanguage: contentLanguage, metadata: metadata)
    }

    private enum CodingKeys: String, CodingKey {
        case bucket, name, size, md5Hash, crc32c, generation, metageneration, timeCreated, updated
        case contentType, cacheControl, contentDisposition, contentEncoding, contentLanguage, metadata
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        bucket = try c.decodeIfPresent(String.self, forKey: .bucket)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        size = try Self.decodeInt64(c, .size)
        md5Hash = try c.decodeIfPresent(String.self, forKey: .md5Hash)
        crc32c = try c.decodeIfPresent(String.self, forKey: .crc32c)
        generation = try Self.decodeInt64(c, .generation)
        metageneration = try Self.decodeInt64(c, .metageneration)
        timeCreated = try Self.decodeDate(c, .timeCreated)
        updated = try Self.decodeDate(c, .updated)
        contentType = try c.decodeIfPresent(String.self, forKey: .contentType)
        cacheControl = try c.decodeIfPresent(String.self, forKey: .cacheControl)
        contentDisposition = try c.decodeIfPresent(String.self, forKey: .contentDisposition)
        contentEncoding = try c.decodeIfPresent(String.self, forKey: .contentEncoding)
        contentLanguage = try c.decodeIfPresent(String.self, forKey: .contentLanguage)
        metadata = try c.decodeIfPresent([String: String].self, forKey: .metadata)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(bucket, forKey: .bucket)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(size.map(String.init), forKey: .size)
        try c.encodeIfPresent(md5Hash, forKey: .md5Hash)
        try c.encodeIfPresent(crc32c, forKey: .crc32c)
        try c.encodeIfPresent(generation.map(String.init), forKey: .generation)
        try c.encodeIfPresent(metageneration.map(String.init), forKey: .metageneration)
        try c.encodeIfPresent(timeCreated.map(RFC3339.string), forKey: .timeCreated)
        try c.encodeIfPresent(updated.map(RFC3339.string), forKey: .updated)
        try c.encodeIfPresent(contentType, forKey: .contentType)
        try c.encodeIfPresent(cacheControl, forKey: .cacheControl)
        try c.encodeIfPresent(contentDisposition, forKey: .contentDisposition)
        try c.encodeIfPresent(contentEncoding, forKey: .contentEncoding)
        try c.encodeIfPresent(contentLanguage, forKey: .contentLanguage)
        try c.encodeIfPresent(metadata, forKey: .metadata)
    }

    /// GCS sends 64-bit integers as strings; accept numbers too.
    private static func decodeInt64(_ c: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Int64? {
        if let text = try? c.decodeIfPresent(String.self, forKey: key) {
            guard let value = Int64(text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "not an integer: \(text)")
            }
            return value
        }
        return try c.decodeIfPresent(Int64.self, forKey: key)
    }

    private static func decodeDate(_ c: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Date? {
        guard let text = try c.decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let date = RFC3339.date(text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "not an RFC 3339 time: \(text)")
        }
        return date
    }
}

/// RFC 3339 times with milliseconds, as GCS writes them (`2026-11-23T09:10:31.123Z`).
enum RFC3339 {
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let plain = Date.ISO8601FormatStyle()

    /// The time at the nearest millisecond, as FirebaseStorage writes it: `...01.673Z` read
    /// and written back stays `...01.673Z` (formatting the `Date` alone truncates, and
    /// `.673` is stored as `.67299...`).
    static func string(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = millis / 1000
        var fraction = millis % 1000
        if fraction < 0 {
            fraction += 1000
            seconds -= 1
        }
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let (year, month, day) = civil(fromDays: days)
        guard (1...9999).contains(year) else {
            return Date(timeIntervalSince1970: Double(seconds)).formatted(plain).dropLast() + ".\(pad(Int(fraction), 3))Z"
        }
        return "\(pad(Int(year), 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(Int(rest / 3600), 2)):\(pad(Int(rest / 60 % 60), 2)):"
            + "\(pad(Int(rest % 60), 2)).\(pad(Int(fraction), 3))Z"
    }

    /// A time in RFC 3339 (`2026-11-23T09:10:31.123Z`, any fraction, `Z` or an offset), read
    /// by hand: Foundation's parser was a tenth of the CPU of a small upload. Anything unusual
    /// goes to Foundation's parser.
    static func date(_ text: String) -> Date? {
        if let fast = parse(Array(text.utf8)) { return fast }
        return (try? withFraction.parse(text)) ?? (try? plain.parse(text))
    }

    private static func parse(_ b: [UInt8]) -> Date? {
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var value = 0
            for i in from..<from + count {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                value = value * 10 + Int(b[i] - 48)
            }
            return value
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < b.count, b[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < b.count, b[index] >= 48, b[index] <= 57 {
                fraction += Double(b[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset = 0
        guard index < b.count else { return nil }
        if b[index] == UInt8(ascii: "Z") || b[index] == UInt8(ascii: "z") {
            index += 1
        } else if b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-") {
            guard let hours = number(index + 1, 2), index + 3 < b.count, b[index + 3] == UInt8(ascii: ":"),
                  let minutes = number(index + 4, 2) else { return nil }
            offset = (hours * 3600 + minutes * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == b.count else { return nil }
        let days = Self.days(fromCivil: Int64(year), month, day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second - offset)
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func days(fromCivil year: Int64, _ month: Int, _ day: Int) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day since 1970-01-01.
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
