import Foundation
import HoistHTTP

/// Object metadata as S3 carries it, in headers both ways: `Content-Type`, `Cache-Control`,
/// `Content-Disposition`, `Content-Encoding`, `Content-Language`, and custom metadata as
/// `x-amz-meta-KEY`. A value that is not printable ASCII (S3 keeps headers in US-ASCII) is sent
/// as RFC 2047's `=?UTF-8?B?...?=`, as S3 itself returns such values, and read back decoded.
enum S3Headers {
    /// The request headers for `resource`'s writable fields.
    /// - Throws: `invalidArgument` for a custom metadata key that cannot be a header name.
    static func objectHeaders(_ resource: ObjectResource) throws -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        let fields: [(String, String?)] = [
            ("Content-Type", resource.contentType), ("Cache-Control", resource.cacheControl),
            ("Content-Disposition", resource.contentDisposition), ("Content-Encoding", resource.contentEncoding),
            ("Content-Language", resource.contentLanguage),
        ]
        for case let (name, value?) in fields { headers.append((name, encodeValue(value))) }
        for (key, value) in (resource.metadata ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard (1...128).contains(key.count), key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
            else {
                throw StorageFailure(.invalidArgument, "Custom metadata key '\(printable(key, limit: 60))' cannot be an S3 "
                                        + "metadata header: use letters, digits, '-', '_' and '.'.")
            }
            headers.append(("x-amz-meta-\(key.lowercased())", encodeValue(value)))
        }
        return headers
    }

    /// The object a `HEAD` (or a `PUT`'s answer, with `given`) describes.
    static func resource(_ response: HTTPResponse, bucket: String, name: String, given: ObjectResource? = nil) throws -> ObjectResource {
        try resource(response, bucket: bucket, name: name, given: given, etag: response.header("etag").flatMap(S3ETag.init))
    }

    /// The same, with the answer's ETag already parsed (a `PUT`'s caller checks it too).
    static func resource(_ response: HTTPResponse, bucket: String, name: String, given: ObjectResource?, etag: S3ETag?) throws
        -> ObjectResource
    {
        var resource = given ?? ObjectResource()
        resource.bucket = bucket
        resource.name = name
        if given == nil {
            let headers = response.headers
            guard let length = headers["content-length"].flatMap({ Int64($0) }), length >= 0 else {
                throw StorageFailure(.unknown, "S3 described s3://\(bucket)/\(name) without a size.", details: ["bucket": bucket])
            }
            resource.size = length
            resource.contentType = headers["content-type"].map(decodeValue)
            resource.cacheControl = headers["cache-control"].map(decodeValue)
            resource.contentDisposition = headers["content-disposition"].map(decodeValue)
            resource.contentEncoding = headers["content-encoding"].map(decodeValue)
            resource.contentLanguage = headers["content-language"].map(decodeValue)
            var custom: [String: String] = [:]
            for (header, value) in headers where header.hasPrefix("x-amz-meta-") {
                custom[String(header.dropFirst("x-amz-meta-".count))] = decodeValue(value)
            }
            resource.metadata = custom.isEmpty ? nil : custom
            resource.updated = headers["last-modified"].flatMap(httpDate)
            resource.timeCreated = resource.updated
        }
        if let etag {
            // An SSE-KMS or SSE-C object's ETag is no MD5: the object's MD5 is then only the one
            // the server checked (`Content-MD5`, given), never read from the ETag.
            resource.md5Hash = (etagIsMD5(response) ? etag.md5Base64 : nil) ?? (given?.md5Hash)
            resource.generation = etag.generation
            resource.metageneration = 1
        }
        if let crc = objectCRC32C(response.header("x-amz-checksum-crc32c"), type: response.header("x-amz-checksum-type")) {
            resource.crc32c = crc
        }
        return resource
    }

    /// Whether an answer's ETag (a `PutObject`'s, a part's, Complete's, a `HEAD`'s) is an MD5 of
    /// the bytes, as S3 makes it for objects stored plain or with SSE-S3: only when the answer
    /// names no encryption or `AES256`, and no customer key. SSE-KMS (`aws:kms`, `aws:kms:dsse`),
    /// SSE-C, and any kind Hoist does not know give ETags that are not, and are never compared.
    static func etagIsMD5(_ response: HTTPResponse) -> Bool {
        guard response.header("x-amz-server-side-encryption-customer-algorithm") == nil else { return false }
        guard let kind = response.header("x-amz-server-side-encryption") else { return true }
        return kind == "AES256"
    }

    /// A CRC32C that is the whole object's: S3's base64 of four bytes, with a type (S3's
    /// `x-amz-checksum-type`, `ChecksumType`) that is none or `FULL_OBJECT`. A `COMPOSITE` one (the
    /// CRC of the parts' CRCs, `...-N`) is no CRC32C of the bytes, and nil, as is anything else.
    static func objectCRC32C(_ value: String?, type: String?) -> String? {
        guard let value, value.count == 8, Data(base64Encoded: value)?.count == 4, type == nil || type == "FULL_OBJECT" else { return nil }
        return value
    }

    /// `value` as it may go in a header: as it is when printable ASCII, else RFC 2047 base64.
    static func encodeValue(_ value: String) -> String {
        if value.unicodeScalars.allSatisfy({ (0x20..<0x7F).contains($0.value) }), !value.hasPrefix("=?") { return value }
        return "=?UTF-8?B?\(Data(value.utf8).base64EncodedString())?="
    }

    /// A header's value, RFC 2047's `=?UTF-8?B?...?=` (and `Q`-less) decoded; anything else as it came.
    static func decodeValue(_ value: String) -> String {
        guard value.hasPrefix("=?"), value.hasSuffix("?="), value.count <= 16 << 10 else { return value }
        let parts = value.dropFirst(2).dropLast(2).split(separator: "?", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].uppercased() == "UTF-8", parts[1].uppercased() == "B",
              let data = Data(base64Encoded: String(parts[2])), let text = String(data: data, encoding: .utf8)
        else { return value }
        return text
    }

    /// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }
}

/// An ETag as S3 gives it, checked: `"HEX32"` (a single `PutObject`: the MD5 of the bytes, unless
/// the object is encrypted with KMS) or `"HEX32-N"` (a multipart upload: the MD5 of the parts'
/// MD5s, and their count). Anything else is kept only as an opaque value.
struct S3ETag: Equatable {
    let value: String
    /// The 16 bytes of the hex digest, and the part count of a multipart ETag.
    let digest: [UInt8]?
    let parts: Int?

    init?(_ header: String) {
        // On the UTF-8 bytes: `"` and spaces off the ends, then letters, digits and `-` only.
        var bytes = Array(header.utf8)[...]
        while let first = bytes.first, first == UInt8(ascii: "\"") || first == UInt8(ascii: " ") { bytes.removeFirst() }
        while let last = bytes.last, last == UInt8(ascii: "\"") || last == UInt8(ascii: " ") { bytes.removeLast() }
        guard (1...200).contains(bytes.count) else { return nil }
        var lowered = [UInt8]()
        lowered.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): lowered.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): lowered.append(byte | 0x20)
            default: return nil
            }
        }
        value = String(decoding: lowered, as: UTF8.self)
        let pieces = lowered.split(separator: UInt8(ascii: "-"))
        digest = pieces.first.flatMap { $0.count == 32 ? S3ETag.bytes($0) : nil }
        parts = pieces.count == 2 ? S3ETag.partCount(pieces[1]) : nil
    }

    /// A part count, 1 to 10,000, in decimal digits (leading zeros allowed).
    private static func partCount(_ digits: ArraySlice<UInt8>) -> Int? {
        var count = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            count = count * 10 + Int(byte - UInt8(ascii: "0"))
            guard count <= 10_000 else { return nil }
        }
        return count >= 1 ? count : nil
    }

    /// Base64 of the MD5, for an ETag that is one (a single `PutObject`'s).
    var md5Base64: String? { parts == nil && value.count == 32 ? digest.map { Data($0).base64EncodedString() } : nil }

    /// A positive number standing for the object's version (S3 has no generations): FNV-1a of
    /// the ETag, 53 bits, so the same bytes give the same number.
    var generation: Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in value.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int64(hash & 0x1F_FFFF_FFFF_FFFF) | 1
    }

    static func bytes<Hex: Sequence>(_ hex: Hex) -> [UInt8]? where Hex.Element == UInt8 {
        var out = [UInt8]()
        var high: UInt8?
        for char in hex {
            guard let nibble = char.hexNibble else { return nil }
            if let h = high { out.append(h << 4 | nibble); high = nil } else { high = nibble }
        }
        return out
    }
}

extension UInt8 {
    /// The value of an ASCII hex digit.
    fileprivate var hexNibble: UInt8? {
        switch self {
        case 0x30...0x39: self - 0x30
        case 0x61...0x66: self - 0x61 + 10
        case 0x41...0x46: self - 0x41 + 10
        default: nil
        }
    }
}
