import Foundation
import HoistJobs
import HoistTestSupport
import Synchronization
import Testing

/// A shared run's journal steers which files, nothing else, and a run always ends:
/// a worker thawed after its files were taken writes nothing over the taker's rows and sends
/// nothing; rows edited under a worker do not keep it waiting; a file stored but not recorded is
/// not sent again. On a real PostgreSQL (`PostgresServer`), with the real `hoist`.
@Suite(.serialized) struct SharedRunFencingTests {
    /// The inode and modification time of each object of `job`'s bucket: an object sent again is
    /// a new file renamed over the old one (a new inode).
    func objects(_ job: SharedRunTests.SlowJob) throws -> [String: String] {
        var found: [String: String] = [:]
        for index in job.sizes.indices {
            let path = job.fixture.directory.url.appendingPathComponent("bucket/f\(index).bin").path
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            found["f\(index).bin"] = "\(info.st_ino) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        }
        return found
    }

    /// A worker frozen past its lease while it sends (SIGSTOP: a paused VM) loses its files to
    /// another worker, which finishes the run. Thawed, the frozen worker learns so and stops
    /// (exit 2), and in between it writes nothing over the taker's `done` rows (they stayed
    /// `done`, so the next run does not upload them again) and sends no byte: no object is
    /// stored again (same inode and mtime).
    @Test func aThawedWorkerWritesNothingOverTheTakersRowsAndSendsNothing() throws {
        let job = try SharedRunTests.SlowJob()
        let (server, url, database, manifest) = (job.server, job.url, job.database, job.manifest)
        let frozen = try StartedProcess(hoist, ["run", "--worker", "--lease", "2", "--journal", url, manifest])
        #expect(try job.waitUntilHolding(frozen.pid, states: "'uploading'"))
        kill(frozen.pid, SIGSTOP)
        let other = try runProcess(hoist, ["run", "--worker", "--lease", "2", "--journal", url, manifest])
        #expect(other.status == 0, "\(other.stdout)\(other.stderr)")
        #expect(try server.psql("SELECT status, uploaded FROM hoist_run", database: database).stdout == "ok|8\n")
        let stored = try objects(job)
        #expect(stored.count == 8)
        kill(frozen.pid, SIGCONT)
        let thawed = frozen.finish(within: 30)
        #expect(thawed.ended && thawed.status == 2, "\(thawed.output)")
        #expect(thawed.output.contains("found it silent for longer than its lease"), "\(thawed.output)")
        let rows = try server.psql("SELECT state, count(*) FROM hoist_file GROUP BY state", database: database).stdout
        #expect(rows == "done|8\n", "the thawed worker wrote over the taker's rows: \(rows)")
        #expect(try objects(job) == stored, "the thawed worker stored objects again")
        try job.expectEveryFileInTheBucket()
        let again = try runProcess(hoist, ["run", "--worker", "--journal", url, manifest])
        #expect(again.status == 0 && again.stdout.hasPrefix("test: 0 uploaded (0 B), 8 unchanged in"), "\(again.stdout)\(again.stderr)")
    }

    /// Rounds of three workers on a job of 24 files: one frozen past its lease mid-run and thawed
    /// while the others still work, or one killed (-9) mid-run. Every round ends (no worker
    /// waits for ever), the run is `ok`, every row `done` and every object byte-exact.
    /// Ten rounds a fault, three at a time (`inLanes`): each round has its own database, folder
    /// and workers, which spend most of a round waiting on their bandwidth limit; each round is
    /// checked as a round alone would be.
    @Test(arguments: ["freeze", "kill"]) func roundsOfFreezesAndKillsAlwaysEnd(_ fault: String) throws {
        let outcomes = inLanes(3, rounds: 10) { _ in Result { try Self.round(fault) } }
        for (round, outcome) in outcomes.enumerated() {
            let outcome = try outcome.get()
            let (results, rows) = (outcome.results, outcome.rows)
            #expect(outcome.holding, "round \(round)")
            let stuck = results.filter { !$0.ended }.count
            #expect(stuck == 0, "round \(round): \(stuck) workers never ended; rows \(rows); \(results.map(\.output))")
            #expect(outcome.run == "ok|24\n", "round \(round): \(rows) \(results.map(\.output))")
            #expect(rows == "done|24\n", "round \(round)")
            for (index, result) in results.enumerated() where index != outcome.victim {
                #expect(result.status == 0, "round \(round): \(result.output)")
            }
            #expect(outcome.wrongObjects.isEmpty, "round \(round): not byte-exact: \(outcome.wrongObjects)")
        }
    }

    /// What one round of `roundsOfFreezesAndKillsAlwaysEnd` saw, for the test's thread to check.
    struct Round: Sendable {
        /// Whether the victim held a file `uploading` before its fault.
        let holding: Bool
        let victim: Int
        let results: [(ended: Bool, status: Int32, output: String)]
        /// The rows' states and the run's status and count, once every worker ended.
        let rows: String, run: String
        /// The objects whose bytes are not their file's.
        let wrongObjects: [String]
    }

    /// Runs one round of `fault` on a job of its own.
    static func round(_ fault: String) throws -> Round {
        var generator = SystemRandomNumberGenerator()
        // A kill is seen at once (the lock's session ends), a freeze only past the lease:
        // killed, the run need not be as slow for the kill to land mid-run.
        let job = try madeOneAtATime.withLock { _ in try SharedRunTests.SlowJob(files: 24, bandwidth: fault == "kill" ? "2MB/s" : "1MB/s") }
        let workers = try (0..<3).map { _ in
            try StartedProcess(hoist, ["run", "--worker", "--quiet", "--lease", "2", "--journal", job.url, job.manifest])
        }
        let victim = Int.random(in: 0..<3, using: &generator)
        let holding = try job.waitUntilHolding(workers[victim].pid, states: "'uploading'")
        usleep(UInt32.random(in: 0..<600_000, using: &generator))
        if fault == "freeze" {
            kill(workers[victim].pid, SIGSTOP)
            usleep(2_600_000)   // past its lease: the others take its files
            kill(workers[victim].pid, SIGCONT)
        } else {
            kill(workers[victim].pid, SIGKILL)
        }
        let results = workers.map { $0.finish(within: 60) }
        let rows = try job.server.psql("SELECT state, count(*) FROM hoist_file GROUP BY state ORDER BY state", database: job.database).stdout
        let run = try job.server.psql("SELECT status, uploaded FROM hoist_run", database: job.database).stdout
        let wrong = job.sizes.indices.filter { index in
            (try? Data(contentsOf: job.fixture.directory.url.appendingPathComponent("bucket/f\(index).bin"))) != patternData(job.sizes[index])
        }
        return Round(holding: holding, victim: victim, results: results, rows: rows, run: run, wrongObjects: wrong.map { "f\($0).bin" })
    }

    /// Rounds' databases are made one at a time.
    static let madeOneAtATime = Mutex<Void>(())

    /// Calls `body` for each of `rounds` rounds on `lanes` threads, each taking rounds in turn;
    /// returns what each round returned, in round order, once every round returned.
    func inLanes<T: Sendable>(_ lanes: Int, rounds: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        let (outcomes, done) = (LaneOutcomes<T>(), DispatchSemaphore(value: 0))
        for lane in 0..<lanes {
            Thread {
                for round in stride(from: lane, to: rounds, by: lanes) {
                    let outcome = body(round)
                    outcomes.byRound.withLock { $0[round] = outcome }
                }
                done.signal()
            }.start()
        }
        for _ in 0..<lanes { done.wait() }
        return outcomes.byRound.withLock { byRound in (0..<rounds).map { byRound[$0]! } }
    }

    /// A row edited after a worker claimed it (its destination, by whoever can write to the
    /// journal) names the worker but is no file it is sending: it goes back to the queue, is
    /// judged as claimed, and fails (another object than the manifest's). The run ends, exit 1,
    /// instead of waiting for ever; the file itself was uploaded to its own object.
    @Test func aRowEditedUnderItsWorkerDoesNotKeepTheRunWaiting() throws {
        let job = try SharedRunTests.SlowJob()
        let (server, url, database, manifest) = (job.server, job.url, job.database, job.manifest)
        let worker = try StartedProcess(hoist, ["run", "--worker", "--journal", url, manifest])
        #expect(try job.waitUntilHolding(worker.pid, states: "'uploading'"))
        let edited = try server.psql("""
            UPDATE hoist_file SET destination = 'elsewhere/' || destination
            WHERE source = (SELECT source FROM hoist_file WHERE state = 'uploading' ORDER BY source LIMIT 1) RETURNING destination
            """, database: database).stdout
        #expect(edited.hasPrefix("elsewhere/f"), "\(edited)")
        let result = worker.finish(within: 40)
        #expect(result.ended, "the worker waited for ever on a row it cannot finish: \(result.output)")
        #expect(result.status == 1, "\(result.output)")
        #expect(result.output.contains("to another object than this worker's manifest"), "\(result.output)")
        #expect(try server.psql("SELECT state FROM hoist_file WHERE destination LIKE 'elsewhere/%'", database: database).stdout == "failed\n")
        #expect(try server.psql("SELECT status FROM hoist_run", database: database).stdout == "failed\n")
        try job.expectEveryFileInTheBucket()
        #expect(!FileManager.default.fileExists(atPath: job.fixture.directory.url.appendingPathComponent("bucket/elsewhere").path))
    }

    /// A run killed after storing a file and before recording it leaves the row `uploading`
    /// with no session (a small file has none). The next run takes the stored object, whose
    /// bytes and metadata match, as the upload: the file is not sent again. In a plain run and
    /// in a shared run planned anew (all its workers died).
    @Test(arguments: [false, true]) func aFileStoredButNotRecordedIsNotSentAgain(_ shared: Bool) throws {
        let job = try SharedRunTests.SlowJob()
        let journal = shared ? ["--worker", "--journal", job.url] : []
        let first = try runProcess(hoist, ["run"] + journal + [job.manifest])
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        let stored = try objects(job)
        // As a kill between the store and the record leaves it.
        let source = job.fixture.directory.url.appendingPathComponent("src/f3.bin").path
        if shared {
            _ = try job.server.psql("UPDATE hoist_file SET state = 'uploading', session = NULL WHERE source LIKE '%/f3.bin'",
                                    database: job.database)
        } else {
            let store = try SQLiteJournal(path: job.fixture.directory.url.appendingPathComponent("journal.sqlite").path)
            var row = try #require(try store.record(source: source, destination: "f3.bin"))
            (row.state, row.session, row.md5Hash, row.crc32c) = (.uploading, nil, nil, nil)
            try store.apply([.file(row)])
        }
        let again = try runProcess(hoist, ["run"] + journal + [job.manifest])
        #expect(again.status == 0 && again.stdout.hasPrefix("test: 1 uploaded"), "\(again.stdout)\(again.stderr)")
        #expect(try objects(job) == stored, "the stored file was sent again")
        let third = try runProcess(hoist, ["run"] + journal + [job.manifest])
        #expect(third.stdout.hasPrefix("test: 0 uploaded (0 B), 8 unchanged in"), "\(third.stdout)\(third.stderr)")
    }

    /// Rows marked `done` by hand for files never uploaded (whoever can write to the journal):
    /// the journal is trusted as it says unless asked, and `--remote-check` in a shared run asks
    /// the server, finds the objects missing and uploads them.
    @Test func remoteCheckInASharedRunFindsObjectsTheJournalWronglyCallsDone() throws {
        let job = try SharedRunTests.SlowJob()
        let first = try runProcess(hoist, ["run", "--worker", "--journal", job.url, job.manifest])
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        for index in [2, 5] {
            try FileManager.default.removeItem(at: job.fixture.directory.url.appendingPathComponent("bucket/f\(index).bin"))
        }
        let trusted = try runProcess(hoist, ["run", "--worker", "--journal", job.url, job.manifest])
        #expect(trusted.stdout.hasPrefix("test: 0 uploaded (0 B), 8 unchanged in"), "\(trusted.stdout)\(trusted.stderr)")
        let checked = try runProcess(hoist, ["run", "--worker", "--remote-check", "--journal", job.url, job.manifest])
        #expect(checked.status == 0 && checked.stdout.hasPrefix("test: 2 uploaded"), "\(checked.stdout)\(checked.stderr)")
        try job.expectEveryFileInTheBucket()
    }
}

/// What the rounds `inLanes` ran returned, by round.
private final class LaneOutcomes<T: Sendable>: Sendable {
    let byRound = Mutex<[Int: T]>([:])
}
