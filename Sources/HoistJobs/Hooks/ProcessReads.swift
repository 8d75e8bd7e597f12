import Foundation
import HoistHTTP

/// The files the process reads because its environment names them, whatever the job: the C
/// library's (a time zone file, locale and conversion folders, the resolver's host aliases) and
/// the HTTP engine's (`HTTPEnvironment`: CA bundles, OpenSSL's configuration and modules; hooks'
/// `http.*` go through it on every backend). Backends declare their own (`BackendOptions.reads`).
enum ProcessReads {
    /// glibc's variables that name a file or folder it reads.
    static let libraryVariables = ["TZDIR", "LOCPATH", "GCONV_PATH", "NLSPATH", "HOSTALIASES", "ICU_DATA", "ICU_TIMEZONE_FILES_DIR"]

    /// Each file or folder `environment` names: what it is, and its path (absolute, as given).
    static func reads(in environment: [String: String]) -> [(what: String, path: String)] {
        var reads = HTTPEnvironment.reads(in: environment).map { ("$\($0.variable)", $0.path) }
        for name in libraryVariables {
            // A `:`-separated list; NLSPATH's parts are templates (`/usr/share/locale/%L/%N`):
            // what comes before the first `%`.
            for part in (environment[name] ?? "").split(separator: ":") {
                guard let value = part.split(separator: "%", omittingEmptySubsequences: false).first, value.hasPrefix("/") else { continue }
                reads.append(("$\(name)", URL(fileURLWithPath: String(value)).path))
            }
        }
        // TZ names a file when it starts with ':' and a path, or is a path (POSIX's rule names stay).
        if let zone = environment["TZ"] {
            let path = zone.hasPrefix(":") ? String(zone.dropFirst()) : zone
            if path.hasPrefix("/") { reads.append(("$TZ", path)) }
        }
        return reads
    }
}
