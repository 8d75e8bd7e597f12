import Foundation
import Synchronization

/// A real PostgreSQL (Debian's `postgresql` package, `scripts/setup --test`) in a temporary
/// folder: `initdb` with a password (scram-sha-256) for the superuser `hoist`, the server on a
/// free port of 127.0.0.1 with its socket in the folder, stopped (fast shutdown) and the folder
/// removed when the value goes, killed when the test process exits. `initdb` refuses root, so
/// as root both run as the `postgres` user (`setpriv`, which execs: the pid is the server's).
public final class PostgresServer: @unchecked Sendable {
    public static let user = "hoist"
    public static let password = "s3cret-Pa55"
    public let port: Int
    public let folder: URL
    private let process = Process()

    /// The server this test process shares (each test makes a database of its own).
    public static func shared() throws -> PostgresServer {
        try sharedServer.withLock { server in
            if let server { return server }
            let started = try PostgresServer()
            server = started
            return started
        }
    }
    private static let sharedServer = Mutex<PostgresServer?>(nil)

    /// The folder of PostgreSQL 15's programs (or the newest installed).
    public static var binaries: String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return "\(root)/\(versions.contains(15) ? 15 : versions.last ?? 15)/bin"
    }

    /// The server's log (connections are logged, with their TLS).
    public var logFile: URL { folder.appendingPathComponent("server.log") }

    /// - Parameter tls: certificates to serve TLS with (`ssl=on`), or none.
    public init(tls: TestCertificates? = nil) throws {
        folder = URL(fileURLWithPath: "/tmp/hoist-pg-\(UUID().uuidString.prefix(12))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let asPostgres = geteuid() == 0
        if asPostgres {
            guard let account = getpwnam("postgres") else { throw TestServerError("no postgres user: run scripts/setup --test") }
            guard chown(folder.path, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else { throw TestServerError("chown failed") }
        }
        let passwordFile = folder.appendingPathComponent("pw")
        try Self.password.write(to: passwordFile, atomically: true, encoding: .utf8)
        if asPostgres, let account = getpwnam("postgres") { chown(passwordFile.path, account.pointee.pw_uid, account.pointee.pw_gid) }
        let data = folder.appendingPathComponent("data").path
        let initdb = try runProcess(asPostgres ? "/usr/bin/setpriv" : "\(Self.binaries)/initdb",
                                    Self.prefix(asPostgres, "\(Self.binaries)/initdb") + [
                                        "-D", data, "-U", Self.user, "--pwfile", passwordFile.path, "-A", "scram-sha-256",
                                        "-E", "UTF8", "--locale", "C", "--no-sync"])
        guard initdb.status == 0 else { throw TestServerError("initdb failed: \(initdb.stderr)") }
        var settings: [String] = []
        if let tls {
            // The key must belong to the server's user and be private to it.
            for (from, to) in [(tls.certificateFile, "server.pem"), (tls.keyFile, "server.key")] {
                let target = folder.appendingPathComponent(to).path
                try FileManager.default.copyItem(atPath: from, toPath: target)
                chmod(target, 0o600)
                if asPostgres, let account = getpwnam("postgres") { chown(target, account.pointee.pw_uid, account.pointee.pw_gid) }
            }
            // Also on 127.0.0.2: the same server under a name its certificate does not give.
            settings += ["-c", "listen_addresses=127.0.0.1,127.0.0.2", "-c", "ssl=on", "-c", "ssl_cert_file=\(folder.path)/server.pem", "-c", "ssl_key_file=\(folder.path)/server.key"]
        }
        port = try freePort()
        process.executableURL = URL(fileURLWithPath: asPostgres ? "/usr/bin/setpriv" : "\(Self.binaries)/postgres")
        process.arguments = Self.prefix(asPostgres, "\(Self.binaries)/postgres") + [
            "-D", data, "-p", "\(port)", "-k", folder.path, "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200",
            "-c", "log_connections=on"] + settings
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        if asPostgres, let account = getpwnam("postgres") { chown(logFile.path, account.pointee.pw_uid, account.pointee.pw_gid) }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: logFile)
        try process.run()
        ServerProcess.started.withLock { _ = $0.insert(process.processIdentifier) }
        ServerProcess.installExitHandler
        Self.folders.withLock { $0[folder.path] = process.processIdentifier }
        Self.installExitHandler
        try waitForPort(port, timeout: 30)
        // Accepting connections is not yet accepting logins: wait for a query to go through.
        let deadline = Date().addingTimeInterval(30)
        while try psql("SELECT 1").status != 0 {
            if Date() > deadline { throw TestServerError("PostgreSQL did not accept logins in 30 s") }
            usleep(100_000)
        }
    }

    /// Every server's folder and pid, to stop and remove when the test process exits (the
    /// shared server is never released; its data would stay in /tmp).
    static let folders = Mutex<[String: Int32]>([:])
    static let installExitHandler: Void = {
        atexit {
            for (folder, pid) in PostgresServer.folders.withLock({ $0 }) {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                try? FileManager.default.removeItem(atPath: folder)
            }
        }
    }()

    private static func prefix(_ asPostgres: Bool, _ program: String) -> [String] {
        asPostgres ? ["--reuid", "postgres", "--regid", "postgres", "--init-groups", "--", program] : [program]
    }

    deinit {
        // SIGINT: fast shutdown (SIGTERM would wait for every client to leave).
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        ServerProcess.started.withLock { _ = $0.remove(process.processIdentifier) }
        Self.folders.withLock { _ = $0.removeValue(forKey: folder.path) }
        try? FileManager.default.removeItem(at: folder)
    }

    /// A URL for `database` (default: the `postgres` database).
    public func url(database: String = "postgres", password: String? = PostgresServer.password, query: String = "") -> String {
        let credentials = password.map { "\(Self.user):\($0)" } ?? Self.user
        return "postgres://\(credentials)@127.0.0.1:\(port)/\(database)" + (query.isEmpty ? "" : "?" + query)
    }

    /// Runs SQL with psql; returns its exit status and output.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> (status: Int32, stdout: String, stderr: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["PGPASSWORD"] = Self.password
        return try runProcess("\(Self.binaries)/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                                                         "-p", "\(port)", "-U", Self.user, "-d", database, "-c", sql],
                              environment: environment)
    }

    /// A new empty database; returns its URL.
    public func makeDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let made = try psql("CREATE DATABASE \(name)")
        guard made.status == 0 else { throw TestServerError("CREATE DATABASE failed: \(made.stderr)") }
        return url(database: String(name))
    }

    /// The database name in one of this server's URLs.
    public static func database(of url: String) -> String {
        String(url.split(separator: "/").last?.split(separator: "?").first ?? "")
    }
}
