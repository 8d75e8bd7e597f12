import Crypto
import Foundation
import Synchronization

/// AWS credentials: an access key, its secret and, for temporary credentials (STS, SSO, a role),
/// the session token.
public struct S3Credentials: Sendable, Equatable {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }
}

/// AWS Signature Version 4, written here on swift-crypto's HMAC-SHA256 rather than taken from
/// libcurl's `CURLOPT_AWS_SIGV4`: presigned URLs (S3's `downloadURL()`) need the signer without
/// a transfer, `UNSIGNED-PAYLOAD` and the signed header set stay in our hands, and each step
/// (canonical request, string to sign, signature) is checked against AWS's published vectors
/// (`SigV4Tests`, Tests/fixtures/aws-sig-v4-test-suite).
///
/// Paths are signed as S3 wants them: each byte outside RFC 3986's unreserved set and `/`
/// percent-encoded once, never normalized.
public struct SigV4: Sendable {
    public var credentials: S3Credentials
    public var region: String
    public var service: String

    /// The payload hash S3 accepts for a body it does not have signed (its integrity is
    /// `Content-MD5`'s and the checksums' job).
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// SHA-256 of nothing, hex.
    public static let emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public init(credentials: S3Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// What is signed: the method, the path and query as they are (not yet encoded), the headers
    /// to sign (host included) and the payload's hash.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [(name: String, value: String)]
        public var headers: [(name: String, value: String)]
        public var payloadHash: String

        public init(method: String, path: String, query: [(name: String, value: String)] = [],
                    headers: [(name: String, value: String)], payloadHash: String) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    // MARK: - The steps

    /// The canonical request, and the `SignedHeaders` list it names.
    public static func canonicalRequest(_ request: Request) -> (text: String, signedHeaders: String) {
        let (bytes, signed) = canonicalRequestBytes(request)
        return (String(decoding: bytes, as: UTF8.self), signed)
    }

    /// The canonical request as UTF-8 bytes, built in one buffer: it is hashed, never read as
    /// text, and each request is signed (a `String` grown piece by piece was a tenth of a
    /// small upload's instructions).
    static func canonicalRequestBytes(_ request: Request) -> (bytes: [UInt8], signedHeaders: String) {
        // Names lower-cased, sorted (equal names keep their order), then equal names' values
        // joined with `,` on one line.
        typealias Header = (name: String, value: String, at: Int)
        var headers: [Header] = []
        headers.reserveCapacity(request.headers.count)
        var size = request.method.utf8.count + request.path.utf8.count * 3 + request.payloadHash.utf8.count + 8
        for (at, header) in request.headers.enumerated() {
            let entry = (lowercased(header.name), trimmed(header.value), at)
            size += 2 * entry.0.utf8.count + entry.1.utf8.count + 3
            headers.append(entry)
        }
        headers.sort { (a: Header, b: Header) -> Bool in a.name == b.name ? a.at < b.at : a.name < b.name }
        let query = canonicalQuery(request.query)
        var text = [UInt8]()
        text.reserveCapacity(size + query.utf8.count)
        let newline = UInt8(ascii: "\n")
        text += request.method.utf8
        text.append(newline)
        text += encodePath(request.path).utf8
        text.append(newline)
        text += query.utf8
        text.append(newline)
        var signed = [UInt8]()
        var index = 0
        while index < headers.count {
            let name = headers[index].name
            if index > 0 { signed.append(UInt8(ascii: ";")) }
            signed += name.utf8
            text += name.utf8
            text.append(UInt8(ascii: ":"))
            text += headers[index].value.utf8
            index += 1
            while index < headers.count, headers[index].name == name {
                text.append(UInt8(ascii: ","))
                text += headers[index].value.utf8
                index += 1
            }
            text.append(newline)
        }
        text.append(newline)
        text += signed
        text.append(newline)
        text += request.payloadHash.utf8
        return (text, String(decoding: signed, as: UTF8.self))
    }

    /// `AWS4-HMAC-SHA256`, the time, the scope and the canonical request's hash, a line each.
    public func stringToSign(canonicalRequest: String, date: Date) -> String {
        stringToSign(canonicalRequest: Array(canonicalRequest.utf8), stamp: Stamp(date))
    }

    func stringToSign(canonicalRequest: [UInt8], stamp: Stamp) -> String {
        let hash = Self.hex(SHA256.hash(data: canonicalRequest))
        return "AWS4-HMAC-SHA256\n" + stamp.time + "\n" + scope(day: stamp.day) + "\n" + hash
    }

    /// The signature of `stringToSign`, hex, with the key derived for the day, region and service.
    public func signature(stringToSign: String, date: Date) -> String {
        signature(stringToSign: stringToSign, day: Stamp(date).day)
    }

    func signature(stringToSign: String, day: String) -> String {
        var mac = keyedMAC(day: day)
        mac.update(data: Array(stringToSign.utf8))
        return Self.hex(mac.finalize())
    }

    /// An HMAC keyed with the key for `day`, region and service, ready for its message: the key
    /// is four HMACs from the secret, derived once and kept (it changes once a day; every
    /// request of the day is signed with it), and so is the HMAC set up with it (its inner and
    /// outer pads hashed), which each signature copies.
    func keyedMAC(day: String) -> HMAC<SHA256> {
        let scope = KeyScope(secret: credentials.secretAccessKey, day: day, region: region, service: service)
        if let mac = Self.keyedMACs.withLock({ $0[scope] }) { return mac }
        var key = SymmetricKey(data: Array("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key)))
        }
        let mac = HMAC<SHA256>(key: key)
        Self.keyedMACs.withLock { macs in
            // Bounded: a few credentials and regions a day; a long run's old days go.
            if macs.count >= 64 { macs.removeAll() }
            macs[scope] = mac
        }
        return mac
    }

    private struct KeyScope: Hashable {
        let secret: String
        let day: String
        let region: String
        let service: String
    }

    private static let keyedMACs = Mutex<[KeyScope: HMAC<SHA256>]>([:])

    /// `DAY/REGION/SERVICE/aws4_request`.
    public func scope(_ date: Date) -> String { scope(day: Stamp(date).day) }

    func scope(day: String) -> String { day + "/" + region + "/" + service + "/aws4_request" }

    // MARK: - Signing

    /// The headers to add to `request` (which must name `host`): `x-amz-date`,
    /// `x-amz-content-sha256` (when `signPayloadHeader`), `x-amz-security-token` with temporary
    /// credentials, and `Authorization`.
    public func authorizationHeaders(for request: Request, date: Date = Date(), signPayloadHeader: Bool = true)
        -> [(name: String, value: String)]
    {
        var request = request
        let stamp = Stamp(date)
        var added: [(name: String, value: String)] = [("x-amz-date", stamp.time)]
        if signPayloadHeader { added.append(("x-amz-content-sha256", request.payloadHash)) }
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        request.headers += added
        let (canonical, signed) = Self.canonicalRequestBytes(request)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: canonical, stamp: stamp), day: stamp.day)
        added.append(("Authorization", "AWS4-HMAC-SHA256 Credential=" + credentials.accessKeyID + "/" + scope(day: stamp.day)
                        + ", SignedHeaders=" + signed + ", Signature=" + signature))
        return added
    }

    /// The query of a presigned URL for `request` (its `query` plus the `X-Amz-*` parameters and
    /// the signature), encoded, valid `expires` seconds from `date`.
    public func presignedQuery(for request: Request, date: Date = Date(), expires: Int) -> String {
        var request = request
        let stamp = Stamp(date)
        request.query += presignParameters(request, date: date, expires: expires)
        let (canonical, _) = Self.canonicalRequestBytes(request)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: canonical, stamp: stamp), day: stamp.day)
        return Self.canonicalQuery(request.query + [("X-Amz-Signature", signature)])
    }

    /// The `X-Amz-*` parameters a presigned request is signed with.
    func presignParameters(_ request: Request, date: Date, expires: Int) -> [(name: String, value: String)] {
        let signed = Set(request.headers.map { Self.lowercased($0.name) }).sorted().joined(separator: ";")
        let stamp = Stamp(date)
        var parameters: [(name: String, value: String)] = [
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(day: stamp.day))"),
            ("X-Amz-Date", stamp.time), ("X-Amz-Expires", "\(expires)"),
        ]
        if let token = credentials.sessionToken { parameters.append(("X-Amz-Security-Token", token)) }
        parameters.append(("X-Amz-SignedHeaders", signed))
        return parameters
    }

    // MARK: - Encoding

    /// Whether `byte` is one of RFC 3986's unreserved characters: the only ones SigV4 leaves
    /// unencoded.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// `text`'s UTF-8 bytes, each one `keep` refuses as `%XX` (upper-case hex); `text` itself
    /// when nothing needs encoding.
    private static func percentEncoded(_ text: String, keeping keep: (UInt8) -> Bool) -> String {
        guard !text.utf8.allSatisfy(keep) else { return text }
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count * 3)
        for byte in text.utf8 {
            if keep(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), upperHexDigits[Int(byte >> 4)], upperHexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A query name or value, every byte but the unreserved ones as `%XX`.
    public static func encode(_ text: String) -> String {
        percentEncoded(text, keeping: isUnreserved)
    }

    /// A path, as S3 signs and reads it: `/` kept, everything else but the unreserved encoded.
    public static func encodePath(_ path: String) -> String {
        let encoded = percentEncoded(path) { $0 == UInt8(ascii: "/") || isUnreserved($0) }
        return encoded.isEmpty ? "/" : encoded
    }

    /// Pairs encoded and sorted by name, then value, joined with `&`.
    public static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        let pairs: [(name: String, value: String)] = query.map { (encode($0.name), encode($0.value)) }
        let sorted = pairs.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        return sorted.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
    }

    /// A header name lower-cased: byte by byte when it is ASCII (as header names are).
    static func lowercased(_ name: String) -> String {
        let utf8 = name.utf8
        guard utf8.allSatisfy({ $0 < 0x80 }) else { return name.lowercased() }
        guard utf8.contains(where: { (0x41...0x5A).contains($0) }) else { return name }
        return String(decoding: utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// A header value with the white space around it removed and runs of spaces made one.
    static func trimmed(_ value: String) -> String {
        // Most values need nothing done: one pass over their bytes says so.
        let clean = value.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let first = bytes.first, let last = bytes.last else { return true }
            if first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 { return false }
            var previous: UInt8 = 0
            for byte in bytes {
                if byte >= 0x80 || (byte == 0x20 && previous == 0x20) { return false }
                previous = byte
            }
            return true
        }
        if clean == true { return value }
        let utf8 = value.utf8
        // Not ASCII: Foundation's white space (Unicode's spaces) at the ends, as before.
        guard utf8.allSatisfy({ $0 < 0x80 }) else {
            return value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
                .trimmingCharacters(in: .whitespaces)
        }
        func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        let space = UInt8(ascii: " ")
        var doubled = false
        var last: UInt8 = 0
        for byte in utf8 {
            if byte == space && last == space { doubled = true; break }
            last = byte
        }
        if !doubled, !(utf8.first.map(isBlank) ?? false), !(utf8.last.map(isBlank) ?? false) { return value }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count)
        for byte in utf8 where !(byte == space && out.last == space) { out.append(byte) }
        let start = out.firstIndex { !isBlank($0) } ?? out.endIndex
        let end = out.lastIndex { !isBlank($0) }.map { $0 + 1 } ?? start
        return String(decoding: out[start..<max(start, end)], as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
    private static let upperHexDigits = Array("0123456789ABCDEF".utf8)

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in digest {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A moment as SigV4 writes it, in UTC: `time` `yyyyMMdd'T'HHmmss'Z'` and `day` `yyyyMMdd`,
    /// made once per request by arithmetic on the epoch seconds (no `Calendar`).
    struct Stamp {
        let day: String
        let time: String

        init(_ date: Date) {
            let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
            let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
            let inDay = seconds - days * 86_400
            let (year, month, dayOfMonth) = RFC3339.civil(fromDays: days)
            var bytes = [UInt8]()
            bytes.reserveCapacity(16)
            func digits(_ value: Int64, _ count: Int) {
                var divisor: Int64 = 1
                for _ in 1..<count { divisor *= 10 }
                var rest = value
                while divisor > 0 {
                    bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                    rest %= divisor
                    divisor /= 10
                }
            }
            digits(max(0, min(9999, year)), 4)
            digits(Int64(month), 2)
            digits(Int64(dayOfMonth), 2)
            day = String(decoding: bytes, as: UTF8.self)
            bytes.append(UInt8(ascii: "T"))
            digits(inDay / 3600, 2)
            digits(inDay / 60 % 60, 2)
            digits(inDay % 60, 2)
            bytes.append(UInt8(ascii: "Z"))
            time = String(decoding: bytes, as: UTF8.self)
        }
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC.
    public static func timestamp(_ date: Date) -> String { Stamp(date).time }

    static func day(_ date: Date) -> String { Stamp(date).day }
}
