import Foundation
import GRDB
import HoistStorage

/// The default journal: one SQLite file (WAL) per job, beside its lock file `PATH.lock`. One row
/// per (source file, destination) with what was last uploaded and, for a file in flight, its
/// upload session and confirmed offset; one row per run.
///
/// Default path: `$XDG_STATE_HOME/hoist/JOB.sqlite` (`~/.local/state/hoist/JOB.sqlite`);
/// `journal:` in the manifest or `--journal` on the command line choose another.
public final class SQLiteJournal: JournalStore {
    public let path: String
    public var location: String { path }
    private let database: DatabaseQueue

    /// Opens (creating when missing), checks (`PRAGMA quick_check`) and migrates a journal.
    /// - Throws: `JournalError` naming the file, what is wrong (damaged, not writable, disk
    ///   full) and the way back.
    public init(path: String) throws {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try PrivateFiles.makeFolder(folder)
        } catch {
            throw JournalError(message: "cannot create the journal's folder \(folder): \(error.localizedDescription.trimmingCharacters(in: CharacterSet(charactersIn: "."))). "
                + "Create it with write access for this user, or name another journal (the manifest's journal:).")
        }
        try PrivateFiles.refuseNonRegular([path, path + "-wal", path + "-shm", path + "-journal"])
        try PrivateFiles.refuseForeign([path, path + "-wal", path + "-shm", path + "-journal"])
        PrivateFiles.createPrivately(path)
        do {
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                // WAL survives a killed process; NORMAL syncs at checkpoints, not every commit.
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            configuration.busyMode = .timeout(10)
            database = try DatabaseQueue(path: path, configuration: configuration)
            try database.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
                if check != ["ok"] {
                    throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: check.prefix(3).joined(separator: "; "))
                }
            }
            try Self.migrator.migrate(database)
        } catch {
            throw JournalError(opening: path, error)
        }
    }

    /// Takes the job's lock file (`PATH.lock`, an exclusive `flock`), then marks runs still
    /// `running` as `interrupted`: no process of theirs is alive (they were killed, or their
    /// machine went down), since each held the lock while it ran.
    public func claimRun(wait: Bool) throws -> any JobRunLock {
        let lock = try JobLock(path: path + ".lock", wait: wait)
        try markInterruptedRuns()
        return lock
    }


    func markInterruptedRuns() throws {
        try write { db in
            try db.execute(sql: "UPDATE run SET status = 'interrupted', finished = COALESCE(finished, ?) WHERE status = 'running'",
                           arguments: [Date().timeIntervalSince1970])
        }
    }

    /// Applies writes in order, in one transaction: what a run records is batched, never a
    /// transaction per file.
    public func apply(_ writes: [Journal.Write]) throws {
        try write { db in
            for item in writes {
                switch item {
                case .file(let row):
                    // One reused statement: a record insert builds its statement and encodes the
                    // row through Codable each time (12% of a first run's CPU).
                    try db.cachedStatement(sql: """
                        INSERT OR REPLACE INTO file (source, destination, size, mtime, attributes, state, session, confirmedOffset,
                                                     md5Hash, crc32c, generation, error, runID, updated, content)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """).execute(arguments: [row.source, row.destination, row.size, row.mtime, row.attributes, row.state.rawValue,
                                                 row.session, row.confirmedOffset, row.md5Hash, row.crc32c, row.generation, row.error,
                                                 row.runID, row.updated, row.content])
                case .run(let record): try record.insert(db, onConflict: .replace)
                case .progress(let source, let destination, let session, let offset):
                    try db.cachedStatement(sql: "UPDATE file SET session = ?, confirmedOffset = ?, updated = ? WHERE source = ? AND destination = ?")
                        .execute(arguments: [session, offset, Date().timeIntervalSince1970, source, destination])
                case .content(let source, let destination, let mtime, let content):
                    try db.cachedStatement(sql: "UPDATE file SET mtime = ?, content = ? WHERE source = ? AND destination = ? AND state = 'done'")
                        .execute(arguments: [mtime, content, source, destination])
                }
            }
        }
    }

    /// Writes, turning SQLite's errors into `JournalError`s that say what to do.
    private func write(_ updates: (Database) throws -> Void) throws {
        do {
            try database.write(updates)
        } catch {
            throw JournalError(writing: path, error)
        }
    }

    fileprivate static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        return "\(error)"
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "file") { t in
                t.column("source", .text).notNull()
                t.column("destination", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("mtime", .double).notNull()
                t.column("attributes", .text).notNull()
                t.column("state", .text).notNull()
                t.column("session", .text)
                t.column("confirmedOffset", .integer).notNull().defaults(to: 0)
                t.column("md5Hash", .text)
                t.column("crc32c", .text)
                t.column("generation", .integer)
                t.column("error", .text)
                t.column("runID", .text).notNull()
                t.column("updated", .double).notNull()
                t.primaryKey(["source", "destination"])
            }
            try db.create(table: "run") { t in
                t.column("id", .text).primaryKey()
                t.column("job", .text).notNull()
                t.column("started", .double).notNull()
                t.column("finished", .double)
                t.column("uploaded", .integer).notNull()
                t.column("skipped", .integer).notNull()
                t.column("failed", .integer).notNull()
                t.column("cancelled", .integer).notNull()
                t.column("bytes", .integer).notNull()
                t.column("status", .text).notNull()
                t.column("pid", .integer).notNull()
            }
        }
        migrator.registerMigration("v2: why a run failed") { db in
            try db.alter(table: "run") { t in t.add(column: "error", .text) }
        }
        migrator.registerMigration("v3: content hashes") { db in
            try db.alter(table: "file") { t in t.add(column: "content", .text) }
        }
        migrator.registerMigration("v4: which file made an object") { db in
            try db.create(index: "file_destination", on: "file", columns: ["destination"])
        }
        migrator.registerMigration("v5: the file systems of mirrored roots") { db in
            try db.create(table: "root") { t in
                t.column("path", .text).primaryKey()
                t.column("device", .integer).notNull()
            }
        }
        return migrator
    }

    /// The columns a plan compares, read by position from one reused statement (no record
    /// decoding): every file of the tree is looked up.
    public func lookup(source: String, destination: String) throws -> Journal.Known? {
        do {
            return try database.inDatabase { db in
                let statement = try db.cachedStatement(
                    sql: "SELECT size, mtime, attributes, state, session, content FROM file WHERE source = ? AND destination = ?")
                statement.setUncheckedArguments([source, destination])
                // A cursor's row reads the statement's columns in place (fetchOne copies the row).
                let rows = try Row.fetchCursor(statement)
                guard let row = try rows.next() else { return nil }
                return Journal.Known(size: row[0], mtime: row[1], attributes: row[2], state: Self.state(row[3]), session: row[4],
                                     content: row[5])
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    /// Up to `limit` rows whose source is in `[from, below)` and whose (source, destination)
    /// comes after `after`, in byte order of (source, destination): the order of a walk, so a
    /// plan reads a thousand rows per query instead of querying once per file.
    public func rows(from: String, below: String, after: (source: String, destination: String)?, limit: Int) throws -> [Journal.KnownRow] {
        do {
            return try database.inDatabase { db in
                // The row value alone bounds the index search from below (with `source >= ?` as
                // well, SQLite scans from the range's start: quadratic over a large journal).
                let statement = try db.cachedStatement(sql: """
                    SELECT source, destination, size, mtime, attributes, state, session, content FROM file
                    WHERE (source, destination) > (?, ?) AND source < ?
                    ORDER BY source, destination LIMIT ?
                    """)
                statement.setUncheckedArguments([after?.source ?? from, after?.destination ?? "", below, limit])
                var found: [Journal.KnownRow] = []
                let cursor = try Row.fetchCursor(statement)
                while let row = try cursor.next() {
                    found.append(Journal.KnownRow(source: row[0], destination: row[1], known: Journal.Known(
                        size: row[2], mtime: row[3], attributes: row[4], state: Self.state(row[5]), session: row[6],
                        content: row[7])))
                }
                return found
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    /// What the journal knows of a file, or nil. One statement, prepared once and reused: a
    /// plan looks up every file of the tree.
    public func record(source: String, destination: String) throws -> Journal.FileRecord? {
        do {
            return try database.inDatabase { db in
                let statement = try db.cachedStatement(sql: "SELECT * FROM file WHERE source = ? AND destination = ?")
                return try Journal.FileRecord.fetchOne(statement, arguments: [source, destination])
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    public func otherSource(storedAt destination: String, besides source: String) throws -> String? {
        do {
            return try database.inDatabase { db in
                let statement = try db.cachedStatement(
                    sql: "SELECT source FROM file WHERE destination = ? AND state IN ('done', 'moved') AND source != ? LIMIT 1")
                return try String.fetchOne(statement, arguments: [destination, source])
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    public func rootDevice(_ root: String) throws -> UInt64? {
        try read { db in try Int64.fetchOne(db, sql: "SELECT device FROM root WHERE path = ?", arguments: [root]).map { UInt64(bitPattern: $0) } }
    }

    public func recordRoot(_ root: String, device: UInt64) throws {
        try write { db in
            try db.execute(sql: "INSERT INTO root (path, device) VALUES (?, ?) ON CONFLICT (path) DO UPDATE SET device = excluded.device",
                           arguments: [root, Int64(bitPattern: device)])
        }
    }

    /// The last `limit` runs, newest first.
    public func runs(limit: Int = 10) throws -> [Journal.RunRecord] {
        try read { db in try Journal.RunRecord.order(Column("started").desc).limit(limit).fetchAll(db) }
    }

    /// How many files are in each state.
    public func fileCounts() throws -> [Journal.FileState: Int] {
        try read { db in
            var counts: [Journal.FileState: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n FROM file GROUP BY state") {
                counts[Self.state(row["state"]), default: 0] += row["n"] as Int
            }
            return counts
        }
    }

    /// The most recently updated files in `state`.
    public func files(state: Journal.FileState, limit: Int = 20) throws -> [Journal.FileRecord] {
        try read { db in
            try Journal.FileRecord.filter(Column("state") == state.rawValue).order(Column("updated").desc).limit(limit).fetchAll(db)
        }
    }

    private func read<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try database.read(body) } catch { throw JournalError(reading: path, error) }
    }

    /// A state as stored; a value this version does not know (written by a newer one) reads as
    /// `failed`, so the file is tried again rather than skipped.
    static func state(_ text: String) -> Journal.FileState { Journal.FileState(rawValue: text) ?? .failed }
}

extension Journal.FileRecord: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "file"
}

extension Journal.RunRecord: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "run"
}

/// A journal that cannot be used: names the file, what is wrong, and the way back.
public struct JournalError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }

    public init(message: String) { self.message = message }

    /// A shared run asked of the journal at `location`, which does not support them.
    static func noSharedRuns(location: String) -> JournalError {
        JournalError(message: "the journal \(location) cannot share a run between workers: that takes a PostgreSQL journal (postgres://...)")
    }

    init(opening path: String, _ error: any Error) {
        let folder = (path as NSString).deletingLastPathComponent
        switch (error as? DatabaseError)?.resultCode.primaryResultCode {
        case .SQLITE_CORRUPT?, .SQLITE_NOTADB?:
            message = "the journal \(path) is damaged (\(SQLiteJournal.reason(error))). To start over, move it aside "
                + "(mv \(path) \(path).bad): the next run uploads again every file it cannot prove unchanged."
        case .SQLITE_READONLY?, .SQLITE_CANTOPEN?, .SQLITE_PERM?, .SQLITE_AUTH?:
            message = "the journal \(path) cannot be opened for writing (\(SQLiteJournal.reason(error))). "
                + "Give this user write access to \(folder) and the journal, or name another (the manifest's journal:)."
        case .SQLITE_FULL?:
            message = "the disk holding the journal \(path) is full: free space there, or name another journal (the manifest's journal:)."
        default:
            message = "\(path) is not a usable Hoist journal (\(SQLiteJournal.reason(error))). "
                + "To start over, move it aside (mv \(path) \(path).bad): the next run uploads again every file it cannot prove unchanged."
        }
    }

    init(reading path: String, _ error: any Error) {
        message = "cannot read the journal \(path): \(SQLiteJournal.reason(error)). If it is damaged, move it aside "
            + "(mv \(path) \(path).bad) and run again."
    }

    init(writing path: String, _ error: any Error) {
        switch (error as? DatabaseError)?.resultCode.primaryResultCode {
        case .SQLITE_FULL?:
            message = "cannot write the journal \(path): the disk is full. Free space there; the next run goes on from what was recorded."
        case .SQLITE_CORRUPT?, .SQLITE_NOTADB?:
            message = "cannot write the journal \(path): it is damaged (\(SQLiteJournal.reason(error))). Move it aside "
                + "(mv \(path) \(path).bad) and run again."
        default:
            message = "cannot write the journal \(path): \(SQLiteJournal.reason(error))."
        }
    }
}
