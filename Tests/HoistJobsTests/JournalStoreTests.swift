import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// What every `JournalStore` must do, run on each implementation: a new journal is one line in
/// `JournalStoreTests.kinds` (and a `make` case).
@Suite struct JournalStoreTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case sqlite
        /// A database of its own on the test process's PostgreSQL (`PostgresServer`), job "j".
        case postgres
        var testDescription: String { rawValue }

        /// A new, empty journal of this kind, and what keeps it alive.
        func make() throws -> (any JournalStore, AnyObject) {
            switch self {
            case .sqlite:
                let folder = try TemporaryDirectory()
                return (try SQLiteJournal(path: folder.url.appendingPathComponent("journal.sqlite").path), folder)
            case .postgres:
                let server = try PostgresServer.shared()
                return (try Journal.open(try server.makeDatabase(), job: "j"), server)
            }
        }
    }

    static let kinds = Kind.allCases

    func file(_ source: String, _ destination: String, state: Journal.FileState = .done, size: Int64 = 10,
              session: String? = nil, md5: String? = nil) -> Journal.FileRecord {
        Journal.FileRecord(source: source, destination: destination, size: size, mtime: 1_700_000_000.5, attributes: "{}",
                           state: state, session: session, md5Hash: md5, runID: "r1")
    }

    func run(_ id: String, started: Double, status: Journal.RunStatus) -> Journal.RunRecord {
        Journal.RunRecord(id: id, job: "j", started: started, finished: nil, uploaded: 0, skipped: 0, failed: 0, cancelled: 0,
                          bytes: 0, status: status, pid: 1, error: nil)
    }

    /// Rows come back in the walk's order (bytes of the full path: `a b` < `a/x` < `a0`), a
    /// chunk at a time after the last row read, only inside the root's range.
    @Test(arguments: kinds) func rowsComeInWalkOrderByChunks(kind: Kind) throws {
        let (journal, keep) = try kind.make()
        let sources = ["/r/a", "/r/a b", "/r/a/x", "/r/a0", "/r/b", "/r0/other", "/q/before"]
        try journal.apply(sources.shuffled().map { .file(file($0, "obj" + $0)) })
        let first = try journal.rows(from: "/r/", below: "/r0", after: nil, limit: 2)
        #expect(first.map(\.source) == ["/r/a", "/r/a b"])
        let rest = try journal.rows(from: "/r/", below: "/r0", after: (first[1].source, first[1].destination), limit: 10)
        #expect(rest.map(\.source) == ["/r/a/x", "/r/a0", "/r/b"])
        #expect(rest.first?.known.size == 10 && rest.first?.known.mtime == 1_700_000_000.5 && rest.first?.known.state == .done)
        withExtendedLifetime(keep) {}
    }

    /// A file's row is found by (source, destination); a later write replaces it; progress sets
    /// the session and offset of a file in flight.
    @Test(arguments: kinds) func recordsLookUpAndProgress(kind: Kind) throws {
        let (journal, keep) = try kind.make()
        try journal.apply([.file(file("/s/a", "a", state: .uploading, size: 100))])
        #expect(try journal.lookup(source: "/s/a", destination: "a")?.state == .uploading)
        #expect(try journal.lookup(source: "/s/a", destination: "b") == nil)
        try journal.apply([.progress(source: "/s/a", destination: "a", session: "https://x/session", offset: 40)])
        let flying = try #require(try journal.record(source: "/s/a", destination: "a"))
        #expect(flying.session == "https://x/session" && flying.confirmedOffset == 40)
        #expect(try journal.lookup(source: "/s/a", destination: "a")?.session == "https://x/session")
        try journal.apply([.file(file("/s/a", "a", state: .done, size: 100, md5: "bWQ1"))])
        let done = try #require(try journal.record(source: "/s/a", destination: "a"))
        #expect(done.state == .done && done.md5Hash == "bWQ1" && done.session == nil)
        withExtendedLifetime(keep) {}
    }

    /// `skipUnchanged: checksum`'s content hash: written with a done row, read back by a plan's
    /// look-up and walk-order rows, and replaced with the file's new mtime by a `.content` write,
    /// which leaves a row that is not done alone.
    @Test(arguments: kinds) func contentHashesAreKeptAndUpdated(kind: Kind) throws {
        let (journal, keep) = try kind.make()
        var done = file("/s/a", "a", state: .done, size: 100, md5: "bWQ1")
        done.content = "AAAAAA== 1:100:5:6"
        try journal.apply([.file(done), .file(file("/s/b", "b", state: .uploading, size: 10))])
        #expect(try journal.lookup(source: "/s/a", destination: "a")?.content == "AAAAAA== 1:100:5:6")
        #expect(try journal.rows(from: "/s/", below: "/s0", after: nil, limit: 10).map(\.known.content) == ["AAAAAA== 1:100:5:6", nil])
        try journal.apply([.content(source: "/s/a", destination: "a", mtime: 42, content: "AAAAAA== 1:100:7:8"),
                           .content(source: "/s/b", destination: "b", mtime: 42, content: "BBBBBB== 2:10:7:8")])
        let updated = try #require(try journal.record(source: "/s/a", destination: "a"))
        #expect(updated.content == "AAAAAA== 1:100:7:8" && updated.mtime == 42 && updated.md5Hash == "bWQ1")
        #expect(try journal.record(source: "/s/b", destination: "b")?.content == nil)
        withExtendedLifetime(keep) {}
    }

    /// One run at a time: a second claim is refused while the first holds the job, and runs a
    /// dead process left `running` are shown `interrupted` by the next claim.
    @Test(arguments: kinds) func claimsExcludeEachOtherAndMarkDeadRuns(kind: Kind) throws {
        let (journal, keep) = try kind.make()
        try journal.apply([.run(run("dead", started: 1, status: .running)), .run(run("fine", started: 2, status: .ok))])
        let lock = try journal.claimRun(wait: false)
        #expect(try journal.runs(limit: 10).map(\.status) == [.ok, .interrupted])
        #expect(throws: JobLock.Busy.self) { _ = try journal.claimRun(wait: false) }
        lock.release()
        try journal.claimRun(wait: false).release()
        withExtendedLifetime(keep) {}
    }

    /// What `hoist status` reads: counts by state, the newest files of a state, the newest runs.
    @Test(arguments: kinds) func countsAndListsForStatus(kind: Kind) throws {
        let (journal, keep) = try kind.make()
        var rows = [file("/s/1", "1"), file("/s/2", "2"), file("/s/3", "3", state: .failed), file("/s/4", "4", state: .uploading)]
        rows[3].updated = 10
        rows[2].updated = 20
        try journal.apply(rows.map { .file($0) } + (1...12).map { .run(run("r\($0)", started: Double($0), status: .ok)) })
        #expect(try journal.fileCounts() == [.done: 2, .failed: 1, .uploading: 1])
        #expect(try journal.files(state: .failed, limit: 5).map(\.source) == ["/s/3"])
        #expect(try journal.runs(limit: 3).map(\.id) == ["r12", "r11", "r10"])
        try journal.recordFailedStart(job: "j", reason: "no bucket")
        #expect(try journal.runs(limit: 1).first?.error == "no bucket")
        withExtendedLifetime(keep) {}
    }
}
