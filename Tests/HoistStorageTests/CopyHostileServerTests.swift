import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// A server's answers to a copy are hostile input, against Tests/servers/hostilehttp.py answering
/// from a script: answers no test server gives (a rewrite in rounds, a copy that failed after
/// its 200), each test named after what the server does.
@Suite struct CopyHostileServerTests {
    private static let object = #"{"bucket":"b","name":"src","size":"5","crc32c":"AAAAAA==","md5Hash":"XUFAKrxLKna5cZ2REBfFkg==","generation":"7"}"#

    private func requests(_ server: HostileHTTPServer) -> [String] {
        server.requests.map { "\($0["method"] ?? "") \($0["target"] ?? "")" }
    }

    /// Cloud Storage copies a large object, or across locations, in rounds: each answer not
    /// `done` carries a `rewriteToken` the next call sends; the last one's resource is the copy.
    @Test func aRewriteIsCalledAgainWithEachTokenUntilDone() async throws {
        let copied = Self.object.replacingOccurrences(of: #""name":"src""#, with: #""name":"dst""#)
            .replacingOccurrences(of: #""generation":"7""#, with: #""generation":"8""#)
        let server = try HostileHTTPServer(.script([
            "json 200 \(Self.object)",
            #"json 200 {"done":false,"rewriteToken":"first-token","totalBytesRewritten":"2"}"#,
            #"json 200 {"done":false,"rewriteToken":"second/token","totalBytesRewritten":"4"}"#,
            #"json 200 {"done":true,"totalBytesRewritten":"5","resource":\#(copied)}"#,
        ]))
        let storage = gcsStorage(bucket: "b", port: server.port)
        let outcome = try await storage.backend.copy(from: "src", to: "dst", ifSourceGeneration: 7)
        guard case .copied(let resource) = outcome else {
            Issue.record("not copied: \(outcome)")
            return
        }
        #expect(resource.name == "dst")
        #expect(resource.generation == 8)
        let sent = requests(server)
        #expect(sent.count == 4)
        #expect(sent.dropFirst().allSatisfy { $0.hasPrefix("POST /storage/v1/b/b/o/src/rewriteTo/b/b/o/dst?ifSourceGenerationMatch=7") })
        #expect(sent[1].contains("rewriteToken") == false)
        #expect(sent[2].hasSuffix("&rewriteToken=first-token"))
        #expect(sent[3].hasSuffix("&rewriteToken=second%2Ftoken"))
    }

    /// A server that never says `done` is asked a bounded number of times, then the copy fails.
    @Test func aRewriteThatNeverFinishesStops() async throws {
        let server = try HostileHTTPServer(.script(["json 200 \(Self.object)", #"json 200 {"done":false,"rewriteToken":"again"}"#]))
        let storage = gcsStorage(bucket: "b", port: server.port)
        await #expect { _ = try await storage.backend.copy(from: "src", to: "dst", ifSourceGeneration: nil) } throws: {
            "\($0)".contains("did not finish copying src to dst in \(GCSBackend.rewriteRounds) rewrite calls")
        }
        #expect(requests(server).count == 1 + GCSBackend.rewriteRounds)
    }

    /// A rewrite's resource of another object, or of other bytes, is not the copy: the first
    /// fails naming it; the second is deleted (that generation) and fails `nonMatchingChecksum`.
    @Test func aRewriteDescribingAnotherObjectOrOtherBytesFails() async throws {
        let other = Self.object.replacingOccurrences(of: #""name":"src""#, with: #""name":"elsewhere""#)
        var server = try HostileHTTPServer(.script(["json 200 \(Self.object)", #"json 200 {"done":true,"resource":\#(other)}"#]))
        await #expect { _ = try await gcsStorage(bucket: "b", port: server.port).backend.copy(from: "src", to: "dst", ifSourceGeneration: nil) }
            throws: { "\($0)".contains("described another object than dst") }
        let damaged = Self.object.replacingOccurrences(of: #""name":"src""#, with: #""name":"dst""#)
            .replacingOccurrences(of: #""generation":"7""#, with: #""generation":"9""#)
            .replacingOccurrences(of: "AAAAAA==", with: "BBBBBB==")
        server = try HostileHTTPServer(.script(["json 200 \(Self.object)", #"json 200 {"done":true,"resource":\#(damaged)}"#, "json 204 {}"]))
        await #expect { _ = try await gcsStorage(bucket: "b", port: server.port).backend.copy(from: "src", to: "dst", ifSourceGeneration: nil) }
            throws: { StorageErrorCode(of: $0) == .nonMatchingChecksum }
        #expect(requests(server).last == "DELETE /storage/v1/b/b/o/dst?ifGenerationMatch=9")
    }

    private func s3Backend(_ server: HostileHTTPServer) -> S3Backend {
        S3Backend(S3Backend.Configuration(bucket: "bkt", endpoint: server.url, region: "us-east-1", pathStyle: true,
                                          credentials: S3TestServer.credentials))
    }

    /// `raw` script line: an answer with `headers` and `body`, then close.
    private func raw(_ status: Int, _ headers: [String] = [], body: String = "", length: Int? = nil) -> String {
        "raw HTTP/1.1 \(status) X\\r\\n" + headers.map { "\($0)\\r\\n" }.joined()
            + "Content-Length: \(length ?? body.utf8.count)\\r\\nConnection: close\\r\\n\\r\\n" + body
    }

    /// S3 may answer `CopyObject` 200, then fail the copy and say so in the body: that is a
    /// failure, and nothing more is asked.
    @Test func aCopyAnswered200WithAnErrorBodyFails() async throws {
        let etag = "ETag: \"5d41402abc4b2a76b9719d911017c592\""
        let server = try HostileHTTPServer(.script([
            raw(200, [etag], length: 5),
            raw(200, ["Content-Type: application/xml"], body: "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"),
        ]))
        await #expect { _ = try await s3Backend(server).copy(from: "a b/src", to: "dst", ifSourceGeneration: nil) } throws: {
            "\($0)".contains("InternalError")
        }
        #expect(requests(server) == ["HEAD /bkt/a%20b/src", "PUT /bkt/dst"])
    }

    /// `CopyObject` copies at most 5 GiB: a larger source is refused before any copy is asked.
    @Test func aSourceOver5GiBIsRefused() async throws {
        let server = try HostileHTTPServer(.script([raw(200, ["ETag: \"5d41402abc4b2a76b9719d911017c592-600\""], length: Int(5 << 30) + 1)]))
        await #expect { _ = try await s3Backend(server).copy(from: "big", to: "dst", ifSourceGeneration: nil) } throws: {
            StorageErrorCode(of: $0) == .invalidArgument && "\($0)".contains("larger than 5 GiB")
        }
        #expect(requests(server) == ["HEAD /bkt/big"])
    }
}
