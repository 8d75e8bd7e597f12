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
