import Foundation
import GRDB
import HoistStorage

/// A job's memory between runs, in SQLite (WAL): one row per (source file, destination) with
/// what was last uploaded and, for a file in flight, its upload session and confirmed offset;
/// one row per run. It is what makes runs incremental and resumable after a crash.
///
/// Default path: `$XDG_STATE_HOME/hoist/JOB.sqlite` (`~/.local/state/hoist/JOB.sqlite`);
/// `journal:` in the manifest or `--journal` on the command line choose another.
public final class Journal: Sendable {
    public let path: String
    private let database: DatabaseQueue

    /// What the journal knows of one file.
    public struct FileRecord: Codable, Sendable, FetchableRecord, PersistableRecord {
        public static let databaseTableName = "file"
        public var source: String
        public var destination: String
        public var size: Int64
        public var mtime: Double
        /// The metadata sent, as sorted JSON: a change of metadata is a change.
        public var attributes: String
        /// `uploading`, `done` or `failed`.
        public var state: String
        public var session: String?
        public var confirmedOffset: Int64
        public var md5Hash: String?
        public var crc32c: String?
        public var generation: Int64?
        public var error: String?
        public var runID: String
        public var updated: Double
    }

    /// One run, as `hoist status` shows it.
    public struct RunRecord: Codable, Sendable, FetchableRecord, PersistableRecord {
        public static let databaseTableName = "run"
        public var id: String
        public var job: String
        public var started: Double
        public var finished: Double?
        public var uploaded: Int
        public var skipped: Int
        public var failed: Int
        public var cancelled: Int
        public var bytes: Int64
        /// `running`, `ok`, `failed`, `interrupted` (a run still `running` with no process died).
        public var status: String
        public var pid: Int32
        /// Why a run that could not start or stopped early failed.
        public var error: String?
    }

    /// The default journal of a job.
    public static func defaultPath(job: String, environment: [String: String]) -> String {
        let state = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/state")
        return state + "/hoist/\(job).sqlite"
    }

    /// Opens (creating when missing), checks (`PRAGMA quick_check`) and migrates a journal.
    /// - Throws: `JournalError` naming the file, what is wrong (damaged, not writable, disk
    ///   full) and the way back.
    public init(path: String) throws {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw JournalError(message: "cannot create the journal's folder \(folder): \(error.localizedDescription). "
                + "Create it with write access for this user, or name another journal with --journal.")
        }
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

    /// Marks runs still `running` as `interrupted`: called by the run that holds the job's lock,
    /// so no process of theirs is alive (they were killed, or their machine went down).
    public func markInterruptedRuns() throws {
        try write { db in
            try db.execute(sql: "UPDATE run SET status = 'interrupted', finished = COALESCE(finished, ?) WHERE status = 'running'",
                           arguments: [Date().timeIntervalSince1970])
        }
    }

    /// One write of a batch.
    public enum Write: Sendable {
        case file(FileRecord)
        /// The session and confirmed offset of a file in flight.
        case progress(source: String, destination: String, session: String?, offset: Int64)
        case run(RunRecord)
    }

    /// Applies writes in order, in one transaction: what a run records is batched, never a
    /// transaction per file.
    public func apply(_ writes: [Write]) throws {
        try write { db in
            for item in writes {
                switch item {
                case .file(let record): try record.insert(db, onConflict: .replace)
                case .run(let record): try record.insert(db, onConflict: .replace)
                case .progress(let source, let destination, let session, let offset):
                    try db.cachedStatement(sql: "UPDATE file SET session = ?, confirmedOffset = ?, updated = ? WHERE source = ? AND destination = ?")
                        .execute(arguments: [session, offset, Date().timeIntervalSince1970, source, destination])
                }
            }
        }
    }

    /// Records a run that could not start (a missing root, no credentials, a missing bucket...).
    public func recordFailedStart(job: String, reason: String) throws {
        let now = Date().timeIntervalSince1970
        try save(RunRecord(id: UUID().uuidString.lowercased(), job: job, started: now, finished: now, uploaded: 0, skipped: 0,
                           failed: 0, cancelled: 0, bytes: 0, status: "failed", pid: getpid(), error: reason))
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
        return migrator
    }

    /// The metadata as the journal compares it.
    public static func attributesText(_ attributes: ObjectResource) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(attributes)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// What a plan compares for a file: enough to tell it unchanged, or to resume it.
    public struct Known: Sendable {
        public let size: Int64
        public let mtime: Double
        public let attributes: String
        public let state: String
        public let session: String?
    }

    /// The columns a plan compares, read by position from one reused statement (no record
    /// decoding): every file of the tree is looked up.
    public func lookup(source: String, destination: String) throws -> Known? {
        do {
            return try database.inDatabase { db in
                let statement = try db.cachedStatement(
                    sql: "SELECT size, mtime, attributes, state, session FROM file WHERE source = ? AND destination = ?")
                statement.setUncheckedArguments([source, destination])
                // A cursor's row reads the statement's columns in place (fetchOne copies the row).
                let rows = try Row.fetchCursor(statement)
                guard let row = try rows.next() else { return nil }
                return Known(size: row[0], mtime: row[1], attributes: row[2], state: row[3], session: row[4])
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    /// A file's row as a plan reads the journal alongside its walk.
    public struct KnownRow: Sendable {
        public let source: String
        public let destination: String
        public let known: Known
    }

    /// Up to `limit` rows whose source is in `[from, below)` and whose (source, destination)
    /// comes after `after`, in byte order of (source, destination): the order of a walk, so a
    /// plan reads a thousand rows per query instead of querying once per file.
    public func rows(from: String, below: String, after: (source: String, destination: String)?, limit: Int) throws -> [KnownRow] {
        do {
            return try database.inDatabase { db in
                // The row value alone bounds the index search from below (with `source >= ?` as
                // well, SQLite scans from the range's start: quadratic over a large journal).
                let statement = try db.cachedStatement(sql: """
                    SELECT source, destination, size, mtime, attributes, state, session FROM file
                    WHERE (source, destination) > (?, ?) AND source < ?
                    ORDER BY source, destination LIMIT ?
                    """)
                statement.setUncheckedArguments([after?.source ?? from, after?.destination ?? "", below, limit])
                var found: [KnownRow] = []
                let cursor = try Row.fetchCursor(statement)
                while let row = try cursor.next() {
                    found.append(KnownRow(source: row[0], destination: row[1], known: Known(
                        size: row[2], mtime: row[3], attributes: row[4], state: row[5], session: row[6])))
                }
                return found
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    /// What the journal knows of a file, or nil. One statement, prepared once and reused: a
    /// plan looks up every file of the tree.
    public func record(source: String, destination: String) throws -> FileRecord? {
        do {
            return try database.inDatabase { db in
                let statement = try db.cachedStatement(sql: "SELECT * FROM file WHERE source = ? AND destination = ?")
                return try FileRecord.fetchOne(statement, arguments: [source, destination])
            }
        } catch {
            throw JournalError(reading: path, error)
        }
    }

    public func save(_ run: RunRecord) throws {
        try apply([.run(run)])
    }

    /// The last `limit` runs, newest first.
    public func runs(limit: Int = 10) -> [RunRecord] {
        (try? database.read { db in try RunRecord.order(Column("started").desc).limit(limit).fetchAll(db) }) ?? []
    }

    /// Files by state, and the failed and unfinished ones.
    public func fileCounts() -> [String: Int] {
        (try? database.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n FROM file GROUP BY state")
                .map { ($0["state"] as String, $0["n"] as Int) })
        }) ?? [:]
    }

    public func files(state: String, limit: Int = 20) -> [FileRecord] {
        (try? database.read { db in
            try FileRecord.filter(Column("state") == state).order(Column("updated").desc).limit(limit).fetchAll(db)
        }) ?? []
    }
}

/// A journal that cannot be used: names the file, what is wrong, and the way back.
public struct JournalError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }

    public init(message: String) { self.message = message }

    init(opening path: String, _ error: any Error) {
        let folder = (path as NSString).deletingLastPathComponent
        switch (error as? DatabaseError)?.resultCode.primaryResultCode {
        case .SQLITE_CORRUPT?, .SQLITE_NOTADB?:
            message = "the journal \(path) is damaged (\(Journal.reason(error))). To start over, move it aside "
                + "(mv \(path) \(path).bad): the next run uploads again every file it cannot prove unchanged."
        case .SQLITE_READONLY?, .SQLITE_CANTOPEN?, .SQLITE_PERM?, .SQLITE_AUTH?:
            message = "the journal \(path) cannot be opened for writing (\(Journal.reason(error))). "
                + "Give this user write access to \(folder) and the journal, or name another with --journal."
        case .SQLITE_FULL?:
            message = "the disk holding the journal \(path) is full: free space there, or name another journal with --journal."
        default:
            message = "\(path) is not a usable Hoist journal (\(Journal.reason(error))). "
                + "To start over, move it aside (mv \(path) \(path).bad): the next run uploads again every file it cannot prove unchanged."
        }
    }

    init(reading path: String, _ error: any Error) {
        message = "cannot read the journal \(path): \(Journal.reason(error)). If it is damaged, move it aside "
            + "(mv \(path) \(path).bad) and run again."
    }

    init(writing path: String, _ error: any Error) {
        switch (error as? DatabaseError)?.resultCode.primaryResultCode {
        case .SQLITE_FULL?:
            message = "cannot write the journal \(path): the disk is full. Free space there; the next run goes on from what was recorded."
        case .SQLITE_CORRUPT?, .SQLITE_NOTADB?:
            message = "cannot write the journal \(path): it is damaged (\(Journal.reason(error))). Move it aside "
                + "(mv \(path) \(path).bad) and run again."
        default:
            message = "cannot write the journal \(path): \(Journal.reason(error))."
        }
    }
}
