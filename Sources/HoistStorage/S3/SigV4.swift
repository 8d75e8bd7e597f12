import Crypto
import Foundation

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
        var merged: [String: [String]] = [:]
        for (name, value) in request.headers {
            merged[name.lowercased(), default: []].append(trimmed(value))
        }
        let names = merged.keys.sorted()
        let headerLines = names.map { "\($0):\(merged[$0]!.joined(separator: ","))\n" }.joined()
        let signed = names.joined(separator: ";")
        let text = [request.method, encodePath(request.path), canonicalQuery(request.query), headerLines, signed,
                    request.payloadHash].joined(separator: "\n")
        return (text, signed)
    }

    /// `AWS4-HMAC-SHA256`, the time, the scope and the canonical request's hash, a line each.
    public func stringToSign(canonicalRequest: String, date: Date) -> String {
        let hash = Self.hex(SHA256.hash(data: Data(canonicalRequest.utf8)))
        return "AWS4-HMAC-SHA256\n\(Self.timestamp(date))\n\(scope(date))\n\(hash)"
    }

    /// The signature of `stringToSign`, hex, with the key derived for the day, region and service.
    public func signature(stringToSign: String, date: Date) -> String {
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [Self.day(date), region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        return Self.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
    }

    /// `DAY/REGION/SERVICE/aws4_request`.
    public func scope(_ date: Date) -> String { "\(Self.day(date))/\(region)/\(service)/aws4_request" }

    // MARK: - Signing

    /// The headers to add to `request` (which must name `host`): `x-amz-date`,
    /// `x-amz-content-sha256` (when `signPayloadHeader`), `x-amz-security-token` with temporary
    /// credentials, and `Authorization`.
    public func authorizationHeaders(for request: Request, date: Date = Date(), signPayloadHeader: Bool = true)
        -> [(name: String, value: String)]
    {
        var request = request
        var added: [(name: String, value: String)] = [("x-amz-date", Self.timestamp(date))]
        if signPayloadHeader { added.append(("x-amz-content-sha256", request.payloadHash)) }
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        request.headers += added
        let (canonical, signed) = Self.canonicalRequest(request)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: canonical, date: date), date: date)
        added.append(("Authorization", "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope(date)), "
                        + "SignedHeaders=\(signed), Signature=\(signature)"))
        return added
    }

    /// The query of a presigned URL for `request` (its `query` plus the `X-Amz-*` parameters and
    /// the signature), encoded, valid `expires` seconds from `date`.
    public func presignedQuery(for request: Request, date: Date = Date(), expires: Int) -> String {
        var request = request
        request.query += presignParameters(request, date: date, expires: expires)
        let (canonical, _) = Self.canonicalRequest(request)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: canonical, date: date), date: date)
        return Self.canonicalQuery(request.query + [("X-Amz-Signature", signature)])
    }

    /// The `X-Amz-*` parameters a presigned request is signed with.
    func presignParameters(_ request: Request, date: Date, expires: Int) -> [(name: String, value: String)] {
        let signed = Set(request.headers.map { $0.name.lowercased() }).sorted().joined(separator: ";")
        var parameters: [(name: String, value: String)] = [
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(date))"),
            ("X-Amz-Date", Self.timestamp(date)), ("X-Amz-Expires", "\(expires)"),
        ]
        if let token = credentials.sessionToken { parameters.append(("X-Amz-Security-Token", token)) }
        parameters.append(("X-Amz-SignedHeaders", signed))
        return parameters
    }

    // MARK: - Encoding

    /// RFC 3986's unreserved characters: the only ones SigV4 leaves unencoded.
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    private static let unreservedAndSlash = unreserved.union(CharacterSet(charactersIn: "/"))

    /// A query name or value, every byte but the unreserved ones as `%XX`.
    public static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// A path, as S3 signs and reads it: `/` kept, everything else but the unreserved encoded.
    public static func encodePath(_ path: String) -> String {
        let encoded = path.addingPercentEncoding(withAllowedCharacters: unreservedAndSlash) ?? ""
        return encoded.isEmpty ? "/" : encoded
    }

    /// Pairs encoded and sorted by name, then value, joined with `&`.
    public static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        let pairs: [(name: String, value: String)] = query.map { (encode($0.name), encode($0.value)) }
        let sorted = pairs.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        return sorted.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
    }

    /// A header value with the white space around it removed and runs of spaces made one.
    static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC.
    public static func timestamp(_ date: Date) -> String {
        let c = utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ n: Int?) -> String {
            let value = n ?? 0
            return value < 10 ? "0\(value)" : "\(value)"
        }
        let day: String = "\(c.year ?? 0)" + two(c.month) + two(c.day)
        let time: String = two(c.hour) + two(c.minute) + two(c.second)
        return day + "T" + time + "Z"
    }

    static func day(_ date: Date) -> String { String(timestamp(date).prefix(8)) }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}
