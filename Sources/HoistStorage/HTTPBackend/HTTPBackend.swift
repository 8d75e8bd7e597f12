import Foundation
import HoistHTTP

/// What the backends that speak HTTP (GCS, S3) share about sending a request: how the
/// transport's errors become `StorageFailure`s, and the advice for a certificate not trusted.
enum HTTPBackend {
    /// curl's `CURLE_SSL_CACERT_BADFILE`: the CA bundle named could not be used.
    static let caBundleUnusableCode = 77

    /// Sends `request` (its CA bundle already set); transport errors become `StorageFailure`s (a
    /// cancelled transfer the `cancelled` error).
    /// - Parameter service: what the message says could not be reached ("Cloud Storage").
    static func perform(_ request: HTTPRequest, on transport: any HTTPTransport, hooks: TransferHooks = TransferHooks(),
                        service: String, bucket: String) async throws -> HTTPResponse {
        do {
            return try await transport.perform(request, hooks: hooks)
        } catch let error as HTTPTransportError {
            throw failure(error, url: request.url, caBundle: request.caBundle, service: service, bucket: bucket)
        } catch let error as HTTPBodyReadError {
            throw StorageFailure(.invalidArgument, error.message, details: ["file": error.path])
        }
    }

    /// The error a transport error stands for: a certificate not trusted (not retryable, and not
    /// "unreachable": the fix is trust, so it says which), a cancelled transfer, or a connection
    /// that failed (retryable when the transport says it is transient).
    static func failure(_ error: HTTPTransportError, url: String, caBundle: String?, service: String, bucket: String) -> any Error {
        if error.isCertificateProblem {
            return StorageFailure(.unknown, certificateAdvice(error, url: url, caBundle: caBundle), details: ["bucket": bucket])
        }
        if error.isCancelled { return TransferControl.cancelledError }
        return StorageFailure(.unknown, "Connection to \(service) failed: \(error.message)",
                              retryable: error.isTransient, noAnswer: true, details: ["bucket": bucket])
    }

    /// What an access check says when no server answered (`StorageFailure.noAnswer`): the
    /// service and endpoint, the proxy on the way if any, why, and where to look.
    /// - Parameter settings: the backend's own settings that point at a server ("STORAGE_EMULATOR_HOST").
    static func unreachable(_ failure: StorageFailure, service: String, endpoint: String, settings: String, bucket: String) -> StorageFailure {
        let route = EnvironmentProxy.describe(for: endpoint).map { " through the proxy \($0)" } ?? ""
        return StorageFailure(
            .unknown,
            "Cannot reach \(service) at \(endpoint)\(route) (\(failure.message)). Check the network, the proxy "
                + "(HTTPS_PROXY, NO_PROXY), or \(settings).", details: ["bucket": bucket])
    }

    /// One line for a TLS certificate that was not trusted: the server, curl's reason, and how to
    /// name the CA that signs it (every way a backend that speaks HTTP honours).
    static func certificateAdvice(_ error: HTTPTransportError, url: String, caBundle: String?) -> String {
        let server = URL(string: url).map { "\($0.scheme ?? "https")://\($0.host ?? "")\($0.port.map { ":\($0)" } ?? "")" } ?? url
        let reason = error.message.components(separatedBy: ": ").first ?? error.message
        if let caBundle, error.code == caBundleUnusableCode {
            return "Cannot use the CA bundle \(caBundle) (\(reason)): name a readable PEM file (or a folder hashed by "
                + "`openssl rehash`) with --ca-bundle, storage.caBundle, SSL_CERT_FILE or SSL_CERT_DIR."
        }
        let trusted = caBundle.map { "the CA bundle \($0)" } ?? "the system's CA store"
        return "The TLS certificate of \(server) is not trusted by \(trusted) (\(reason)). If a private CA or a proxy "
            + "signs it, name that CA's bundle with --ca-bundle FILE, storage.caBundle, SSL_CERT_FILE or SSL_CERT_DIR."
    }
}
