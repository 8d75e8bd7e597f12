import Foundation
import HoistTestSupport
import Testing
@testable import HoistJobs

/// A worker stopped inside a journal transaction (SIGSTOP, a paused VM) must not hold its rows
/// locked for ever: the others claim with SKIP LOCKED and would never take its files. Found when
/// `SharedRunTests.aWorkerSilentPastItsLeaseLosesItsFilesAndStopsWhenThawed` froze its worker
/// between BEGIN and COMMIT and the other worker waited for 9 minutes.
@Suite struct PostgresIdleTransactionTests {
    @Test func aTransactionLeftOpenIsEndedByTheServer() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let database = PostgresServer.database(of: url)
        let connection = try PostgresJournal.connect(try PostgresLocation(url), purpose: "stuck")
        defer { try? connection.close().wait() }
        _ = try connection.query("BEGIN", logger: PostgresJournal.logger).wait()
        _ = try connection.query("SELECT 1", logger: PostgresJournal.logger).wait()
        let open = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'hoist stuck%' AND state = 'idle in transaction'"
        #expect(try server.psql(open, database: database).stdout == "1\n")
        // The server ends it after 5 s (idle_in_transaction_session_timeout), and the session with it.
        let deadline = Date().addingTimeInterval(15)
        var left = ""
        repeat {
            usleep(250_000)
            left = try server.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'hoist stuck%'", database: database).stdout
        } while left != "0\n" && Date() < deadline
        #expect(left == "0\n", "the open transaction was still there after 15 s")
    }
}
