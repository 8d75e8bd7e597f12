import Foundation
import HoistHTTP
import Synchronization
import Testing
@testable import HoistStorage

/// The GCS backend over a transport that a test answers (`HTTPTransport`), for the pure logic
/// between the wire and `StorageFailure`: which answer or transport error becomes which
/// failure, and what each request carries. The wire itself is tested on real servers
/// (`GCSBackendTests`, `HostileServerTests`, the conformance suite).
@Suite struct GCSTransportTests {
    /// Answers each request with `answer`, and keeps the requests.
    final class Answering: HTTPTransport {
        let requests = Mutex<[HTTPRequest]>([])
        let answer: @Sendable (HTTPRequest) throws -> HTTPResponse

        init(_ answer: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) { self.answer = answer }

        func perform(_ request: HTTPRequest, hooks: TransferHooks) async throws -> HTTPResponse {
            requests.withLock { $0.append(request) }
            return try answer(request)
        }
    }

    func backend(_ transport: Answering, token: String? = "t0ken") -> GCSBackend {
        var configuration = GCSBackend.Configuration(bucket: "b", endpoint: "http://gcs.test:9000",
                                                     credentials: token.map { StaticToken($0) } ?? NoCredentials())
        configuration.transport = transport
        return GCSBackend(configuration)
    }

    /// The access check asks for the bucket once, with short timeouts and the token; a 404 is a
    /// missing bucket named with the fix, a 401 refused credentials, a 403 passes (an upload-only
    /// account may not read the bucket).
    @Test func theAccessCheckNamesWhatIsWrong() async throws {
        let transport = Answering { request in
            HTTPResponse(status: request.url.contains("/b/missing") ? 404 : request.url.contains("/b/locked") ? 403 : 401,
                         headers: [:], body: Data())
        }
        var configuration = backend(transport).configuration
        configuration.bucket = "missing"
        await #expect { try await GCSBackend(configuration).checkAccess() } throws: { error in
            let failure = error as? StorageFailure
            return failure?.code == .bucketNotFound && failure?.message == "Bucket missing does not exist at http://gcs.test:9000: check storage.url (gs://BUCKET)."
        }
        let request = try #require(transport.requests.withLock { $0.first })
        #expect(request.method == "GET" && request.url == "http://gcs.test:9000/storage/v1/b/missing?fields=name")
        #expect(request.connectTimeout == 5 && request.stallTimeout == 8)
        #expect(request.headers.contains { $0.name == "Authorization" && $0.value == "Bearer t0ken" })
        configuration.bucket = "locked"
        try await GCSBackend(configuration).checkAccess()
        configuration.bucket = "other"
        await #expect { try await GCSBackend(configuration).checkAccess() } throws: { error in
            (error as? StorageFailure)?.code == .unauthenticated
        }
    }

    /// Only the backend sees transport errors: a transient one is a retryable failure with no
    /// answer, an untrusted certificate one that is not retried and names the fix, a cancelled
    /// gate the `cancelled` error.
    @Test func transportErrorsBecomeStorageFailures() async throws {
        let transient = backend(Answering { _ in throw HTTPTransportError(code: 7, message: "Couldn't connect", isTransient: true) })
        await #expect { _ = try await transient.metadata(of: "a.txt") } throws: { error in
            let failure = error as? StorageFailure
            return failure?.retryable == true && failure?.noAnswer == true && failure?.message == "Connection to Cloud Storage failed: Couldn't connect"
        }
        let untrusted = backend(Answering { _ in
            throw HTTPTransportError(code: 60, message: "SSL certificate problem: self-signed certificate", isTransient: false,
                                     isCertificateProblem: true)
        })
        await #expect { _ = try await untrusted.metadata(of: "a.txt") } throws: { error in
            let failure = error as? StorageFailure
            return failure?.retryable == false && failure?.message.contains("is not trusted by the system's CA store") == true
                && failure?.message.contains("--ca-bundle") == true
        }
        let cancelled = backend(Answering { _ in throw HTTPTransportError(code: 42, message: "cancelled", isTransient: false, isCancelled: true) })
        await #expect { _ = try await cancelled.metadata(of: "a.txt") } throws: { error in
            StorageErrorCode(of: error) == .cancelled
        }
    }

    /// What the backend says it can do follows its transport: the executor it prefers is the
    /// transport's (none for one a test answers), and the CA bundle is its configuration's.
    @Test func capabilitiesFollowTheTransport() {
        var configuration = backend(Answering { _ in HTTPResponse(status: 200, headers: [:], body: Data()) }).configuration
        configuration.caBundle = "/etc/ca.pem"
        let capabilities = GCSBackend(configuration).capabilities
        #expect(capabilities.preferredExecutor == nil && capabilities.caBundle == "/etc/ca.pem")
        #expect(GCSBackend(GCSBackend.Configuration(bucket: "b")).capabilities.preferredExecutor != nil)
    }
}
