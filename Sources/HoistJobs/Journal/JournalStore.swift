import Foundation
import HoistStorage

/// A job's memory between runs, behind one small protocol so that a second implementation (a
/// database shared by many machines) can stand where the SQLite file does. What a run needs of
/// it, in the order it needs it:
///
/// - **claim**: `claimRun(wait:)` takes the job for this process (one run at a time) and marks
///   runs left `running` by processes that died as `interrupted`;
/// - **look up**: `rows(...)` (in walk order, a chunk at a time) and `lookup(...)` (one file):
///   what earlier runs did, so unchanged files are skipped and unfinished ones resumed;
/// - **record**: `apply(_:)`, batched writes of file and run rows;
/// - **finish**: the run's last row is a `.run` write; `JobRunLock.release()` lets the next run in.
///
/// Every implementation passes `JournalStoreTests` (walk-order chunks, look-ups, progress, claims
/// that exclude each other and mark dead runs, status counts). The runner's own invariant, that
/// a `done` row is written only after its object was stored, verified and persisted, is the
/// recorder's (`doneRowsAreCommittedOnlyAfterTheirObjectsWerePersisted`). Errors are
/// `JournalError`s that say what to do.
public protocol JournalStore: Sendable {
    /// Where the journal is, for messages: a file's path, or a URL with its password removed.
    var location: String { get }

    /// Takes the job for this run: waits for, or (`wait` false) refuses with `JobLock.Busy`, a
    /// run of the same job holding it; then marks runs that were left `running` `interrupted`.
    func claimRun(wait: Bool) throws -> any JobRunLock

    /// What the journal knows of one file going to one destination.
    func lookup(source: String, destination: String) throws -> Journal.Known?
    /// Up to `limit` rows whose source is in `[from, below)` and whose (source, destination)
    /// comes after `after`, in byte order of (source, destination): the order of a walk.
    func rows(from: String, below: String, after: (source: String, destination: String)?, limit: Int) throws -> [Journal.KnownRow]
    /// The whole row of one file, or nil.
    func record(source: String, destination: String) throws -> Journal.FileRecord?
    /// A file other than `source` whose upload to `destination` the journal records done (its
    /// object, made from other bytes, is not overwritten by `source`'s), or nil.
    func otherSource(storedAt destination: String, besides source: String) throws -> String?
    /// The file system (`st_dev`) a mirrored root was on when a run last mirrored it, or nil.
    func rootDevice(_ root: String) throws -> UInt64?
    /// Records the file system a mirrored root is on (`rootDevice`).
    func recordRoot(_ root: String, device: UInt64) throws

    /// Applies writes in order, all or none.
    func apply(_ writes: [Journal.Write]) throws

    /// Keeps the state of the watcher (`hoist watch`) holding the job's run lock where `hoist
    /// status` reads it (`watchState()`). By default nowhere: a file journal's watcher keeps it
    /// in a file beside the journal (`WatchState.path`).
    func recordWatchState(_ state: WatchState) throws
    /// The state of the watcher that holds the job's run lock now, as it last recorded it; nil
    /// when none does (believed only for the lock's live holder). By default nil.
    func watchState() throws -> WatchState?

    /// The last `limit` runs, newest first.
    func runs(limit: Int) throws -> [Journal.RunRecord]
    /// How many files are in each state.
    func fileCounts() throws -> [Journal.FileState: Int]
    /// The most recently updated files in `state`.
    func files(state: Journal.FileState, limit: Int) throws -> [Journal.FileRecord]

    /// Its reads and claims wait on the network (a database server), so a run keeps the global
    /// executor rather than a transport's thread, where they would stall uploads. Default false.
    var waitsOnTheNetwork: Bool { get }
    /// Workers on many machines can share runs of a job through it (`joinSharedRun`). Default false.
    var supportsSharedRuns: Bool { get }
    /// Joins the job's shared run as a worker (planning it when first), as `SharedRun.init` says.
    /// - Throws: `JournalError.noSharedRuns` for a journal that does not support them (the default).
    func joinSharedRun(wait: Bool, lease: Double, fingerprint: String) throws -> SharedRun
    /// The job's newest shared run with its workers, or nil when it has none (the default).
    func sharedRunStatus() throws -> Journal.SharedRunStatus?
}

extension JournalStore {
    public func recordWatchState(_ state: WatchState) throws {}
    public func watchState() throws -> WatchState? { nil }
    public var waitsOnTheNetwork: Bool { false }
    public var supportsSharedRuns: Bool { false }
    public func joinSharedRun(wait: Bool, lease: Double, fingerprint: String) throws -> SharedRun {
        throw JournalError.noSharedRuns(location: location)
    }
    public func sharedRunStatus() throws -> Journal.SharedRunStatus? { nil }
}

/// A run's hold on its job; released when the run ends (or its process does).
public protocol JobRunLock: Sendable {
    func release()
}

extension JournalStore {
    /// The upload sessions the journal records for files not done (uploading, pending or
    /// failed): the unfinished uploads that are provably this job's, the only ones a run may end
    /// (`StorageBackend.endStaleUploads`): another application's upload in the same place is not.
    public func unfinishedSessions() throws -> Set<String> {
        var sessions = Set<String>()
        for state in [Journal.FileState.uploading, .pending, .failed] {
            for row in try files(state: state, limit: Int(Int32.max)) { if let session = row.session { sessions.insert(session) } }
        }
        return sessions
    }

    /// Records a run that could not start (a missing root, no credentials, a missing bucket...).
    public func recordFailedStart(job: String, reason: String) throws {
        let now = Date().timeIntervalSince1970
        try apply([.run(Journal.RunRecord(id: UUID().uuidString.lowercased(), job: job, started: now, finished: now,
                                          uploaded: 0, skipped: 0, failed: 0, cancelled: 0, bytes: 0, status: .failed,
                                          pid: getpid(), error: reason))])
    }
}

/// The journal's records, and how a job's journal is found and opened.
public enum Journal {
    /// A file's state.
    public enum FileState: String, Codable, Sendable, CaseIterable {
        /// Planned by a shared run's coordinator and waiting for a worker to claim it (`SharedRun`);
        /// `session`, when set, is one an earlier run left unfinished, to continue.
        case pending
        /// Started; `session` and `confirmedOffset` say how far it got.
        case uploading
        /// Stored and verified; `md5Hash`, `crc32c` and `generation` are the server's.
        case done
        /// The last attempt failed; `error` says why. The next run tries again.
        case failed
        /// The file is gone and `mirror` deleted its object, or left it to another writer who
        /// replaced it (`error` says so): no later run deletes it again.
        case deleted
        /// Stored, verified, and its file removed by `move`: the object is its only copy. A
        /// mirror never takes it for a file that is gone, nor a listing's stray, and no other
        /// file's upload overwrites it; a new file at its path is uploaded.
        case moved
    }

    /// How a run ended (or that it is still going).
    public enum RunStatus: String, Codable, Sendable {
        case running, ok, failed
        /// Stopped by a signal, or left `running` by a process that died.
        case interrupted
    }

    /// What the journal knows of one file.
    public struct FileRecord: Codable, Sendable {
        public var source: String
        public var destination: String
        public var size: Int64
        public var mtime: Double
        /// The metadata sent, as sorted JSON: a change of metadata is a change.
        public var attributes: String
        public var state: FileState
        public var session: String?
        public var confirmedOffset: Int64
        public var md5Hash: String?
        public var crc32c: String?
        public var generation: Int64?
        public var error: String?
        public var runID: String
        public var updated: Double
        /// The file's content hash and the status it was taken at (`ContentHash.text`), for
        /// `skipUnchanged: checksum`; nil when not known.
        public var content: String?

        public init(source: String, destination: String, size: Int64, mtime: Double, attributes: String, state: FileState,
                    session: String? = nil, confirmedOffset: Int64 = 0, md5Hash: String? = nil, crc32c: String? = nil,
                    generation: Int64? = nil, error: String? = nil, runID: String, updated: Double = Date().timeIntervalSince1970,
                    content: String? = nil) {
            self.content = content
            self.source = source
            self.destination = destination
            self.size = size
            self.mtime = mtime
            self.attributes = attributes
            self.state = state
            self.session = session
            self.confirmedOffset = confirmedOffset
            self.md5Hash = md5Hash
            self.crc32c = crc32c
            self.generation = generation
            self.error = error
            self.runID = runID
            self.updated = updated
        }
    }

    /// One run, as `hoist status` shows it.
    public struct RunRecord: Codable, Sendable {
        public var id: String
        public var job: String
        public var started: Double
        public var finished: Double?
        public var uploaded: Int
        public var skipped: Int
        public var failed: Int
        public var cancelled: Int
        public var bytes: Int64
        public var status: RunStatus
        public var pid: Int32
        /// Why a run that could not start or stopped early failed.
        public var error: String?

        public init(id: String, job: String, started: Double, finished: Double?, uploaded: Int, skipped: Int, failed: Int,
                    cancelled: Int, bytes: Int64, status: RunStatus, pid: Int32, error: String?) {
            self.id = id
            self.job = job
            self.started = started
            self.finished = finished
            self.uploaded = uploaded
            self.skipped = skipped
            self.failed = failed
            self.cancelled = cancelled
            self.bytes = bytes
            self.status = status
            self.pid = pid
            self.error = error
        }
    }

    /// What a plan compares for a file: enough to tell it unchanged, or to resume it.
    public struct Known: Sendable {
        public let size: Int64
        public let mtime: Double
        public let attributes: String
        public let state: FileState
        public let session: String?
        /// `FileRecord.content`.
        public let content: String?

        public init(size: Int64, mtime: Double, attributes: String, state: FileState, session: String?, content: String? = nil) {
            self.content = content
            self.size = size
            self.mtime = mtime
            self.attributes = attributes
            self.state = state
            self.session = session
        }
    }

    /// A file's row as a plan reads the journal alongside its walk.
    public struct KnownRow: Sendable {
        public let source: String
        public let destination: String
        public let known: Known

        public init(source: String, destination: String, known: Known) {
            self.source = source
            self.destination = destination
            self.known = known
        }
    }

    /// One write of a batch.
    public enum Write: Sendable {
        case file(FileRecord)
        /// The session and confirmed offset of a file in flight.
        case progress(source: String, destination: String, session: String?, offset: Int64)
        case run(RunRecord)
        /// A done file found unchanged by content (`skipUnchanged: checksum`) with a new status:
        /// its mtime and content hash (`ContentHash.text`), so the next run need not read it.
        case content(source: String, destination: String, mtime: Double, content: String)
    }

    /// A file's CRC32C (base64, as GCS writes it) and the status (`WalkedFile.statusKey`) it was
    /// taken at: while the file's status is that one, its content is that one.
    public struct ContentHash: Sendable, Equatable {
        public let crc32c: String
        public let status: String

        public init(crc32c: String, status: String) {
            self.crc32c = crc32c
            self.status = status
        }

        /// As the journal keeps it: `CRC32C STATUS`.
        public init?(text: String) {
            let parts = text.split(separator: " ")
            guard parts.count == 2 else { return nil }
            crc32c = String(parts[0])
            status = String(parts[1])
        }

        public var text: String { crc32c + " " + status }
    }

    /// The default journal of a job.
    public static func defaultPath(job: String, environment: [String: String]) -> String {
        let state = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/state")
        return state + "/hoist/\(job).sqlite"
    }

    /// The metadata as the journal compares it, marked when the object is the file gzipped
    /// (`compress:`), so turning compression on or off uploads the file again.
    public static func attributesText(_ attributes: ObjectResource, compressed: Bool) -> String {
        compressed ? "gzip " + attributesText(attributes) : attributesText(attributes)
    }

    /// The metadata as the journal compares it.
    public static func attributesText(_ attributes: ObjectResource) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(attributes)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Opens the journal at `location`: a SQLite file by its path (created when missing), or a
    /// PostgreSQL database shared by many machines (`postgres://...`, `PostgresJournal`), where
    /// the rows are the job's (`job`, its manifest's name).
    /// - Throws: `JournalError` saying what is wrong and the way back.
    /// A run of one `shard` of a job takes only that shard's lock in a shared journal (and
    /// excludes a run of the whole job).
    public static func open(_ location: String, job: String = "", shard: Shard? = nil) throws -> any JournalStore {
        if PostgresLocation.isPostgres(location) {
            guard !job.isEmpty else { throw JournalError(message: "a shared journal (\(location)) needs the job's name.") }
            return try PostgresJournal(url: location, job: job, shard: shard)
        }
        return try SQLiteJournal(path: location)
    }

    /// Whether `location` holds a journal to read: a SQLite file that exists, or any shared
    /// journal (its server says whether it knows the job).
    public static func exists(_ location: String) -> Bool {
        PostgresLocation.isPostgres(location) || FileManager.default.fileExists(atPath: location)
    }

}
