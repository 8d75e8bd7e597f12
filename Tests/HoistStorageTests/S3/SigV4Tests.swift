import Crypto
import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// Hoist's Signature V4 against AWS's published test suite (Tests/fixtures/aws-sig-v4-test-suite,
/// its README names the source): for each case, the canonical request, the string to sign and
/// the signature, signed in headers and as a presigned URL's query.
@Suite struct SigV4Tests {
    static let folder = packageRoot.appendingPathComponent("Tests/fixtures/aws-sig-v4-test-suite")
    static let cases: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
        .filter { !$0.hasSuffix(".md") }.sorted()

    @Test func theSuiteIsThere() {
        #expect(Self.cases.count >= 20, "\(Self.cases)")
    }

    @Test(arguments: cases)
    func headerSigning(_ name: String) throws {
        let vector = try Vector(name)
        var request = vector.request
        request.headers.append(("x-amz-date", "20150830T123600Z"))
        if vector.signBody { request.headers.append(("x-amz-content-sha256", request.payloadHash)) }
        if let token = vector.signer.credentials.sessionToken { request.headers.append(("x-amz-security-token", token)) }
        let (canonical, _) = SigV4.canonicalRequest(request)
        #expect(canonical == (try vector.file("header-canonical-request.txt")))
        let toSign = vector.signer.stringToSign(canonicalRequest: canonical, date: vector.date)
        #expect(toSign == (try vector.file("header-string-to-sign.txt")))
        #expect(vector.signer.signature(stringToSign: toSign, date: vector.date) == (try vector.file("header-signature.txt")))

        // The headers Hoist adds say the same signature.
        let added = vector.signer.authorizationHeaders(for: vector.request, date: vector.date, signPayloadHeader: vector.signBody)
        let authorization = try #require(added.first { $0.name == "Authorization" }?.value)
        #expect(authorization.hasSuffix("Signature=\(try vector.file("header-signature.txt"))"), "\(authorization)")
    }

    @Test(arguments: cases)
    func presigning(_ name: String) throws {
        let vector = try Vector(name)
        var request = vector.request
        request.query += vector.signer.presignParameters(request, date: vector.date, expires: 3600)
        let (canonical, _) = SigV4.canonicalRequest(request)
        #expect(canonical == (try vector.file("query-canonical-request.txt")))
        let query = vector.signer.presignedQuery(for: vector.request, date: vector.date, expires: 3600)
        #expect(query.contains("X-Amz-Signature=\(try vector.file("query-signature.txt"))"), "\(query)")
    }

    /// S3 paths are encoded once with `/` kept (the suite's non-S3 cases encode twice), and a
    /// query parameter without a value (`?uploads`) is signed as `uploads=`.
    @Test func pathsAreEncodedOnceKeepingSlashes() {
        #expect(SigV4.encodePath("/bucket/dir/a b+c~ü.txt") == "/bucket/dir/a%20b%2Bc~%C3%BC.txt")
        #expect(SigV4.encodePath("") == "/")
        #expect(SigV4.canonicalQuery([("uploads", ""), ("b", "x y"), ("a", "2"), ("a", "1")]) == "a=1&a=2&b=x%20y&uploads=")
    }

    /// The request's time is made by arithmetic on the epoch seconds, not `Calendar`: it must
    /// read as Foundation's UTC formatter reads the same moments (leap days, century years, the
    /// last second of a day and of a year, a fraction of a second).
    @Test func stampsReadAsFoundationsUTCFormatter() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        var moments: [TimeInterval] = [0, 59.999, 86_399, 86_400, 951_782_400 /* 2000-02-29 */, 946_684_799.5 /* 1999-12-31 23:59:59 */,
                                       4_107_542_400 /* 2100-02-28 */, 4_107_628_800 /* 2100-03-01 */, 1_440_938_160 /* the suite's */]
        for step in 0..<2_000 { moments.append(TimeInterval(step) * 3_155_760.7 + TimeInterval(step % 86_400)) }
        for seconds in moments {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(SigV4.timestamp(date) == formatter.string(from: date), "\(seconds)")
            #expect(SigV4.day(date) == String(formatter.string(from: date).prefix(8)), "\(seconds)")
        }
    }

    /// Names, values and paths are encoded on their UTF-8 bytes: the same text as Foundation's
    /// `addingPercentEncoding` with RFC 3986's unreserved set (and `/` for paths).
    @Test func encodingIsFoundationsByteForByte() {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let withSlash = unreserved.union(CharacterSet(charactersIn: "/"))
        let texts = ["", "plain", "a b+c", "dir/sub dir/ü.txt", "100%", "🚀/é/\u{0}\u{7F}", "~-._", "=&?#[]@!$'()*,;", "\r\n\t",
                     "日本語/ファイル", "a//b/", String(repeating: "é ", count: 300)]
        for text in texts {
            #expect(SigV4.encode(text) == text.addingPercentEncoding(withAllowedCharacters: unreserved), "\(text)")
            let path = text.addingPercentEncoding(withAllowedCharacters: withSlash)!
            #expect(SigV4.encodePath(text) == (path.isEmpty ? "/" : path), "\(text)")
        }
    }

    /// Header values: runs of spaces made one and blanks (space, tab) off the ends, as the
    /// canonical request wants; text that is not ASCII keeps Foundation's reading of white space.
    @Test func headerValuesAreTrimmedAndSpacesCollapsed() {
        let cases: [(String, String)] = [
            ("value", "value"), ("  a   b  ", "a b"), ("\ta  \t b\t", "a \t b"), ("", ""), ("   ", ""), (" \t ", ""),
            ("a\u{00A0}", "a"), ("\u{00A0} é  ü ", "é ü"), ("x  y", "x y"), ("\"quoted  value\"", "\"quoted value\""),
        ]
        for (value, trimmed) in cases { #expect(SigV4.trimmed(value) == trimmed, "\(value.debugDescription)") }
        #expect(SigV4.lowercased("X-Amz-Date") == "x-amz-date" && SigV4.lowercased("host") == "host")
    }

    /// The signing key is derived once per secret, day, region and service and kept: each
    /// signature made with a kept key is the one derived afresh from the secret (AWS's four
    /// HMACs), and signers that differ in any of the four do not share one.
    @Test func signingKeysAreKeptPerSecretDayRegionAndService() {
        func derived(_ secret: String, _ day: String, _ region: String, _ service: String, _ text: String) -> String {
            var key = SymmetricKey(data: Data("AWS4\(secret)".utf8))
            for part in [day, region, service, "aws4_request"] {
                key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
            }
            return SigV4.hex(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: key))
        }
        let days = [Date(timeIntervalSince1970: 1_440_938_160), Date(timeIntervalSince1970: 1_440_938_160 + 86_400)]
        for _ in 0..<2 {
            for secret in ["secret-one", "secret-two"] {
                for region in ["us-east-1", "eu-west-3"] {
                    for service in ["s3", "sts"] {
                        let signer = SigV4(credentials: S3Credentials(accessKeyID: "AK", secretAccessKey: secret), region: region, service: service)
                        for date in days {
                            #expect(signer.signature(stringToSign: "text", date: date)
                                        == derived(secret, SigV4.day(date), region, service, "text"), "\(secret) \(region) \(service) \(date)")
                        }
                    }
                }
            }
        }
    }

    /// One test case folder.
    struct Vector {
        let folder: URL
        let request: SigV4.Request
        let signer: SigV4
        let date: Date
        let signBody: Bool

        init(_ name: String) throws {
            folder = SigV4Tests.folder.appendingPathComponent(name)
            let context = try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("context.json"))) as! [String: Any]
            let keys = context["credentials"] as! [String: String]
            signer = SigV4(credentials: S3Credentials(accessKeyID: keys["access_key_id"]!, secretAccessKey: keys["secret_access_key"]!,
                                                      sessionToken: keys["token"]),
                           region: context["region"] as! String, service: context["service"] as! String)
            date = ISO8601DateFormatter().date(from: context["timestamp"] as! String)!
            signBody = context["sign_body"] as? Bool ?? false
            request = try Self.parse(String(contentsOf: folder.appendingPathComponent("request.txt"), encoding: .utf8))
        }

        func file(_ name: String) throws -> String {
            try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
        }

        /// `METHOD TARGET HTTP/1.1`, `Name:value` lines, a blank line, the body.
        static func parse(_ text: String) throws -> SigV4.Request {
            let (head, body) = text.range(of: "\n\n").map { (String(text[..<$0.lowerBound]), String(text[$0.upperBound...])) } ?? (text, "")
            var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let first = lines.removeFirst().split(separator: " ")
            let target = first.dropFirst().dropLast().joined(separator: " ")
            let (path, queryText) = target.firstIndex(of: "?").map { (String(target[..<$0]), String(target[target.index(after: $0)...])) }
                ?? (target, "")
            let query = queryText.split(separator: "&").map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map { String($0).removingPercentEncoding ?? String($0) }
                return (name: parts[0], value: parts.count > 1 ? parts[1] : "")
            }
            let headers = lines.filter { !$0.isEmpty }.map { line in
                let colon = line.firstIndex(of: ":")!
                return (name: String(line[..<colon]), value: String(line[line.index(after: colon)...]))
            }
            let hash = SigV4.hex(SHA256.hash(data: Data(body.utf8)))
            return SigV4.Request(method: String(first[0]), path: path, query: query, headers: headers, payloadHash: hash)
        }
    }
}
