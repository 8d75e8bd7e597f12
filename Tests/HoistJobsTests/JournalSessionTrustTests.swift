import Foundation
import HoistHTTP
import HoistStorage
import HoistTestSupport
import Testing

/// Whoever can write to the journal can make a run send the files its manifest names, to the
/// objects its manifest names, on the job's own server, and nothing else (docs/scale.md,
/// "Trust"). A row's session URL is what a run continues a half-sent file with: rewritten to
/// another host, another port or another object's session, it must get nothing.
@Suite(.serialized) struct JournalSessionTrustTests {
    /// Runs `hoist` with `arguments`, killing it after `seconds`: its exit status (nil when it
    /// had to be killed) and output.
    func run(_ arguments: [String], environment: [String: String], seconds: Double = 90) throws -> (status: Int32?, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let pid = process.processIdentifier
        let killer = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: killer)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        killer.cancel()
        let killed = process.terminationReason == .uncaughtSignal
        return (killed ? nil : process.terminationStatus, text)
    }

    /// Three large files are uploaded; then their journal rows are rewritten to say "uploading,
    /// session S" with S a session on the attacker's server (another port of the same host), on
    /// another host, and one of the real server for another object; and the files are given new
    /// bytes of the same size and time (so the run believes the rows). The next run sends the
    /// new bytes to the real server under the manifest's names: nothing reaches the attacker,
    /// no object is made under the other name, and the journal says done.
    func journaledSessionsElsewhereGetNothing(journal: String?, worker: Bool, rewrite: (String, JobFixture) throws -> Void)
        async throws
    {
        let fixture = try JobFixture()
        let prefix = "trust-\(UUID().uuidString.prefix(8))"
        let size = (2 << 20) + 11
        let mtime = Date(timeIntervalSince1970: 1_700_000_000)
        for name in ["a.bin", "b.bin", "c.bin"] { try fixture.file(name, size, modified: mtime) }
        let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "200MB/s")
        let arguments = ["run"] + (worker ? ["--worker"] : []) + (journal.map { ["--journal", $0] } ?? []) + [job.manifest]
        let first = try run(arguments, environment: job.environment)
        #expect(first.status == 0, "\(first.output)")

        let attacker = try HostileHTTPServer(.script(["status 308"]))
        var start = HTTPRequest(method: "POST", url: "http://127.0.0.1:\(job.port)/upload/storage/v1/b/\(StorageEmulator.bucket)/o?uploadType=resumable",
                                headers: [("Content-Type", "application/json")])
        start.body = [.data(Data(#"{"name":"\#(prefix)/stolen.bin"}"#.utf8))]
        let foreign = try #require(try await CurlEngine.shared.perform(start).header("Location"))
        // That session half sent (its first MiB), as a run leaves a row's session.
        var half = HTTPRequest(method: "PUT", url: foreign, headers: [("Content-Range", "bytes 0-\((1 << 20) - 1)/*")])
        half.body = [.data(patternData(1 << 20, seed: 42))]
        #expect(try await CurlEngine.shared.perform(half).status == 308)
        let sessions = ["a.bin": "\(attacker.url)/upload/storage/v1/b/\(StorageEmulator.bucket)/o?upload_id=x",
                        "b.bin": "http://\(attacker.trap)/upload?upload_id=x",
                        "c.bin": foreign.replacingOccurrences(of: ":\(job.port)/", with: ":\(job.proxy.port)/")]
        for (name, session) in sessions {
            try rewrite("UPDATE %FILE% SET state = 'uploading', session = '\(session)' WHERE destination = '\(prefix)/\(name)'", fixture)
        }
        var changed: [String: Data] = [:]
        for (index, name) in ["a.bin", "b.bin", "c.bin"].enumerated() {
            changed[name] = patternData(size, seed: UInt8(40 + index))
            let url = try fixture.directory.write("src/" + name, changed[name]!)
            try FileManager.default.setAttributes([.modificationDate: mtime], ofItemAtPath: url.path)
        }

        let second = try run(arguments, environment: job.environment)
        #expect(second.status == 0, "\(second.output)")
        #expect(attacker.requests.isEmpty, "\(attacker.requests)")
        #expect(attacker.trapped.isEmpty, "\(attacker.trapped)")
        for (name, data) in changed {
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/\(name)", port: job.port) == data, "\(name)")
        }
        #expect(try await !FakeGCS.exists(bucket: StorageEmulator.bucket, object: "\(prefix)/stolen.bin", port: job.port))
        let third = try run(arguments, environment: job.environment)
        #expect(third.output.contains("0 uploaded (0 B), 3 unchanged"), "\(third.output)")
    }

    /// The default journal (SQLite beside the manifest), rewritten with Python's sqlite3.
    @Test func aJournalRowsSessionElsewhereGetsNothing() async throws {
        try await journaledSessionsElsewhereGetNothing(journal: nil, worker: false) { sql, fixture in
            let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
            _ = try python("""
                import sqlite3
                c = sqlite3.connect('\(journal)'); c.execute(\"\"\"\(sql.replacingOccurrences(of: "%FILE%", with: "file"))\"\"\"); c.commit(); c.close()
                """)
        }
    }

    /// Workers of a shared run on PostgreSQL read the same field from `hoist_file`.
    @Test func aSharedRunsSessionElsewhereGetsNothing() async throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        try await journaledSessionsElsewhereGetNothing(journal: url, worker: true) { sql, _ in
            let result = try server.psql(sql.replacingOccurrences(of: "%FILE%", with: "hoist_file") + " RETURNING destination",
                                         database: PostgresServer.database(of: url))
            #expect(result.status == 0 && result.stdout.contains(".bin"), "\(result)")
        }
    }
}
