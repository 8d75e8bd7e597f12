import Foundation
import HoistJobs
import Synchronization
import HoistTestSupport
import Testing

/// A plan reads the journal alongside its walk (rows in byte order of their paths, a thousand
/// per query): the walk must come in that order, and every decision must be the one a lookup
/// per file would make.
@Suite struct JournalMergeTests {
    /// Names whose order differs between "sorted names" and "sorted full paths": a folder `a`
    /// holds paths `a/...`, which come after `a b`, `a-b` and `a.txt` in byte order.
    let names = ["a/x.txt", "a/y/z.txt", "a b.txt", "a-b/c.txt", "a.txt", "a0.txt", "ab/c.txt", "B.txt", "é.txt", "z.txt"]

    @Test func theWalkComesInTheByteOrderOfFullPaths() throws {
        let fixture = try JobFixture()
        for name in names { try fixture.file(name) }
        let walked = FileWalker(root: fixture.directory.url.appendingPathComponent("src").path).map(\.relativePath)
        #expect(walked == names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    @Test func decisionsReadAlongsideTheWalkAreTheOnesALookupWouldMake() throws {
        let fixture = try JobFixture(inMemory: true)
        for name in names { try fixture.file(name, 100) }
        for index in 0..<2500 { try fixture.file("many/f\(index).txt", 10) }   // more than one chunk of rows
        // Two file sets over one root: each source has two rows, one per destination.
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files:
              - { root: src, destination: 'one/{relpath}' }
              - { root: src, destination: 'two/{relpath}' }
            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        #expect(try runProcess(hoist, ["run", manifest]).status == 0)

        // One file changes, one is new, one folder sorts between the others.
        try fixture.file("a-b/c.txt", 101)
        try fixture.file("a.new", 5)
        try fixture.file("many/f1000.txt", 11)
        let plan = try runProcess(hoist, ["plan", "--json", manifest])
        #expect(plan.status == 0, "\(plan.stderr)")
        var uploads: [String] = []
        var skips = 0
        for line in plan.stdout.split(separator: "\n") {
            let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            switch entry["action"] as? String {
            case "upload": uploads.append(String((entry["object"] as? String) ?? ""))
            case "skip":
                #expect(entry["reason"] as? String == "unchanged since the last upload", "\(entry)")
                skips += 1
            default: break
            }
        }
        #expect(uploads.sorted() == ["one/a-b/c.txt", "one/a.new", "one/many/f1000.txt", "two/a-b/c.txt", "two/a.new", "two/many/f1000.txt"])
        #expect(skips == 2 * (names.count + 2500) - 4)
    }

    /// New files are proved new by the rows read alongside the walk, not looked up one by one:
    /// over a shared journal each lookup is a round trip.
    @Test func newFilesAreNotLookedUpOneByOne() throws {
        let fixture = try JobFixture(inMemory: true)
        for index in 0..<1500 { try fixture.file("d\(index % 7)/f\(index).txt", 10) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let journal = CountingJournal(try SQLiteJournal(path: fixture.directory.url.appendingPathComponent("j.sqlite").path))
        // The journal knows every third file (done, unchanged): the others are new.
        let items = Array(Planner(job: job))
        try journal.base.apply(items.enumerated().filter { $0.offset % 3 == 0 }.map { index, item in
            .file(Journal.FileRecord(source: item.file.path, destination: item.destination, size: item.file.size,
                                     mtime: item.file.modified.timeIntervalSince1970, attributes: Journal.attributesText(item.attributes),
                                     state: .done, runID: "r"))
        })
        let planned = Array(Planner(job: job, journal: journal))
        #expect(planned.filter { $0.decision == .upload }.count == 1000)
        #expect(planned.filter { $0.decision == .skip(.unchanged) }.count == 500)
        #expect(journal.lookups.withLock { $0 } == 0)
        #expect(journal.pages.withLock { $0 } <= 3)
    }
}

extension JournalMergeTests {
    /// Within a batch, a file's journal writes fold into its row: a run of small files makes about
    /// one write per file, where its `uploading` row, session and `done` row were three. Every file
    /// still ends done with its checksums.
    @Test func aSmallFilesJournalWritesFoldIntoOneRow() async throws {
        let fixture = try JobFixture()
        for index in 0..<200 { try fixture.file("f\(index).txt", 50 + index) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 4 }")
        let journal = CountingJournal(try SQLiteJournal(path: fixture.directory.url.appendingPathComponent("j.sqlite").path))
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [], journal: journal).run()
        #expect(summary.uploaded == 200)
        // Files whose events straddle a batch's end write more than once.
        let writes = journal.fileWrites.withLock { $0 }
        #expect(writes >= 200 && writes < 400, "\(writes) journal writes for 200 files")
        let done = try journal.files(state: .done, limit: 300)
        #expect(done.count == 200)
        #expect(done.allSatisfy { $0.md5Hash != nil && $0.crc32c != nil && $0.session == nil && $0.confirmedOffset == $0.size })
    }
}

/// A journal that counts the single lookups and the pages of rows a plan asks of it, and the
/// file writes applied to it.
final class CountingJournal: JournalStore {
    let base: any JournalStore
    let lookups = Mutex(0)
    let pages = Mutex(0)
    /// File rows and progress updates applied.
    let fileWrites = Mutex(0)
    init(_ base: any JournalStore) { self.base = base }
    var location: String { base.location }
    func claimRun(wait: Bool) throws -> any JobRunLock { try base.claimRun(wait: wait) }
    func lookup(source: String, destination: String) throws -> Journal.Known? {
        lookups.withLock { $0 += 1 }
        return try base.lookup(source: source, destination: destination)
    }
    func rows(from: String, below: String, after: (source: String, destination: String)?, limit: Int) throws -> [Journal.KnownRow] {
        pages.withLock { $0 += 1 }
        return try base.rows(from: from, below: below, after: after, limit: limit)
    }
    func record(source: String, destination: String) throws -> Journal.FileRecord? { try base.record(source: source, destination: destination) }
    func otherSource(storedAt destination: String, besides source: String) throws -> String? {
        try base.otherSource(storedAt: destination, besides: source)
    }
    func rootDevice(_ root: String) throws -> UInt64? { try base.rootDevice(root) }
    func recordRoot(_ root: String, device: UInt64) throws { try base.recordRoot(root, device: device) }
    func apply(_ writes: [Journal.Write]) throws {
        fileWrites.withLock { count in
            for write in writes { if case .run = write { continue }; count += 1 }
        }
        try base.apply(writes)
    }
    func runs(limit: Int) throws -> [Journal.RunRecord] { try base.runs(limit: limit) }
    func fileCounts() throws -> [Journal.FileState: Int] { try base.fileCounts() }
    func files(state: Journal.FileState, limit: Int) throws -> [Journal.FileRecord] { try base.files(state: state, limit: limit) }
}
