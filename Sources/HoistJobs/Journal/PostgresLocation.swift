import Foundation

/// Where a shared journal is: `postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=MODE`
/// (`postgresql://` too), as libpq spells it. The password may instead come from `PGPASSWORD`,
/// so that a manifest or a Kubernetes ConfigMap holds no secret.
///
/// Only `location` (the URL without its password) ever appears in a message or a log.
public struct PostgresLocation: Sendable, Equatable {
    public enum SSLMode: String, Sendable, CaseIterable {
        /// No TLS.
        case disable
        /// TLS when the server offers it, unverified (libpq's default).
        case prefer
        /// TLS or no connection, unverified (libpq's `require`).
        case require
        /// TLS with the server's certificate verified against the trust roots, any host name.
        case verifyCA = "verify-ca"
        /// TLS with the certificate verified and its name matching the host.
        case verifyFull = "verify-full"
    }

    public let host: String
    public let port: Int
    public let user: String
    let password: String?
    public let database: String
    public let sslMode: SSLMode
    /// `sslrootcert=`: a PEM file of the CAs trusted for `verify-ca`/`verify-full` (else the system's).
    public let rootCertificate: String?
    /// `connect_timeout=` in seconds (default 10, as the run must say within seconds that it cannot start).
    public let connectTimeout: Int
    /// The URL without its password: what messages show.
    public let location: String

    /// Whether `location` names a PostgreSQL journal rather than a SQLite file.
    public static func isPostgres(_ location: String) -> Bool {
        let lower = location.lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    /// Parses a journal URL.
    /// - Throws: `JournalError` saying what is wrong with it (never repeating the password).
    public init(_ url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "postgres" || scheme == "postgresql" else {
            throw JournalError(message: "the journal URL is not a valid postgres:// URL (postgres://USER:PASSWORD@HOST:PORT/DATABASE); "
                + "characters such as @, : and / in the password must be percent-encoded (%40, %3A, %2F).")
        }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        port = components.port ?? 5432
        user = components.user.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["PGUSER"] ?? "postgres"
        password = components.password.flatMap { $0.removingPercentEncoding } ?? environment["PGPASSWORD"]
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = (path.removingPercentEncoding ?? path).isEmpty ? user : (path.removingPercentEncoding ?? path)
        var mode = SSLMode.prefer
        var root: String?
        var timeout = 10
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value.flatMap(SSLMode.init(rawValue:)) else {
                    throw JournalError(message: "the journal URL's sslmode=\(item.value ?? "") is not one of "
                        + SSLMode.allCases.map(\.rawValue).joined(separator: ", ") + ".")
                }
                mode = value
            case "sslrootcert":
                root = item.value
            case "connect_timeout":
                guard let value = item.value.flatMap(Int.init), value > 0, value <= 3600 else {
                    throw JournalError(message: "the journal URL's connect_timeout=\(item.value ?? "") is not a number of seconds (1 to 3600).")
                }
                timeout = value
            default:
                throw JournalError(message: "the journal URL's parameter '\(item.name)' is not known: use sslmode, sslrootcert or connect_timeout.")
            }
        }
        sslMode = mode
        rootCertificate = root
        connectTimeout = timeout
        var shown = URLComponents()
        shown.scheme = scheme
        shown.host = components.host
        shown.port = components.port
        shown.user = components.user
        shown.path = components.path
        shown.percentEncodedQueryItems = components.percentEncodedQueryItems
        location = shown.string ?? "\(scheme)://\(host):\(port)/\(database)"
    }
}
