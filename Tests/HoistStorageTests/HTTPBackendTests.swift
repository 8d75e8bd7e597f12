import Foundation
import HoistHTTP
import Testing
@testable import HoistStorage

/// What GCS and S3 share (`HTTPBackend`): one mapping of transport errors to `StorageFailure`s
/// and one certificate advice, so the two backends say the same thing in the same case.
@Suite struct HTTPBackendTests {
    /// A certificate not trusted names every way to give a CA bundle (`--ca-bundle` too, which
    /// both backends honour); a CA bundle curl could not use (its code 77) is named as such; the
    /// server is the request's scheme, host and port as given.
    @Test func theCertificateAdviceNamesEveryWayToGiveACABundle() {
        let untrusted = HTTPTransportError(code: 60, message: "SSL certificate problem: self-signed certificate", isTransient: false,
                                           isCertificateProblem: true)
        for url in ["https://127.0.0.1:9000/b-1/a.txt", "https://storage.googleapis.com/storage/v1/b/b/o/a"] {
            let failure = HTTPBackend.failure(untrusted, url: url, caBundle: nil, service: "S3", bucket: "b-1") as? StorageFailure
            let server = url.contains("9000") ? "https://127.0.0.1:9000" : "https://storage.googleapis.com"
            #expect(failure?.message == "The TLS certificate of \(server) is not trusted by the system's CA store (SSL certificate "
                        + "problem). If a private CA or a proxy signs it, name that CA's bundle with --ca-bundle FILE, "
                        + "storage.caBundle, SSL_CERT_FILE or SSL_CERT_DIR.", "\(String(describing: failure))")
            #expect(failure?.retryable == false && failure?.noAnswer == false && failure?.details["bucket"] == "b-1")
        }
        let trusting = HTTPBackend.certificateAdvice(untrusted, url: "https://h:1/", caBundle: "/etc/ca.pem")
        #expect(trusting.contains("not trusted by the CA bundle /etc/ca.pem") && trusting.contains("--ca-bundle FILE"))
        let unusable = HTTPTransportError(code: HTTPBackend.caBundleUnusableCode, message: "Problem with the SSL CA cert (path? access "
                                              + "rights?)", isTransient: false, isCertificateProblem: true)
        #expect(HTTPBackend.certificateAdvice(unusable, url: "https://h:1/", caBundle: "/nope.pem")
                    == "Cannot use the CA bundle /nope.pem (Problem with the SSL CA cert (path? access rights?)): name a readable "
                    + "PEM file (or a folder hashed by `openssl rehash`) with --ca-bundle, storage.caBundle, SSL_CERT_FILE or SSL_CERT_DIR.")
    }

    /// Any other transport error: the service named, retryable when transient, no answer; a
    /// cancelled gate: the `cancelled` error.
    @Test func otherTransportErrorsNameTheService() {
        let refused = HTTPTransportError(code: 7, message: "Couldn't connect", isTransient: true)
        let failure = HTTPBackend.failure(refused, url: "http://minio:9000/b", caBundle: nil, service: "S3 at http://minio:9000",
                                          bucket: "b") as? StorageFailure
        #expect(failure?.message == "Connection to S3 at http://minio:9000 failed: Couldn't connect")
        #expect(failure?.retryable == true && failure?.noAnswer == true)
        let cancelled = HTTPTransportError(code: 42, message: "cancelled", isTransient: false, isCancelled: true)
        #expect(StorageErrorCode(of: HTTPBackend.failure(cancelled, url: "http://h/", caBundle: nil, service: "S3", bucket: "b")) == .cancelled)
    }
}
