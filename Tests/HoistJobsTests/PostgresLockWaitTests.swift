import Foundation
import HoistTestSupport
import Testing

/// A `hoist run --wait` killed while it waited for the job left its wait queued in
/// PostgreSQL (the server notices a closed connection only when the lock comes), and every new
/// process of the job was refused as if it still ran. Waits are tries from the client now.
@Suite(.serialized) struct PostgresLockWaitTests {
    @Test func aRunKilledWhileWaitingLeavesNoWaitBehind() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let database = PostgresServer.database(of: url)
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        // The schema first: a run that finds the job free makes it.
        let first = try runProcess(hoist, ["run", "--journal", url, manifest])
        #expect(first.status == 0, "\(first.stderr)")

        // Another session holds the job as a shared run's worker does, for 20 s.
        var environment = ProcessInfo.processInfo.environment
        environment["PGPASSWORD"] = PostgresServer.password
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "\(PostgresServer.binaries)/psql")
        holder.arguments = ["-X", "-q", "-h", "127.0.0.1", "-p", "\(server.port)", "-U", PostgresServer.user, "-d", database, "-c",
                            "SELECT pg_advisory_lock_shared(hashtextextended('hoist run test', 0)); SELECT pg_sleep(20);"]
        holder.environment = environment
        try holder.run()
        defer { holder.terminate() }
        func waiting() throws -> String {
            try server.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", database: database).stdout
        }
        func held() throws -> String {
            try server.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted", database: database).stdout
        }
        var deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try held() != "1\n" { usleep(50_000) }

        // A run that waits for the job, killed while it waits.
        let waiter = try StartedProcess(hoist, ["run", "--wait", "--journal", url, manifest])
        // Killed once it is trying the job's lock (its session's last query), not after a
        // guessed time.
        func trying() throws -> String {
            try server.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '% pid \(waiter.pid) %' "
                + "AND query LIKE '%pg_try_advisory_lock%'", database: database).stdout
        }
        deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try trying() == "0\n" { usleep(20_000) }
        #expect(try trying() != "0\n", "the run never tried the job's lock")
        #expect(waiter.process.isRunning, "the run did not wait")
        kill(waiter.pid, SIGKILL)
        _ = waiter.finish()

        // Nothing of it waits in the server, and a process of the job is let in at once.
        deadline = Date().addingTimeInterval(3)
        while Date() < deadline, try waiting() != "0\n" { usleep(50_000) }
        #expect(try waiting() == "0\n", "a wait outlived its process")
        let worker = try server.psql("SELECT pg_try_advisory_lock_shared(hashtextextended('hoist run test', 0))", database: database)
        #expect(worker.stdout == "t\n", "\(worker)")
    }
}
