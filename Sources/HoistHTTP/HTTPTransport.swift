import Foundation

/// Sends one HTTP request and hands back its answer: what the GCS backend, the service-account
/// token exchange and hooks' `http.post` take, so that a unit test can answer their requests
/// without a server (as firebase-ios-sdk's fetcher takes a `testBlock`). `CurlEngine` is the one
/// real transport; wire behaviour is tested on it, against real servers.
///
/// Contract: the answer of any status is returned (a 404 is an answer, not an error); a request
/// that gets no answer throws `HTTPTransportError` (`isTransient` when another try may get one,
/// `isCancelled` when its gate cancelled it) or `HTTPBodyReadError` (its body file could not be
/// read). Nothing else is thrown.
public protocol HTTPTransport: Sendable {
    func perform(_ request: HTTPRequest, hooks: TransferHooks) async throws -> HTTPResponse

    /// The executor on whose thread answers arrive, for tasks that want to resume there with no
    /// other thread woken; nil (the default) when there is none to prefer.
    var preferredExecutor: (any TaskExecutor)? { get }
}

extension HTTPTransport {
    public var preferredExecutor: (any TaskExecutor)? { nil }

    /// `perform(_:hooks:)` with no hooks.
    public func perform(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await perform(request, hooks: TransferHooks())
    }
}

extension CurlEngine: HTTPTransport {
    /// The engine itself: it runs the jobs of tasks that prefer it between its turns.
    public var preferredExecutor: (any TaskExecutor)? { self }
}

/// The composition of defaults: the transport everything uses unless it is handed another.
/// The one place that names `CurlEngine.shared`.
public enum HTTPTransports {
    /// The process's engine: one thread driving every transfer. Handing it out starts nothing:
    /// the engine (libcurl, its thread) starts at the first request or executor asked for, so a
    /// run that never speaks HTTP (a local bucket, no `http.post`) never starts it.
    public static let standard: any HTTPTransport = Standard()

    private struct Standard: HTTPTransport {
        func perform(_ request: HTTPRequest, hooks: TransferHooks) async throws -> HTTPResponse {
            try await CurlEngine.shared.perform(request, hooks: hooks)
        }
        var preferredExecutor: (any TaskExecutor)? { CurlEngine.shared }
    }
}
