import Foundation
import HoistHTTP

/// Where a backend gets the bearer token for its requests. Tokens never appear in logs, error
/// messages or snapshots.
public protocol AccessTokenProvider: Sendable {
    /// The token to send now, or nil to send none (emulators, public buckets).
    func accessToken() async throws -> String?
}

/// No credentials: for emulators.
public struct NoCredentials: AccessTokenProvider {
    public init() {}
    public func accessToken() async throws -> String? { nil }
}

/// A token given as it is, such as `$GOOGLE_OAUTH_ACCESS_TOKEN`.
public struct StaticToken: AccessTokenProvider {
    private let token: String
    public init(_ token: String) { self.token = token }
    public func accessToken() async throws -> String? { token }
}

/// The credentials Google's clients would pick up from the environment: none when
/// `STORAGE_EMULATOR_HOST` is set; else `HOIST_ACCESS_TOKEN` or `GOOGLE_OAUTH_ACCESS_TOKEN`;
/// else the service-account key file named by `GOOGLE_APPLICATION_CREDENTIALS`; else none.
/// `caBundle` is the CA bundle a service account trusts at its token endpoint.
public func credentialsFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment,
                                      caBundle: String? = nil, transport: any HTTPTransport = HTTPTransports.standard) throws
    -> any AccessTokenProvider
{
    if let host = environment["STORAGE_EMULATOR_HOST"], !host.isEmpty { return NoCredentials() }
    for name in ["HOIST_ACCESS_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN"] {
        if let token = environment[name], !token.isEmpty { return StaticToken(token) }
    }
    if let keyFile = environment["GOOGLE_APPLICATION_CREDENTIALS"], !keyFile.isEmpty {
        return try ServiceAccountCredentials(keyFile: keyFile, caBundle: caBundle, transport: transport)
    }
    return NoCredentials()
}
