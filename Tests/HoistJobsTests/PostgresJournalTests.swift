import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import Testing

/// The shared journal on a real PostgreSQL (`PostgresServer`): the journal protocol itself, and
/// `hoist run`/`status`/`plan` on it.
@Suite(.serialized) struct PostgresJournalTests {
    func row(_ source: String, _ state: Journal.FileState = .done, session: String? = nil, size: Int64 = 10) -> Journal.FileRecord {
        Journal.FileRecord(source: source, destination: "d/" + source, size: size, mtime: 1_700_000_000.123456, attributes: "{}",
                           state: state, session: session, runID: "r1")
    }

    @Test func theJournalProtocolOnPostgreSQL() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let journal = try Journal.open(url, job: "one")
        #expect(journal.location == url.replacingOccurrences(of: ":\(PostgresServer.password)@", with: "@"))
        #expect(!journal.location.contains(PostgresServer.password))
        // Byte order, as a walk goes: capitals before lower case, "a/" before "a0", é (UTF-8 C3 A9) after z.
        let hostile = "/r/x'); DROP TABLE hoist_file; --"
        let sources = ["/r/b", "/r/a0", "/r/a/z", "/r/B", "/r/é", "/r/z", hostile]
        try journal.apply(sources.map { .file(row($0)) })
        // A key twice in one batch keeps its last row; progress lands on it; a run row goes with them.
        try journal.apply([.file(row("/r/z", .uploading)), .file(row("/r/z", .uploading, session: "s1")),
                           .progress(source: "/r/z", destination: "d//r/z", session: "s2", offset: 4096),
                           .run(Journal.RunRecord(id: "run1", job: "one", started: 5, finished: nil, uploaded: 0, skipped: 0,
                                                  failed: 0, cancelled: 0, bytes: 0, status: .running, pid: 42, error: nil))])
        let rows = try journal.rows(from: "/r/", below: "/r0", after: nil, limit: 100)
        #expect(rows.map(\.source) == sources.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        #expect(rows.map(\.source) == ["/r/B", "/r/a/z", "/r/a0", "/r/b", "/r/x'); DROP TABLE hoist_file; --", "/r/z", "/r/é"])
        let page = try journal.rows(from: "/r/", below: "/r0", after: (source: "/r/a/z", destination: "d//r/a/z"), limit: 2)
        #expect(page.map(\.source) == ["/r/a0", "/r/b"])
        let z = try #require(try journal.record(source: "/r/z", destination: "d//r/z"))
        #expect(z.state == .uploading && z.session == "s2" && z.confirmedOffset == 4096 && z.mtime == 1_700_000_000.123456)
        #expect(try journal.lookup(source: hostile, destination: "d/" + hostile)?.state == .done)
        #expect(try journal.lookup(source: "/r/none", destination: "x") == nil)
        #expect(try journal.fileCounts() == [.done: 6, .uploading: 1])
        #expect(try journal.files(state: .uploading, limit: 5).map(\.source) == ["/r/z"])
        // Another job in the same database sees none of it.
        let other = try Journal.open(url, job: "two")
        #expect(try other.fileCounts().isEmpty)
        #expect(try other.lookup(source: "/r/b", destination: "d//r/b") == nil)
        // A claim marks the job's left-running runs interrupted (the other job's are its own).
        let lock = try journal.claimRun(wait: false)
        #expect(try journal.runs(limit: 5).map(\.status) == [.interrupted])
        lock.release()
        // The schema was migrated once, by version.
        let database = PostgresServer.database(of: url)
        #expect(try server.psql("SELECT identifier FROM hoist_migrations", database: database).stdout == "v1\nv2\nv3\nv4\nv5\nv6\n")
        #expect(try server.psql("SELECT count(*) FROM hoist_file", database: database).stdout == "7\n")
    }

    /// Shards (`--shard K/N`) and workers (`--worker`) split a job two ways that do not mix: the
    /// one way going keeps the other out, whichever came first.
    @Test func shardsAndWorkersOfOneJobDoNotRunTogether() throws {
        let url = try PostgresServer.shared().makeDatabase()
        let shard = try PostgresJournal(url: url, job: "mixed", shard: try Shard(index: 0, count: 2))
        let otherShard = try PostgresJournal(url: url, job: "mixed", shard: try Shard(index: 1, count: 2))
        func refusal(_ start: () throws -> any JobRunLock) -> String {
            do {
                try start().release()
                return "started"
            } catch {
                return "\(error)"
            }
        }
        let held = try shard.claimRun(wait: false)
        let toWorker = refusal { try SharedRun(journal: try PostgresJournal(url: url, job: "mixed"), wait: true) }
        #expect(toWorker.contains("shard processes of job mixed are running (pid \(getpid()) on "), "\(toWorker)")
        #expect(toWorker.contains("split a job two ways that do not mix"), "\(toWorker)")
        try otherShard.claimRun(wait: false).release()
        held.release()
        let worker = try SharedRun(journal: try PostgresJournal(url: url, job: "mixed"), wait: false)
        for wait in [false, true] {
            let toShard = refusal { try shard.claimRun(wait: wait) }
            #expect(toShard.contains("worker processes of job mixed are running"), "\(toShard)")
        }
        worker.release()
        try shard.claimRun(wait: false).release()
    }

    /// `hoist watch`'s state on a PostgreSQL journal: read back only while the session that
    /// wrote it holds the job's run lock, and only as a state parses (a row is hostile input).
    @Test func aWatchersStateIsBelievedOnlyWhileItsSessionHoldsTheRunLock() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let journal = try Journal.open(url, job: "one")
        var state = WatchState(pid: 4242, since: 1_700_000_000)
        state.queue = 3
        state.lastUpload = "/r/a"
        try journal.recordWatchState(state)   // no lock held: nothing written
        #expect(try journal.watchState() == nil)
        let lock = try journal.claimRun(wait: false)
        try journal.recordWatchState(state)
        #expect(try Journal.open(url, job: "one").watchState() == state)
        #expect(try Journal.open(url, job: "two").watchState() == nil)
        let database = PostgresServer.database(of: url)
        for forged in ["not json", #"{"pid": -5, "since": 1}"#, #"{"pid": 7, "since": 1e300}"#] {
            _ = try server.psql("UPDATE hoist_watcher SET state = '\(forged)'", database: database)
            #expect(try journal.watchState() == nil, "\(forged)")
        }
        try journal.recordWatchState(state)
        lock.release()
        #expect(try Journal.open(url, job: "one").watchState() == nil)
    }

    @Test func twoProcessesOpeningANewJournalAtOnceMigrateOnce() async throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<6 {
                group.addTask { _ = try Journal.open(url, job: "job\(index)") }
            }
            try await group.waitForAll()
        }
        #expect(try server.psql("SELECT count(*) FROM hoist_migrations", database: PostgresServer.database(of: url)).stdout == "6\n")
    }

    @Test func aJobRunTwiceOnASharedJournalSkipsUnchangedFilesAndStatusReadsIt() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        let b = try fixture.file("b.txt", 200)
        // The manifest names the journal through a variable: the password stays out of it.
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try "version: 1\nname: test\njournal: ${HOIST_PG}\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n"
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["HOIST_PG"] = url
        func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            try runProcess(hoist, arguments, environment: environment)
        }
        let first = try run(["run", manifest])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.hasPrefix("test: 2 uploaded (300 B) in"))
        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 0 uploaded (0 B), 2 unchanged in"))
        #expect(try run(["plan", manifest]).stdout.contains("skip    b.txt (unchanged since the last upload)"))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 5)], ofItemAtPath: b.path)
        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 1 uploaded (200 B), 1 unchanged in"))
        // No SQLite journal was made beside the manifest.
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("journal.sqlite").path))

        let status = try run(["status", manifest])
        #expect(status.status == 0)
        let shown = url.replacingOccurrences(of: ":\(PostgresServer.password)@", with: "@")
        #expect(status.stdout.contains("test: journal \(shown)\n"), "\(status.stdout)")
        #expect(!status.stdout.contains(PostgresServer.password))
        #expect(status.stdout.contains("files: 2 uploaded, 0 pending, 0 failed"))
        #expect(status.stdout.components(separatedBy: " ok ").count - 1 == 3)
        // --journal on the command line names it too, the password from PGPASSWORD.
        environment["PGPASSWORD"] = PostgresServer.password
        let byOption = try run(["status", "--journal", server.url(database: PostgresServer.database(of: url), password: nil), manifest])
        #expect(byOption.stdout.contains("files: 2 uploaded, 0 pending, 0 failed"), "\(byOption.stderr)")
    }

    /// A run killed in the middle of a large file; `hoist status` shows it pending with the bytes
    /// confirmed, and the next run (on the shared journal) continues its session from the
    /// server's offset.
    @Test func anUnfinishedFileIsResumedFromTheServersOffset() async throws {
        try await ExclusiveTests.shared.run {
            let server = try PostgresServer.shared()
            let url = try server.makeDatabase()
            let fixture = try JobFixture()
            let size = 12 << 20
            try fixture.file("big.bin", size)
            let prefix = "pg-\(UUID().uuidString.prefix(8))"
            let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "3MB/s")
            let (port, proxy, manifest, environment) = (job.port, job.proxy, job.manifest, job.environment)
            let first = Process()
            first.executableURL = URL(fileURLWithPath: hoist)
            first.arguments = ["run", "--quiet", "--journal", url, manifest]
            first.environment = environment
            try first.run()
            // Killed once the journal holds a confirmed offset for the file.
            let database = PostgresServer.database(of: url)
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                let offset = try server.psql("SELECT max(confirmed_offset) FROM hoist_file", database: database).stdout
                if let value = Int(offset.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0 { break }
                usleep(100_000)
            }
            kill(first.processIdentifier, SIGKILL)
            first.waitUntilExit()

            let status = try runProcess(hoist, ["status", "--journal", url, manifest], environment: environment)
            #expect(status.stdout.contains("files: 0 uploaded, 1 pending, 0 failed"), "\(status.stdout)")
            // Left `running` by the killed process until the next run claims the job.
            #expect(status.stdout.contains(" running "), "\(status.stdout)")
            let pending = try #require(status.stdout.split(separator: "\n").first { $0.hasPrefix("pending: ") })
            #expect(pending.hasSuffix("of \(size) bytes confirmed)") && !pending.contains("(0 of"), "\(pending)")

            let second = try runProcess(hoist, ["run", "--journal", url, manifest], environment: environment)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stdout.hasPrefix("test: 1 uploaded"), "\(second.stdout)")
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/big.bin", port: port) == patternData(size))
            // The second run asked the server where the session stood and sent from there, not from zero.
            let resumes = proxy.resumes
            #expect(resumes.count == 1 && resumes[0].start == resumes[0].confirmed && resumes[0].start > 0, "\(resumes)")
            let after = try runProcess(hoist, ["status", "--journal", url, manifest], environment: environment)
            #expect(after.stdout.contains("files: 1 uploaded, 0 pending, 0 failed"))
            #expect(after.stdout.contains(" ok ") && after.stdout.contains(" interrupted "), "\(after.stdout)")
        }
    }

    @Test func runsNeverOverlapOnASharedJournal() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let fixture = try JobFixture()
        try fixture.file("slow.bin", 4_000_000)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 2MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let first = Process()
        first.executableURL = URL(fileURLWithPath: hoist)
        first.arguments = ["run", "--quiet", "--journal", url, manifest]
        try first.run()
        let database = PostgresServer.database(of: url)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline,
              try server.psql("SELECT count(*) FROM hoist_run WHERE status = 'running'", database: database).stdout != "1\n" {
            usleep(20_000)
        }
        let started = Date()
        let second = try runProcess(hoist, ["run", "--journal", url, manifest])
        #expect(second.status == 2)
        #expect(second.stderr == "hoist: test is already running (pid \(first.processIdentifier) on \(ProcessInfo.processInfo.hostName)); "
            + "use --wait to wait for it\n", "\(second.stderr)")
        #expect(Date().timeIntervalSince(started) < 1.5)
        let waited = try runProcess(hoist, ["run", "--wait", "--journal", url, manifest])
        #expect(waited.status == 0, "\(waited.stderr)")
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)
        #expect(waited.stdout.hasPrefix("test: 0 uploaded (0 B), 1 unchanged in"))
        // A killed run lets the next one in: PostgreSQL drops its session and the lock with it.
        let killed = Process()
        killed.executableURL = URL(fileURLWithPath: hoist)
        killed.arguments = ["run", "--quiet", "--force", "--journal", url, manifest]
        try killed.run()
        // Killed once it holds the job (its run is `running`), not after a guessed time.
        let holding = Date().addingTimeInterval(10)
        while Date() < holding,
              try server.psql("SELECT count(*) FROM hoist_run WHERE status = 'running'", database: database).stdout != "1\n" {
            usleep(20_000)
        }
        #expect(killed.isRunning, "the run ended before it was killed")
        kill(killed.processIdentifier, SIGKILL)
        killed.waitUntilExit()
        let next = try runProcess(hoist, ["run", "--journal", url, manifest])
        #expect(next.status == 0, "\(next.stderr)")
    }

    /// Shards of one job run together on one shared journal (each holds its shard's lock and
    /// the job's shared), a run of the whole job beside them is refused, and one shard's claim
    /// does not take another's live run for an interrupted one.
    @Test func shardsOfAJobRunTogetherOnASharedJournal() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let fixture = try JobFixture()
        for index in 0..<6 { try fixture.file("f\(index).bin", 1_500_000 + index) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 2MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let shards = try (0..<2).map { index in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: hoist)
            process.arguments = ["run", "--quiet", "--shard", "\(index)/2", "--journal", url, manifest]
            try process.run()
            return process
        }
        let database = PostgresServer.database(of: url)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline,
              try server.psql("SELECT count(*) FROM hoist_run WHERE status = 'running'", database: database).stdout != "2\n" {
            usleep(20_000)
        }
        #expect(try server.psql("SELECT count(*) FROM hoist_run WHERE status = 'running'", database: database).stdout == "2\n")
        let whole = try runProcess(hoist, ["run", "--journal", url, manifest])
        #expect(whole.status == 2)
        #expect(whole.stderr.contains("test is already running (pid "), "\(whole.stderr)")
        let again = try runProcess(hoist, ["run", "--shard", "1/2", "--journal", url, manifest])
        #expect(again.stderr.contains("test is already running (pid \(shards[1].processIdentifier) on "), "\(again.stderr)")
        for shard in shards {
            shard.waitUntilExit()
            #expect(shard.terminationStatus == 0)
        }
        #expect(try server.psql("SELECT status, uploaded FROM hoist_run WHERE status <> 'failed' ORDER BY uploaded", database: database).stdout
            == "ok|3\nok|3\n")
        for index in 0..<6 {
            #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/f\(index).bin")) == patternData(1_500_000 + index))
        }
        let status = try runProcess(hoist, ["status", "--journal", url, manifest])
        #expect(status.stdout.contains("files: 6 uploaded, 0 pending, 0 failed"), "\(status.stdout)")
    }

    /// TLS as libpq's sslmode says: verify-full with the right CA connects encrypted (the
    /// server logs it); with the system's CAs, or the wrong host name, it refuses in a sentence.
    @Test func sslModesAreKept() throws {
        let certificates = try TestCertificates.shared()
        let server = try PostgresServer(tls: certificates)
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let trusted = server.url(query: "sslmode=verify-full&sslrootcert=\(certificates.caFile)")
        let run = try runProcess(hoist, ["run", "--journal", trusted, manifest])
        #expect(run.status == 0, "\(run.stderr)")
        let log = try String(contentsOf: server.logFile, encoding: .utf8)
        let hoistConnections = log.split(separator: "\n").filter { $0.contains("connection authorized: user=hoist") && $0.contains("application_name=hoist") }
        #expect(!hoistConnections.isEmpty && hoistConnections.allSatisfy { $0.contains("SSL enabled") }, "\(hoistConnections)")

        let untrusted = try runProcess(hoist, ["run", "--journal", server.url(query: "sslmode=verify-full"), manifest])
        #expect(untrusted.status == 2)
        #expect(untrusted.stderr.hasPrefix("hoist: PostgreSQL at 127.0.0.1:\(server.port) presented a certificate that sslmode=verify-full does not trust"),
                "\(untrusted.stderr)")
        #expect(!untrusted.stderr.contains(PostgresServer.password))
        // The certificate names 127.0.0.1 and localhost; another name for the same server is refused.
        let otherName = trusted.replacingOccurrences(of: "@127.0.0.1:", with: "@127.0.0.2:")
        let misnamed = try runProcess(hoist, ["run", "--journal", otherName, manifest])
        #expect(misnamed.status == 2)
        #expect(misnamed.stderr.contains("presented a certificate that sslmode=verify-full does not trust"), "\(misnamed.stderr)")
        // require: encrypted without checking whom to (as libpq).
        #expect(try runProcess(hoist, ["run", "--journal", server.url(query: "sslmode=require"), manifest]).status == 0)
    }

    /// A run whose lock's session ends (here ended by an administrator) stops, exit 2, starting
    /// no other file: another run could now start, and two must never overlap. (The upload in
    /// flight ends first: the runner reads the journal's failure as each upload ends.)
    @Test func aRunThatLosesItsLockStops() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let fixture = try JobFixture()
        try fixture.file("a.bin", 3_000_000)
        try fixture.file("b.bin", 3_000_000)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 1MB/s, concurrency: 1 }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = Process()
        run.executableURL = URL(fileURLWithPath: hoist)
        run.arguments = ["run", "--journal", url, manifest]
        let errors = Pipe()
        run.standardError = errors
        run.standardOutput = FileHandle.nullDevice
        try run.run()
        let database = PostgresServer.database(of: url)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline,
              try server.psql("SELECT count(*) FROM hoist_file WHERE state = 'uploading'", database: database).stdout != "1\n" {
            usleep(50_000)
        }
        let ended = try server.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'hoist run pid \(run.processIdentifier) %'")
        #expect(ended.stdout == "1\n", "\(ended.stderr)")
        run.waitUntilExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(run.terminationStatus == 2)
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/b.bin").path))
        #expect(stderr.contains("lost the hold on test in the journal postgres://hoist@127.0.0.1:\(server.port)/\(database): the connection holding its lock closed"), "\(stderr)")
    }

    @Test func aJournalThatCannotBeReachedOrEnteredIsOneSentenceAndExit2() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        func run(_ journal: String) throws -> (status: Int32, stdout: String, stderr: String, seconds: Double) {
            let started = Date()
            let result = try runProcess(hoist, ["run", "--journal", journal, manifest])
            return (result.status, result.stdout, result.stderr, Date().timeIntervalSince(started))
        }
        let nobody = try freePort()
        let unreachable = try run("postgres://hoist:pw@127.0.0.1:\(nobody)/db")
        #expect(unreachable.status == 2)
        #expect(unreachable.stderr == "hoist: cannot reach the PostgreSQL journal at 127.0.0.1:\(nobody) (connection refused): "
            + "start the server, or check the host and port in postgres://hoist@127.0.0.1:\(nobody)/db.\n")
        #expect(unreachable.seconds < 5)

        let database = PostgresServer.database(of: url)
        let badPassword = try run(server.url(database: database, password: "wrong-guess"))
        #expect(badPassword.status == 2)
        #expect(badPassword.stderr == "hoist: PostgreSQL at 127.0.0.1:\(server.port) refused the password of user hoist "
            + "(journal postgres://hoist@127.0.0.1:\(server.port)/\(database)): check the password in the journal URL or PGPASSWORD.\n")
        #expect(!badPassword.stderr.contains("wrong-guess"))

        let noDatabase = try run(server.url(database: "nosuchdb"))
        #expect(noDatabase.status == 2)
        #expect(noDatabase.stderr.contains("has no database nosuchdb"), "\(noDatabase.stderr)")
        #expect(!noDatabase.stderr.contains(PostgresServer.password))

        let badMode = try run(url + "?sslmode=sometimes")
        #expect(badMode.status == 2)
        #expect(badMode.stderr == "hoist: the journal URL's sslmode=sometimes is not one of disable, prefer, require, verify-ca, verify-full.\n")

        // sslmode=require against a server without TLS: refused, never sent in the clear.
        let noTLS = try run(url + "?sslmode=require")
        #expect(noTLS.status == 2)
        #expect(noTLS.stderr.contains("does not offer TLS"), "\(noTLS.stderr)")
        // None of these started anything: the bucket is empty.
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/a.txt").path))
    }
}
