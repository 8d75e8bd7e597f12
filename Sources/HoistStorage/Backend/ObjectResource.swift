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
        let millis = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = (millis / 1000).rounded(.down)
        let fraction = Int(millis - seconds * 1000)
        let whole = Date(timeIntervalSince1970: seconds).formatted(plain)   // 2016-03-01T20:16:01Z
        return whole.dropLast() + "." + String(repeating: "0", count: fraction < 10 ? 2 : fraction < 100 ? 1 : 0)
            + "\(fraction)Z"
    }

    static func date(_ text: String) -> Date? {
        (try? withFraction.parse(text)) ?? (try? plain.parse(text))
    }
}
