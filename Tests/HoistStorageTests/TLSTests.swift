import Foundation
import HoistHTTP
import HoistTestSupport
import Testing
@testable import HoistStorage

/// The `gs://` backend over TLS as Google serves it: fake-gcs-server with `-scheme https`
/// (HTTP/2 by ALPN) and a certificate from a throwaway CA that nothing trusts unless told.
@Suite struct TLSTests {
    /// A storage for `bucket` on the https server (or `endpoint`), trusting `caBundle`.
    func tlsStorage(bucket: String, endpoint: String? = nil, caBundle: String?,
                    configure: (inout GCSBackend.Configuration) -> Void = { _ in }) throws -> Storage {
        let base = try endpoint ?? FakeGCSTLS.endpoint()
        var configuration = GCSBackend.Configuration(bucket: bucket, endpoint: base, downloadEndpoint: base)
        configuration.caBundle = caBundle
        configure(&configuration)
        let storage = Storage(url: "gs://\(bucket)", backend: GCSBackend(configuration))
        storage.retryInitialDelay = 0.05
        return storage
    }

    @Test func smallAndLargeUploadsOverHTTPSWithTheCABundle() async throws {
        let ca = try TestCertificates.shared().caFile
        let bucket = try await FakeGCSTLS.makeBucket()
        let storage = try tlsStorage(bucket: bucket, caBundle: ca) { $0.multipartThreshold = 1 << 20 }
        try await storage.backend.checkAccess()
        let small = patternData(70_000, seed: 3)
        let metadata = StorageMetadata()
        metadata.customMetadata = ["over": "tls"]
        let stored = try await storage.reference(withPath: "s/small.bin").putDataAsync(small, metadata: metadata)
        #expect(stored.md5Hash == md5Base64(small))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "s/small.bin") == small)
        #expect(try await storage.reference(withPath: "s/small.bin").getMetadata().customMetadata?["over"] == "tls")
        let link = try await storage.reference(withPath: "s/small.bin").downloadURL()
        #expect(link.absoluteString.hasPrefix(try FakeGCSTLS.endpoint() + "/v0/b/\(bucket)/o/s%2Fsmall.bin?alt=media&token="))

        // Resumable: the session URL is https too, and one streamed PUT goes over the same trust.
        let directory = try TemporaryDirectory()
        let large = patternData(6 << 20 + 11, seed: 9)
        let file = try directory.write("large.bin", large)
        let bigStored = try await storage.reference(withPath: "l/large.bin").putFileAsync(from: file)
        #expect(bigStored.size == Int64(large.count))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "l/large.bin") == large)
    }

    @Test func theServerSpeaksHTTP2ByALPN() async throws {
        var request = HTTPRequest(method: "GET", url: try FakeGCSTLS.endpoint() + "/storage/v1/b")
        request.caBundle = try TestCertificates.shared().caFile
        let response = try await CurlEngine.shared.perform(request)
        #expect(response.status == 200)
        #expect(response.httpVersion == "2")
    }

    @Test func aColdBurstOfSmallUploadsSharesOneConnection() async throws {
        // No access check first to open a connection: 64 uploads start at once on a host with no
        // connection yet. They wait for the first one (PIPEWAIT) and become its HTTP/2 streams.
        let ca = try TestCertificates.shared().caFile
        let bucket = try await FakeGCSTLS.makeBucket()
        let relay = try CountingRelay(upstreamPort: try FakeGCSTLS.port())
        let storage = try tlsStorage(bucket: bucket, endpoint: "https://127.0.0.1:\(relay.port)", caBundle: ca)
        let names = (0..<200).map { "burst/f\($0).txt" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, name) in names.enumerated() {
                if index >= 64 { try await group.next() }
                group.addTask { _ = try await storage.reference(withPath: name).putDataAsync(Data(name.utf8)) }
            }
            try await group.waitForAll()
        }
        for name in names.prefix(3) { #expect(try await FakeGCSTLS.download(bucket: bucket, object: name) == Data(name.utf8)) }
        #expect(relay.connections >= 1 && relay.connections <= 4, "\(relay.connections) connections for 200 uploads")
    }

    @Test func withoutTheCAAccessFailsAtOnceNamingTheFix() async throws {
        let bucket = try await FakeGCSTLS.makeBucket()
        let storage = try tlsStorage(bucket: bucket, caBundle: nil)
        let started = Date()
        do {
            try await storage.backend.checkAccess()
            Issue.record("checkAccess passed with an untrusted certificate")
        } catch {
            let message = (error as NSError).localizedDescription
            #expect(message.contains("The TLS certificate of \(try FakeGCSTLS.endpoint()) is not trusted"), "\(message)")
            #expect(message.contains("--ca-bundle") && message.contains("SSL_CERT_FILE"), "\(message)")
            #expect(!message.contains("\n"))
            // Not retryable: a retry cannot make a certificate trusted.
            #expect(!RetryPolicy.isTransient(error))
        }
        #expect(Date().timeIntervalSince(started) < 5)
        // An upload fails the same way, without burning the retry budget.
        let upload = Date()
        let error = await putDataError(storage.reference(withPath: "x.bin"), Data("x".utf8))
        #expect(error?.localizedDescription.contains("is not trusted") == true, "\(String(describing: error))")
        #expect(Date().timeIntervalSince(upload) < 5)
    }

    @Test func aCABundleThatIsNotTheServersIsNamed() async throws {
        let directory = try TemporaryDirectory()
        let other = try directory.write("other.pem", Data(try String(contentsOfFile: "/etc/ssl/certs/ca-certificates.crt",
                                                                     encoding: .utf8).utf8))
        let storage = try tlsStorage(bucket: "any", caBundle: other.path)
        await #expect {
            try await storage.backend.checkAccess()
        } throws: { error in
            (error as NSError).localizedDescription.contains("not trusted by the CA bundle \(other.path)")
        }
        let missing = try tlsStorage(bucket: "any", caBundle: directory.url.appendingPathComponent("nope.pem").path)
        await #expect {
            try await missing.backend.checkAccess()
        } throws: { error in
            (error as NSError).localizedDescription.contains("Cannot use the CA bundle \(directory.url.path)/nope.pem")
        }
    }

    @Test func insecureSkipTLSVerifyReachesTheWire() async throws {
        let bucket = try await FakeGCSTLS.makeBucket()
        let storage = try tlsStorage(bucket: bucket, caBundle: nil) { $0.insecureSkipTLSVerify = true }
        try await storage.backend.checkAccess()
        let data = patternData(5000)
        _ = try await storage.reference(withPath: "insecure.bin").putDataAsync(data)
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "insecure.bin") == data)
    }

    @Test func theEnvironmentNamesTheBundleAsCurlsToolReadsIt() throws {
        #expect(try GCSBackend.Configuration.fromEnvironment(bucket: "b", [:]).caBundle == nil)
        #expect(try GCSBackend.Configuration.fromEnvironment(bucket: "b", ["SSL_CERT_FILE": "/s.pem"]).caBundle == "/s.pem")
        #expect(try GCSBackend.Configuration.fromEnvironment(
            bucket: "b", ["SSL_CERT_FILE": "/s.pem", "CURL_CA_BUNDLE": "/c.pem"]).caBundle == "/c.pem")
        #expect(try GCSBackend.Configuration.fromEnvironment(
            bucket: "b", ["SSL_CERT_FILE": "/s.pem"], caBundle: "/flag.pem").caBundle == "/flag.pem")
    }

    @Test func aTLSServerWithoutHTTP2GetsHTTP11() async throws {
        // A relay that ends TLS itself and offers only http/1.1, in front of plain fake-gcs-server.
        let relay = try CountingRelay(upstreamPort: try FakeGCS.port(), terminateTLS: true)
        let endpoint = "https://127.0.0.1:\(relay.port)"
        let ca = try TestCertificates.shared().caFile
        var request = HTTPRequest(method: "GET", url: endpoint + "/storage/v1/b")
        request.caBundle = ca
        let response = try await CurlEngine.shared.perform(request)
        #expect(response.status == 200)
        #expect(response.httpVersion == "1.1")

        let bucket = try await FakeGCS.makeBucket()
        let storage = try tlsStorage(bucket: bucket, endpoint: endpoint, caBundle: ca)
        let items = (0..<24).map { (name: "f\($0).txt", data: patternData(3000 + $0, seed: UInt8($0))) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for item in items {
                group.addTask { _ = try await storage.reference(withPath: item.name).putDataAsync(item.data) }
            }
            try await group.waitForAll()
        }
        for item in items { #expect(try await FakeGCS.download(bucket: bucket, object: item.name) == item.data) }
    }
}
