import Foundation
import HoistHTTP
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// Everything Hoist reads back from a server, or from a journal's row, is hostile input: a
/// session URL elsewhere, an endless answer, an answer dripped a byte at a time. Each
/// test is named after the attack, against Tests/servers/hostilehttp.py (answers no real server
/// gives) or a real server with a forged session.
@Suite struct HostileServerTests {
    /// A resumable upload of 300 kB (multipart up to 1 KiB) to the hostile server, with fast
    /// stalls and a short retry budget; its last snapshot, or nil when it did not end in `seconds`.
    func upload(to server: HostileHTTPServer, seconds: Double = 30,
                configure: (inout GCSBackend.Configuration) -> Void = { _ in }) async throws -> StorageTaskSnapshot? {
        let storage = gcsStorage(bucket: "b", port: server.port) {
            $0.multipartThreshold = 1024
            $0.stallTimeout = 2
            configure(&$0)
        }
        storage.maxUploadRetryTime = 4
        let directory = try TemporaryDirectory()
        let file = try directory.write("obj", patternData(300_000))
        let task = storage.reference(withPath: "obj").putFile(from: file)
        let recorder = EventRecorder(task)
        let finished = await within(seconds) { await recorder.finished() }
        if finished == nil { task.cancel() }
        return try finished?.get()
    }

    /// A session's `Location` is where the file's bytes go: `file://` made libcurl write them to
    /// that path (as root, anywhere), `ftp://` or `gopher://` to another protocol, and another
    /// host or port got them with the token. A session URL must be http(s) on the endpoint's
    /// own host and port: these uploads fail, with nothing written and nothing sent elsewhere.
    @Test(arguments: ["file://{dir}/stolen", "FILE://{dir}/stolen", "ftp://{trap}/stolen", "gopher://{trap}/_PUT",
                      "http://{trap}/upload", "https://{trap}/upload", "http://{localtrap}/upload",
                      "http://user:pass@127.0.0.1:{port}/userinfo", "http://127.0.0.1:{port}@{trap}/at"])
    func aSessionLocationElsewhereGetsNoBytes(location: String) async throws {
        let server = try HostileHTTPServer(.script(["location 200 \(location)", "status 308"]))
        let last = try #require(try await upload(to: server), "the upload did not end")
        #expect(last.status == .failure)
        #expect(server.filesWritten.isEmpty, "libcurl wrote \(server.filesWritten) for \(location)")
        #expect(server.trapped.isEmpty, "\(server.trapped)")
        // Only the session's start reached the server: nothing was sent to the session URL.
        #expect(server.requests.count == 1, "\(server.requests)")
        let message = (last.error as NSError?)?.localizedDescription ?? ""
        #expect(message.contains("session URL"), "\(message)")
    }

    /// A journal's row is rewritten to name a session elsewhere (another host, another port of
    /// the same host, plain http): the next upload sent its status query and the file's bytes
    /// there with `Authorization: Bearer ya29...`, and took the answer as the truth. A session
    /// URL from a journal is checked as a server's is: the session is not used, the file is
    /// uploaded anew to the real server (behind a proxy that requires the token), and nothing,
    /// token or bytes, reaches the other host.
    @Test func aJournaledSessionOnAnotherHostGetsNoTokenAndNoBytes() async throws {
        let token = "ya29.hoist-secret-\(UUID().uuidString.prefix(8))"
        let proxy = try FaultProxy(upstreamPort: try StorageEmulator.port(), ["--require-bearer", token])
        let storage = gcsStorage(bucket: StorageEmulator.bucket, port: proxy.port) {
            $0.multipartThreshold = 1 << 20
            $0.credentials = StaticToken(token)
        }
        let attacker = try HostileHTTPServer(.script(["status 308"]))
        let directory = try TemporaryDirectory()
        let data = patternData(2 << 20 + 7, seed: 9)
        let file = try directory.write("f.bin", data)
        for session in ["\(attacker.url)/upload/storage/v1/b/\(StorageEmulator.bucket)/o?upload_id=x",
                        "http://\(attacker.trap)/upload?upload_id=x", "http://\(attacker.localTrap)/upload?upload_id=x",
                        "https://\(attacker.trap)/upload?upload_id=x"] {
            let name = "journaled-\(UUID().uuidString.prefix(8)).bin"
            let task = storage.reference(withPath: name).putFile(from: file, metadata: nil, resumingSession: session)
            let last = try #require(try await within(60) { await EventRecorder(task).finished() }?.get())
            #expect(last.status == .success, "\(session): \(String(describing: last.error))")
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: name, port: try StorageEmulator.port()) == data)
        }
        #expect(attacker.requests.isEmpty, "\(attacker.requests)")
        #expect(attacker.trapped.isEmpty, "\(attacker.trapped)")
        // Every request the real server got carried the token (the proxy refuses the others).
        #expect(proxy.requests.allSatisfy { $0["bearer"] as? Bool == true })
    }

    /// A journal's row (whoever can write the journal) names a session of the same server for another object. The
    /// file was stored under that other name, the task reported success, and the object the
    /// manifest names never existed. The stored object's bucket and name are checked against
    /// what was asked: the other object is taken back, and the file is stored under its own name.
    @Test func aJournaledSessionForAnotherObjectStoresNothingThere() async throws {
        let storage = gcsStorage(bucket: StorageEmulator.bucket, port: try StorageEmulator.port()) { $0.multipartThreshold = 1 << 20 }
        let suffix = UUID().uuidString.prefix(8)
        let data = patternData(2 << 20, seed: 11)
        // Another object's session, half sent (its first MiB): a row's session as a run leaves it.
        let other = try #require(gcsStorage(bucket: StorageEmulator.bucket, port: try StorageEmulator.port()) {
            $0.multipartThreshold = 1 << 20
            $0.chunkSize = 1 << 20
        }.backend as? GCSBackend)
        let foreign = try await other.startUpload(to: "stolen-\(suffix).bin", attributes: ObjectResource(), size: Int64(data.count))
        let half = try await foreign.send(from: ByteSource(data: data), at: 0, control: TransferControl(limiter: nil)) { _ in }
        guard case .partial(1 << 20) = half else { Issue.record("the other session holds \(half)"); return }
        let directory = try TemporaryDirectory()
        let file = try directory.write("f.bin", data)
        let task = storage.reference(withPath: "wanted-\(suffix).bin").putFile(from: file, metadata: nil, resumingSession: foreign.id)
        let last = await EventRecorder(task).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.name == "wanted-\(suffix).bin")
        let port = try StorageEmulator.port()
        #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "wanted-\(suffix).bin", port: port) == data)
        #expect(try await !FakeGCS.exists(bucket: StorageEmulator.bucket, object: "stolen-\(suffix).bin", port: port))
    }

    /// A bucket `GET` answered with an endless body grew Hoist by 3 GB in 11 s. Every answer is
    /// capped (1 MiB of body, 256 KiB of headers): the access check fails at once, saying the
    /// limit, and memory stays flat.
    @Test(arguments: ["endless-body", "endless-chunked", "big-length 50000000", "header-flood", "interim-flood"])
    func anEndlessAnswerStopsAtTheLimit(answer: String) async throws {
        try await ExclusiveTests.shared.run {
            let server = try HostileHTTPServer(.script([answer]))
            let backend = GCSBackend(GCSBackend.Configuration(bucket: "b", endpoint: server.url))
            try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)   // resets VmHWM
            let before = Self.peakResidentBytes()
            let started = Date()
            let result = try #require(await within(12) { try await backend.checkAccess() }, "the access check did not end")
            let seconds = Date().timeIntervalSince(started)
            let grown = Self.peakResidentBytes() - before
            #expect(seconds < 10)
            #expect(grown < 200 << 20, "peak memory grew by \(grown >> 20) MiB")
            #expect(throws: StorageFailure.self) { try result.get() }
            guard case .failure(let error) = result else { return }
            let limit = answer.hasSuffix("flood") ? "headers are larger than 262144 bytes (256 KiB)" : "is larger than 1048576 bytes (1 MiB)"
            #expect("\(error)".contains(limit), "\(error)")
        }
    }

    /// The stall timer never fired once one byte had arrived: a server sending a byte every few
    /// seconds held the access check for ever (a cron run would hold its lock for ever). Fewer
    /// than a minimum of bytes in a stall window is a stall: the access check gives up within
    /// its 8 s window. The three answers are served at once, each by a server of its own (each
    /// check waits out its window: one after the other, they took 24 s).
    @Test func aDripFedAccessCheckIsAStall() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for answer in ["drip-body 1", "drip-body 30", "drip-headers 1"] {
                let server = try HostileHTTPServer(.script([answer]))
                group.addTask { try await Self.dripFedAccessCheck(server, answer: answer) }
            }
            try await group.waitForAll()
        }
    }

    static func dripFedAccessCheck(_ server: HostileHTTPServer, answer: String) async throws {
        let backend = GCSBackend(GCSBackend.Configuration(bucket: "b", endpoint: server.url))
        let started = Date()
        let result = try #require(await within(40) { try await backend.checkAccess() }, "\(answer): the access check did not end")
        #expect(Date().timeIntervalSince(started) < 20, "\(answer)")
        #expect(throws: StorageFailure.self, "\(answer)") { try result.get() }
        guard case .failure(let error) = result else { return }
        #expect("\(error)".contains("Cannot reach Cloud Storage") && "\(error)".contains("stalled"), "\(answer): \(error)")
    }

    /// An upload whose server takes the bytes and then drips its answer's body: each attempt is
    /// a stall (retryable), retried until the budget is spent, never held.
    @Test func aDripFedUploadIsAStallRetried() async throws {
        let server = try HostileHTTPServer(.script(["location 200 http://127.0.0.1:{port}/upload/storage/v1/b/b/o?upload_id=drip", "drip-body 1"]))
        let storage = gcsStorage(bucket: "b", port: server.port) {
            $0.multipartThreshold = 1024
            $0.stallTimeout = 2
        }
        storage.maxUploadRetryTime = 5
        let directory = try TemporaryDirectory()
        let task = storage.reference(withPath: "obj").putFile(from: try directory.write("obj", patternData(300_000)))
        let recorder = EventRecorder(task)
        let retries = RetryLog()
        task.observeRetries { retries.append($0) }
        let started = Date()
        let finished = await within(60) { await recorder.finished() }
        if finished == nil { task.cancel() }
        let last = try #require(try finished?.get(), "the upload did not end")
        #expect(Date().timeIntervalSince(started) < 30)
        #expect(last.status == .failure && errorCode(last) == .retryLimitExceeded, "\(String(describing: last.error))")
        #expect(!retries.all.isEmpty && retries.all.allSatisfy { $0.message.contains("stalled") }, "\(retries.all)")
    }

    /// An answer whose first header line is folded (starts with a space), after an earlier
    /// answer on the same engine: libcurl 7.88 read the earlier answer's freed last header from
    /// a reused easy handle and crashed the process (found by `HTTPFuzzTests`). Each is a
    /// failed request now (libcurl refuses the fold), and the engine goes on serving.
    @Test func aFoldedFirstHeaderDoesNotCrashTheEngine() async throws {
        let folded = #"raw HTTP/1.1 200 OK\r\n Folded: continuation\r\nContent-Length: 2\r\n\r\n{}"#
        let server = try HostileHTTPServer(.script(["json 200 {}", folded, "json 200 {}", folded, "json 200 {}"]))
        var outcomes: [String] = []
        for _ in 0..<5 {
            do {
                outcomes.append("\(try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: server.url + "/x")).status)")
            } catch {
                outcomes.append("\(type(of: error))")
            }
        }
        #expect(outcomes == ["200", "HTTPTransportError", "200", "HTTPTransportError", "200"])
    }

    /// VmHWM of this process, in bytes.
    static func peakResidentBytes() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
}

/// Retries as an observer heard them.
final class RetryLog: Sendable {
    private let retries = Mutex<[StorageUploadRetry]>([])
    func append(_ retry: StorageUploadRetry) { retries.withLock { $0.append(retry) } }
    var all: [StorageUploadRetry] { retries.withLock { $0 } }
}
