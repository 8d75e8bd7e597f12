import Foundation
import HoistHTTP
import HoistTestSupport
import Testing
@testable import HoistStorage

/// The GCS backend's real requests (bucket access check, metadata GET, resumable start, the
/// data PUT, status query, a journaled session's resume, a multipart upload) sent to a server
/// that answers each with a hostile answer from the corpus Tests/fuzz/corpus/http-answers.txt
/// (Tests/servers/hostilehttp.py): bad status lines, floods of headers, Locations to other
/// schemes and hosts, endless and dripping bodies, resets, wrong lengths, chunked garbage, JSON
/// that lies, error messages that would forge Hoist's lines. Whatever the answers, every
/// operation ends within a bound, with a value or a typed `StorageFailure` whose message is one
/// bounded line; no file is written through a `file://` Location; nothing reaches
/// another host or port (the server's traps); the token goes nowhere else.
///
/// The normal suite serves every corpus answer once, in order, then a seeded random run;
/// `HOIST_HTTP_FUZZ_SEED` and `HOIST_HTTP_FUZZ_ROUNDS` (a multiplier of 40 operations) explore
/// further, and a failure names the seed, the operation and the answers it met.
@Suite(.serialized) struct HTTPFuzzTests {
    static let seed = ProcessInfo.processInfo.environment["HOIST_HTTP_FUZZ_SEED"].flatMap(UInt64.init) ?? 0x4854_5450
    static let rounds = ProcessInfo.processInfo.environment["HOIST_HTTP_FUZZ_ROUNDS"].flatMap(Int.init) ?? 1
    /// The stall window the backend gets here: every drip is given up within about this long.
    static let stall = 1.5
    /// The longest one operation may take: its few requests, each at most a stall window and
    /// the engine's turn, with room for a loaded machine.
    static let bound = 15.0

    enum Operation: CaseIterable {
        case accessCheck, metadata, resumableUpload, resumedSession, multipartUpload
    }

    let data = patternData(300_000, seed: 21)

    /// Runs `operation` against `server`: nil when it ended as it may (a value or a
    /// `StorageFailure`), else what went wrong.
    func attempt(_ operation: Operation, on server: HostileHTTPServer) async -> String? {
        var configuration = GCSBackend.Configuration(bucket: "b", endpoint: server.url, downloadEndpoint: server.url,
                                                     credentials: StaticToken("ya29.fuzz-token"))
        configuration.multipartThreshold = 1024
        configuration.stallTimeout = Self.stall
        let backend = GCSBackend(configuration)
        let data = self.data
        let url = server.url
        let started = Date()
        let result = await within(Self.bound) { () async throws -> Void in
            let control = TransferControl(limiter: nil)
            switch operation {
            case .accessCheck:
                try await backend.checkAccess()
            case .metadata:
                _ = try await backend.metadata(of: "obj")
            case .resumableUpload, .multipartUpload:
                let size = operation == .multipartUpload ? 500 : data.count
                let session = try await backend.startUpload(to: "obj", attributes: ObjectResource(), size: Int64(size))
                let source = ByteSource(data: data.prefix(size))
                if case .partial(let offset) = try await session.send(from: source, at: 0, control: control, progress: { _ in }) {
                    _ = try await session.confirmedOffset()
                    _ = offset
                }
            case .resumedSession:
                let session = try await backend.resumeUpload(id: "\(url)/upload/storage/v1/b/b/o?uploadType=resumable&upload_id=fuzz")
                let offset = try await session.confirmedOffset()
                _ = try await session.send(from: ByteSource(data: data), at: offset, control: control, progress: { _ in })
            }
        }
        let seconds = Date().timeIntervalSince(started)
        guard let result else { return "\(operation) did not end in \(Self.bound) s" }
        if case .failure(let error) = result, !(error is StorageFailure) {
            return "\(operation) threw \(type(of: error)): \(error)"
        }
        if case .failure(let error as StorageFailure) = result, let problem = Self.notOneLine(error.message) {
            return "\(operation)'s message is not one line (\(problem)): \(error.message.debugDescription.prefix(300))"
        }
        return seconds > Self.bound ? "\(operation) took \(seconds) s" : nil
    }

    /// Why a failure's message is not one bounded line that a terminal shows as it is (a
    /// server's text in it escaped and cut: `printable`), or nil.
    static func notOneLine(_ message: String) -> String? {
        if let scalar = message.unicodeScalars.first(where: { ($0.value < 0x20 && $0 != "\t") || reordersOrControlsTerminal($0) }) {
            return "U+\(String(scalar.value, radix: 16, uppercase: true))"
        }
        return message.count > 1000 ? "\(message.count) characters" : nil
    }

    /// Runs `count` operations (cycling through them) against `server`; each failure names the
    /// operation and the answers it met.
    func fuzz(_ server: HostileHTTPServer, operations count: Int, label: String, until: (() -> Bool)? = nil) async {
        var index = 0
        while index < count || (until.map { !$0() } ?? false), index < 4 * max(count, 100) {
            let operation = Operation.allCases[index % Operation.allCases.count]
            let before = server.requests.count
            if let problem = await attempt(operation, on: server) {
                let answers = server.requests.dropFirst(before).compactMap { $0["answer"] as? String }
                Issue.record("\(label): \(problem); answers: \(answers)")
            }
            index += 1
        }
        #expect(server.filesWritten.isEmpty, "\(label): written through a file:// URL: \(server.filesWritten)")
        #expect(server.trapped.isEmpty, "\(label): reached another host or port: \(server.trapped)")
        let elsewhere = server.requests.filter { ($0["host"] as? String) != "127.0.0.1:\(server.port)" }
        #expect(elsewhere.isEmpty, "\(label): requests with another Host: \(elsewhere)")
    }

    /// Every answer of the corpus, in order, to the operations in turn.
    @Test func everyCorpusAnswerEndsBoundedAndTyped() async throws {
        let lines = try String(contentsOf: HostileHTTPServer.corpus, encoding: .utf8).split(separator: "\n")
            .filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty && !$0.hasPrefix("#") }
        let server = try HostileHTTPServer(.cycle)
        let started = Date()
        await fuzz(server, operations: Operation.allCases.count, label: "corpus") { server.requests.count >= lines.count }
        #expect(server.requests.count >= lines.count)
        print("HTTPFuzzTests: \(server.requests.count) hostile answers in \(Int(Date().timeIntervalSince(started))) s")
    }

    /// Answers picked at random from the corpus, seeded.
    @Test func seededHostileAnswersEndBoundedAndTyped() async throws {
        let server = try HostileHTTPServer(.seed(Self.seed))
        await fuzz(server, operations: 40 * Self.rounds, label: "seed \(Self.seed)")
    }
}
