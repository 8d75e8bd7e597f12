import Foundation
import HoistHTTP
import HoistStorage
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

/// A journal in PostgreSQL (`journal: postgres://...`), shared by the machines that run one job:
/// the same rows as `SQLiteJournal` (one per (source, destination), one per run), keyed by the
/// job's name as well, so several jobs may share one database. The schema is migrated the same
/// way as SQLite's: identifiers of applied migrations in `hoist_migrations`, each applied once,
/// under a transaction-level advisory lock so two processes starting together migrate once.
///
/// One run of a job at a time: `claimRun` takes a session-level advisory lock on a second,
/// dedicated connection, held until the run releases it or its process (or machine) goes, when
/// PostgreSQL drops the session and its locks. It replaces `flock`, which only one machine sees.
///
/// The protocol is synchronous; PostgresNIO is not. Each query runs on a NIO event-loop thread
/// and the caller's thread waits for its future: never a thread of Swift's cooperative pool
/// waiting for work that needs that pool (the event loop is a thread of its own), so the
/// runner's task and the recorder's dispatch queue can both call in without deadlock. Queries
/// are serialized on one connection (`gate`), as SQLiteJournal's are on its queue.
///
/// Every value reaches the server as a bind parameter; no SQL is built from inputs.
public final class PostgresJournal: JournalStore {
    public let job: String
    /// The shard whose runs this journal claims, or nil for the whole job.
    public let shard: Shard?
    public let target: PostgresLocation
    public var location: String { target.location }
    private let connection: PostgresConnection
    private let gate = Mutex(())
    /// Whether the hold of the run this process claimed (its lock's connection) is gone,
    /// checked before each write.
    let holdLost = Mutex<(@Sendable () -> Bool)?>(nil)
    /// The session holding the run lock this process claimed (its backend's pid), if any.
    let lockHolder = Mutex<Int32?>(nil)
    /// The shared run and worker this process writes as (`SharedRun` sets it): its writes to
    /// file rows then take effect only on rows it holds (`heldByWriter`).
    let writer = Mutex<(run: String, worker: String)?>(nil)

    static let logger = Logger(label: "hoist.journal.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    private static let connectionIDs = Atomic<Int>(0)

    /// Connects, and creates or migrates the schema.
    /// - Throws: `JournalError` in a sentence: the server cannot be reached, refused the password,
    ///   has no such database...
    public init(url: String, job: String, shard: Shard? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.job = job
        self.shard = shard
        target = try PostgresLocation(url, environment: environment)
        connection = try Self.connect(target, purpose: "journal")
        do {
            try migrate()
        } catch {
            try? connection.close().wait()
            throw error
        }
    }

    deinit { try? connection.close().wait() }

    /// A new connection to `target`, named `hoist PURPOSE pid N on HOST` in `pg_stat_activity`.
    static func connect(_ target: PostgresLocation, purpose: String) throws -> PostgresConnection {
        let tls: PostgresConnection.Configuration.TLS
        do {
            tls = try Self.tls(target)
        } catch {
            throw JournalError(message: "cannot set up TLS for the journal \(target.location): \(error). Check sslrootcert= in the journal URL.")
        }
        var configuration = PostgresConnection.Configuration(host: target.host, port: target.port, username: target.user,
                                                             password: target.password, database: target.database, tls: tls)
        configuration.options.connectTimeout = .seconds(Int64(target.connectTimeout))
        // verify-full: PostgresNIO names the host for SNI and NIOSSL checks the certificate against
        // it (against the address connected to, for an IP address).
        // Hoist's transactions run their statements back to back; one left open is a process
        // stopped inside it (SIGSTOP, a paused VM). Its row locks would keep the other workers
        // from taking its files once its lease ran out (they claim with SKIP LOCKED): the
        // server ends such a transaction after 5 s.
        configuration.options.additionalStartupParameters = [
            ("application_name", Self.applicationName(purpose)), ("idle_in_transaction_session_timeout", "5s"),
        ]
        let id = connectionIDs.wrappingAdd(1, ordering: .relaxed).newValue
        do {
            return try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration,
                                                  id: id, logger: logger).wait()
        } catch {
            throw JournalError(connecting: target, error)
        }
    }

    static func applicationName(_ purpose: String) -> String {
        "hoist \(purpose) pid \(getpid()) on \(ProcessInfo.processInfo.hostName)".prefix(63).description
    }

    private static func tls(_ target: PostgresLocation) throws -> PostgresConnection.Configuration.TLS {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch target.sslMode {
        case .disable: return .disable
        case .prefer, .require: configuration.certificateVerification = .none
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let root = target.rootCertificate { configuration.trustRoots = .file(root) }
        let context = try NIOSSLContext(configuration: configuration)
        return target.sslMode == .prefer ? .prefer(context) : .require(context)
    }

    // MARK: Queries

    /// Runs one statement on the journal's connection, waiting on this (non-event-loop) thread.
    func query(_ query: PostgresQuery) throws -> PostgresQueryResult {
        try gate.withLock { _ in try connection.query(query, logger: Self.logger).wait() }
    }

    /// Runs `body` inside BEGIN ... COMMIT on the journal's connection (ROLLBACK when it throws).
    /// Each statement is awaited before the next: a failed one must not be followed by a COMMIT
    /// that PostgreSQL would turn into a silent ROLLBACK.
    func transaction<T>(_ body: (_ run: (PostgresQuery) throws -> PostgresQueryResult) throws -> T) throws -> T {
        try gate.withLock { _ in
            let run: (PostgresQuery) throws -> PostgresQueryResult = { try self.connection.query($0, logger: Self.logger).wait() }
            _ = try run("BEGIN")
            do {
                let result = try body(run)
                _ = try run("COMMIT")
                return result
            } catch {
                _ = try? run("ROLLBACK")
                throw error
            }
        }
    }

    // MARK: Schema

    /// The migrations, in order; an identifier once applied is never changed.
    static let migrations: [(identifier: String, statements: [PostgresQuery])] = [
        ("v1", [
            """
            CREATE TABLE hoist_file (
                job text COLLATE "C" NOT NULL,
                source text COLLATE "C" NOT NULL,
                destination text COLLATE "C" NOT NULL,
                size bigint NOT NULL,
                mtime double precision NOT NULL,
                attributes text NOT NULL,
                state text NOT NULL,
                session text,
                confirmed_offset bigint NOT NULL DEFAULT 0,
                md5_hash text,
                crc32c text,
                generation bigint,
                error text,
                run_id text NOT NULL,
                updated double precision NOT NULL,
                PRIMARY KEY (job, source, destination)
            )
            """,
            "CREATE INDEX hoist_file_state ON hoist_file (job, state, updated)",
            """
            CREATE TABLE hoist_run (
                id text PRIMARY KEY,
                job text NOT NULL,
                started double precision NOT NULL,
                finished double precision,
                uploaded bigint NOT NULL,
                skipped bigint NOT NULL,
                failed bigint NOT NULL,
                cancelled bigint NOT NULL,
                bytes bigint NOT NULL,
                status text NOT NULL,
                pid integer NOT NULL,
                host text,
                error text,
                -- The advisory lock the run holds while it runs (hashtextextended of its name).
                lock_key bigint
            )
            """,
            "CREATE INDEX hoist_run_job ON hoist_run (job, started)",
        ]),
        // Shared runs (`SharedRun`): the plan's files wait as `pending` rows that workers claim.
        ("v2", [
            "ALTER TABLE hoist_file ADD COLUMN worker text, ADD COLUMN file_set integer, ADD COLUMN relative_path text",
            // The queue of a run: its unfinished rows in walk order (the index shrinks as files finish).
            """
            CREATE INDEX hoist_file_queue ON hoist_file (job, run_id, source, destination)
            WHERE state IN ('pending', 'uploading')
            """,
            """
            ALTER TABLE hoist_run ADD COLUMN shared boolean NOT NULL DEFAULT false, ADD COLUMN planned boolean NOT NULL DEFAULT false,
                ADD COLUMN fingerprint text
            """,
            """
            CREATE TABLE hoist_worker (
                run_id text NOT NULL,
                worker text NOT NULL,
                host text NOT NULL,
                pid integer NOT NULL,
                started double precision NOT NULL,
                -- The server's clock at the worker's last heartbeat: a worker silent for longer
                -- than its lease has lost its files to the others.
                heartbeat double precision NOT NULL,
                lease double precision NOT NULL,
                finished double precision,
                uploaded bigint NOT NULL DEFAULT 0,
                failed bigint NOT NULL DEFAULT 0,
                bytes bigint NOT NULL DEFAULT 0,
                status text NOT NULL,
                PRIMARY KEY (run_id, worker)
            )
            """,
        ]),
        // `skipUnchanged: checksum`: a file's content hash and the status it was taken at.
        ("v3", ["ALTER TABLE hoist_file ADD COLUMN content text"]),
        // Which file made an object: another file's upload never overwrites it.
        ("v4", ["CREATE INDEX hoist_file_destination ON hoist_file (job, destination)"]),
        // The file systems of mirrored roots: a mount gone away deletes nothing.
        ("v5", ["CREATE TABLE hoist_root (job text NOT NULL, path text NOT NULL, device bigint NOT NULL, PRIMARY KEY (job, path))"]),
        // A watcher's state (`hoist watch`) for `hoist status`, believed only while the session
        // `backend_pid` holds the run lock `lock_key`.
        ("v6", ["""
            CREATE TABLE hoist_watcher (
                job text PRIMARY KEY,
                backend_pid integer NOT NULL,
                lock_key text NOT NULL,
                state text NOT NULL,
                updated double precision NOT NULL
            )
            """]),
    ]

    /// Applies the migrations this database lacks, once, whoever else starts at the same time.
    private func migrate() throws {
        do {
            try transaction { run in
                _ = try run("SELECT pg_advisory_xact_lock(hashtextextended('hoist journal schema', 0))")
                _ = try run("CREATE TABLE IF NOT EXISTS hoist_migrations (identifier text PRIMARY KEY, applied double precision NOT NULL)")
                var applied = Set<String>()
                for row in try run("SELECT identifier FROM hoist_migrations") { applied.insert(try row.decode(String.self)) }
                let known = Set(Self.migrations.map(\.identifier))
                if let newer = applied.subtracting(known).sorted().first {
                    throw JournalError(message: "the journal \(location) was migrated by a newer Hoist (migration \(newer)): "
                        + "run that version, or give this one another database.")
                }
                for migration in Self.migrations where !applied.contains(migration.identifier) {
                    for statement in migration.statements { _ = try run(statement) }
                    _ = try run("INSERT INTO hoist_migrations (identifier, applied) VALUES (\(migration.identifier), \(Date().timeIntervalSince1970))")
                }
            }
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError(postgres: target, doing: "prepare", error)
        }
    }

    // MARK: JournalStore

    /// The advisory lock a run holds exclusively: the job's, or its shard's (then holding the
    /// job's shared, so shards run together but not beside a run of the whole job).
    var runLockName: String { shard.map { "hoist run \(job) shard \($0)" } ?? jobLockName }
    var jobLockName: String { "hoist run " + job }

    /// The two ways of splitting a job over processes, which do not mix. The raw values are
    /// part of the advisory lock names every version takes: never change them.
    enum Split: String {
        case shards = "--shard"
        case workers = "--worker"

        /// Its processes, as messages name them.
        var processes: String { self == .shards ? "shard" : "worker" }
    }

    /// Takes the session-level advisory lock `name` (exclusive, or `shared`), waiting for it by
    /// asking again (`pg_try_advisory_lock`, every 50 ms growing to 1 s) rather than inside the
    /// server. A wait inside the server outlives a killed process: the server notices the closed
    /// connection only once the lock comes, and meanwhile the queued request makes every other
    /// process's try fail, so new runs were refused as if the dead one still ran
    /// (`PostgresLockWaitTests.aRunKilledWhileWaitingLeavesNoWaitBehind`). A process that dies
    /// between two tries leaves nothing behind. `longest` bounds the pause: a shared run's plan
    /// lock is held for the seconds of one plan, and its workers should start as soon as it goes.
    static func waitForLock(_ name: String, shared: Bool, on connection: PostgresConnection, longest: Double = 1) throws {
        var pause = min(0.05, longest)
        while true {
            let query: PostgresQuery = shared ? "SELECT pg_try_advisory_lock_shared(hashtextextended(\(name), 0))"
                : "SELECT pg_try_advisory_lock(hashtextextended(\(name), 0))"
            if try connection.query(query, logger: logger).wait().first?.decode(Bool.self) ?? false { return }
            Thread.sleep(forTimeInterval: pause)
            pause = min(longest, pause * 2)
        }
    }

    /// Keeps shards and workers of one job apart (both hold the job's lock shared). A process of
    /// one way holds that way's lock shared while it runs (until `connection` closes), then looks
    /// for a holder of the other way's: none, and none can start now without seeing this one;
    /// one, and this process stops. Of two starting at once the later look sees the other (each
    /// took its own lock before it looked), so they are never both let in; processes of one way
    /// never stop each other. Refused whether or not the run waits: mixing the two is a mistake
    /// to fix, not a run to wait for.
    /// - Throws: a `JournalError` naming a process of the other way.
    static func keepApart(_ way: Split, job: String, on connection: PostgresConnection) throws {
        let other: Split = way == .shards ? .workers : .shards
        let mine = "hoist run \(job) \(way.rawValue)", theirs = "hoist run \(job) \(other.rawValue)"
        _ = try connection.query("SELECT pg_advisory_lock_shared(hashtextextended(\(mine), 0))", logger: logger).wait()
        guard let holder = try connection.query("""
            SELECT coalesce(a.application_name, 'unknown') FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE \(unescaped: grantedAdvisoryKey) = hashtextextended(\(theirs), 0) LIMIT 1
            """, logger: logger).wait().first?.decode(String.self) else { return }
        throw JournalError(message: "\(other.processes) processes of job \(job) are running (pid \(holder.components(separatedBy: " pid ").last ?? holder)): "
            + "shards and workers of a shared run split a job two ways that do not mix; run all of its processes one way")
    }

    /// Takes the job's advisory lock on a connection of its own, then marks this job's runs
    /// still `running` as `interrupted` when no session holds their lock any more: each held it
    /// while it ran, so none of those is alive.
    public func claimRun(wait: Bool) throws -> any JobRunLock {
        let lock = try PostgresRunLock(target: target, job: job, key: runLockName, shared: shard == nil ? nil : jobLockName, wait: wait)
        do {
            _ = try query(markDeadRunsInterrupted(except: lock.backendPID))
        } catch {
            lock.release()
            throw JournalError(postgres: target, doing: "write", error)
        }
        holdLost.withLock { $0 = { lock.isLost } }
        lockHolder.withLock { $0 = lock.backendPID }
        return lock
    }

    /// The state goes in `hoist_watcher` with the session holding this process's run lock;
    /// nothing without one (a watcher always holds it).
    public func recordWatchState(_ state: WatchState) throws {
        guard let holder = lockHolder.withLock({ $0 }) else { return }
        let text = String(decoding: state.json, as: UTF8.self)
        do {
            _ = try query("""
                INSERT INTO hoist_watcher (job, backend_pid, lock_key, state, updated)
                VALUES (\(job), \(holder), \(runLockName), \(text), \(Date().timeIntervalSince1970))
                ON CONFLICT (job) DO UPDATE SET backend_pid = excluded.backend_pid, lock_key = excluded.lock_key,
                    state = excluded.state, updated = excluded.updated
                """)
        } catch {
            throw JournalError(postgres: target, doing: "write", error)
        }
    }

    /// The job's watcher row, only while its session still holds the run lock it names (a
    /// watcher killed, or stopped, holds none), and only as a state parses (hostile input).
    public func watchState() throws -> WatchState? {
        try reading {
            let rows = try query("""
                SELECT w.state FROM hoist_watcher w WHERE w.job = \(job) AND EXISTS (
                    SELECT 1 FROM pg_locks l WHERE l.pid = w.backend_pid
                    AND \(unescaped: Self.grantedAdvisoryKey) = hashtextextended(w.lock_key, 0))
                """)
            guard let text = try rows.first?.decode(String.self) else { return nil }
            return WatchState.parse(Data(text.utf8))
        }
    }

    public func lookup(source: String, destination: String) throws -> Journal.Known? {
        try reading {
            let rows = try query("""
                SELECT size, mtime, attributes, state, session, content FROM hoist_file
                WHERE job = \(job) AND source = \(source) AND destination = \(destination)
                """)
            guard let row = rows.first else { return nil }
            let (size, mtime, attributes, state, session, content) = try row.decode((Int64, Double, String, String, String?, String?).self)
            return Journal.Known(size: size, mtime: mtime, attributes: attributes, state: SQLiteJournal.state(state), session: session,
                                 content: content)
        }
    }

    public func rows(from: String, below: String, after: (source: String, destination: String)?, limit: Int) throws -> [Journal.KnownRow] {
        try reading {
            // The row value bounds the primary key's index scan from below.
            let rows = try query("""
                SELECT source, destination, size, mtime, attributes, state, session, content FROM hoist_file
                WHERE job = \(job) AND (job, source, destination) > (\(job), \(after?.source ?? from), \(after?.destination ?? ""))
                  AND source < \(below)
                ORDER BY job, source, destination LIMIT \(limit)
                """)
            return try rows.map { row in
                let (source, destination, size, mtime, attributes, state, session, content)
                    = try row.decode((String, String, Int64, Double, String, String, String?, String?).self)
                return Journal.KnownRow(source: source, destination: destination, known: Journal.Known(
                    size: size, mtime: mtime, attributes: attributes, state: SQLiteJournal.state(state), session: session, content: content))
            }
        }
    }

    static let fileColumns = """
        source, destination, size, mtime, attributes, state, session, confirmed_offset, md5_hash, crc32c, generation, error, run_id, updated,
        content
        """

    public func record(source: String, destination: String) throws -> Journal.FileRecord? {
        try reading {
            try query(PostgresQuery(unsafeSQL: "SELECT \(Self.fileColumns) FROM hoist_file WHERE job = $1 AND source = $2 AND destination = $3",
                                    binds: try Self.binds(job, source, destination)))
                .first.map(Self.fileRecord)
        }
    }

    public func otherSource(storedAt destination: String, besides source: String) throws -> String? {
        try reading {
            try query(PostgresQuery(unsafeSQL: "SELECT source FROM hoist_file WHERE job = $1 AND destination = $2 AND state IN ('done', 'moved') "
                                        + "AND source <> $3 LIMIT 1", binds: try Self.binds(job, destination, source)))
                .first.map { try $0.decode(String.self) }
        }
    }

    public func rootDevice(_ root: String) throws -> UInt64? {
        try reading {
            try query(PostgresQuery(unsafeSQL: "SELECT device FROM hoist_root WHERE job = $1 AND path = $2", binds: try Self.binds(job, root)))
                .first.map { UInt64(bitPattern: try $0.decode(Int64.self)) }
        }
    }

    public func recordRoot(_ root: String, device: UInt64) throws {
        do {
            _ = try query(PostgresQuery(unsafeSQL: "INSERT INTO hoist_root (job, path, device) VALUES ($1, $2, $3) "
                                            + "ON CONFLICT (job, path) DO UPDATE SET device = EXCLUDED.device",
                                        binds: try Self.binds(job, root, Int64(bitPattern: device))))
        } catch {
            throw JournalError(postgres: target, doing: "write", error)
        }
    }

    /// Applies writes in order, in one transaction. Consecutive file rows go as one statement
    /// (a JSON array of rows, one bind parameter), so a batch of a thousand is a few round trips.
    public func apply(_ writes: [Journal.Write]) throws {
        guard !writes.isEmpty else { return }
        // A run whose lock's session is gone (the server restarted, a network cut it, someone
        // ended it) no longer excludes another: it stops rather than overlap one.
        if let isLost = holdLost.withLock({ $0 }), isLost() {
            throw JournalError(message: "lost the hold on \(job) in the journal \(target.location): the connection holding its lock closed, "
                + "so another run may start. Stopped so that two runs never overlap; the next run goes on from what was recorded.")
        }
        do {
            try transaction { run in
                var index = writes.startIndex
                while index < writes.endIndex {
                    switch writes[index] {
                    case .file:
                        var files: [Journal.FileRecord] = []
                        while index < writes.endIndex, case .file(let record) = writes[index] {
                            files.append(record)
                            index += 1
                        }
                        _ = try run(try upsertFiles(files))
                    case .progress(let source, let destination, let session, let offset):
                        let (writerRun, worker) = writer.withLock { ($0?.run, $0?.worker) }
                        _ = try run("""
                            UPDATE hoist_file SET session = \(session), confirmed_offset = \(offset), updated = \(Date().timeIntervalSince1970)
                            WHERE job = \(job) AND source = \(source) AND destination = \(destination)
                              -- As `upsertFiles`: a worker writes only the rows it holds.
                              AND (\(writerRun)::text IS NULL OR run_id IS DISTINCT FROM \(writerRun)::text
                                   OR (worker = \(worker)::text AND state <> 'done'))
                            """)
                        index += 1
                    case .content(let source, let destination, let mtime, let content):
                        _ = try run("""
                            UPDATE hoist_file SET mtime = \(mtime), content = \(content)
                            WHERE job = \(job) AND source = \(source) AND destination = \(destination) AND state = 'done'
                            """)
                        index += 1
                    case .run(let record):
                        _ = try run("""
                            INSERT INTO hoist_run (id, job, started, finished, uploaded, skipped, failed, cancelled, bytes, status, pid, host, error, lock_key)
                            VALUES (\(record.id), \(record.job), \(record.started), \(record.finished), \(Int64(record.uploaded)),
                                    \(Int64(record.skipped)), \(Int64(record.failed)), \(Int64(record.cancelled)), \(record.bytes),
                                    \(record.status.rawValue), \(record.pid), \(ProcessInfo.processInfo.hostName), \(record.error),
                                    hashtextextended(\(runLockName), 0))
                            ON CONFLICT (id) DO UPDATE SET finished = EXCLUDED.finished, uploaded = EXCLUDED.uploaded,
                                skipped = EXCLUDED.skipped, failed = EXCLUDED.failed, cancelled = EXCLUDED.cancelled,
                                bytes = EXCLUDED.bytes, status = EXCLUDED.status, error = EXCLUDED.error
                            """)
                        index += 1
                    }
                }
            }
        } catch {
            throw JournalError(postgres: target, doing: "write", error)
        }
    }

    /// One upsert of file rows; a key written twice in the batch keeps its last row (one
    /// statement may not change a row twice).
    private func upsertFiles(_ files: [Journal.FileRecord]) throws -> PostgresQuery {
        // Keyed as bytes, as PostgreSQL keys them: NFC and NFD twins are two rows (`NameBytesTests`).
        var last: [Bytewise: Int] = [:]
        for (offset, record) in files.enumerated() { last[.row(source: record.source, destination: record.destination)] = offset }
        let rows = files.enumerated().filter { last[.row(source: $0.element.source, destination: $0.element.destination)] == $0.offset }
            .map(\.element)
        let json = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
        // A worker of a shared run writes only the rows it holds, and never over a finished one:
        // a worker frozen past its lease and thawed must not put its cancelled files back to
        // `pending` over the `done` rows of the worker that took them, which would leave the
        // live workers waiting for ever (`SharedRunFencingTests`). A row of an earlier run is nobody's: it takes it. Outside a
        // shared run, `run` and `worker` are NULL and every row is written.
        let (run, worker) = writer.withLock { ($0?.run, $0?.worker) }
        return """
            INSERT INTO hoist_file (job, \(unescaped: Self.fileColumns), worker)
            SELECT \(job), source, destination, size, mtime, attributes, state, session, "confirmedOffset", "md5Hash", crc32c,
                   generation, error, "runID", updated, content, \(worker)
            FROM jsonb_to_recordset(\(json)::jsonb) AS r(source text, destination text, size bigint, mtime double precision,
                 attributes text, state text, session text, "confirmedOffset" bigint, "md5Hash" text, crc32c text,
                 generation bigint, error text, "runID" text, updated double precision, content text)
            ON CONFLICT (job, source, destination) DO UPDATE SET size = EXCLUDED.size, mtime = EXCLUDED.mtime,
                attributes = EXCLUDED.attributes, state = EXCLUDED.state, session = EXCLUDED.session,
                confirmed_offset = EXCLUDED.confirmed_offset, md5_hash = EXCLUDED.md5_hash, crc32c = EXCLUDED.crc32c,
                generation = EXCLUDED.generation, error = EXCLUDED.error, run_id = EXCLUDED.run_id, updated = EXCLUDED.updated,
                content = EXCLUDED.content, worker = COALESCE(EXCLUDED.worker, hoist_file.worker)
            WHERE \(run)::text IS NULL OR hoist_file.run_id IS DISTINCT FROM \(run)::text
               OR (hoist_file.worker = \(worker)::text AND hoist_file.state <> 'done')
            """
    }

    public func runs(limit: Int) throws -> [Journal.RunRecord] {
        try reading {
            try query("""
                SELECT id, job, started, finished, uploaded, skipped, failed, cancelled, bytes, status, pid, error FROM hoist_run
                WHERE job = \(job) ORDER BY started DESC LIMIT \(limit)
                """).map { row in
                let (id, job, started, finished, uploaded, skipped, failed, cancelled, bytes, status, pid, error)
                    = try row.decode((String, String, Double, Double?, Int64, Int64, Int64, Int64, Int64, String, Int32, String?).self)
                return Journal.RunRecord(id: id, job: job, started: started, finished: finished, uploaded: Int(uploaded),
                                         skipped: Int(skipped), failed: Int(failed), cancelled: Int(cancelled), bytes: bytes,
                                         status: Journal.RunStatus(rawValue: status) ?? .failed, pid: pid, error: error)
            }
        }
    }

    public func fileCounts() throws -> [Journal.FileState: Int] {
        try reading {
            var counts: [Journal.FileState: Int] = [:]
            for row in try query("SELECT state, COUNT(*) FROM hoist_file WHERE job = \(job) GROUP BY state") {
                let (state, count) = try row.decode((String, Int64).self)
                counts[SQLiteJournal.state(state), default: 0] += Int(count)
            }
            return counts
        }
    }

    public func files(state: Journal.FileState, limit: Int) throws -> [Journal.FileRecord] {
        try reading {
            try query(PostgresQuery(unsafeSQL: "SELECT \(Self.fileColumns) FROM hoist_file WHERE job = $1 AND state = $2 ORDER BY updated DESC LIMIT $3",
                                    binds: try Self.binds(job, state.rawValue, limit)))
                .map(Self.fileRecord)
        }
    }

    // MARK: Helpers

    private func reading<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw JournalError(postgres: target, doing: "read", error) }
    }

    private static func binds(_ values: any PostgresEncodable...) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { try bindings.append(value) }
        return bindings
    }

    private static func fileRecord(_ row: PostgresRow) throws -> Journal.FileRecord {
        let (source, destination, size, mtime, attributes, state, session, offset, md5, crc, generation, error, runID, updated, content)
            = try row.decode((String, String, Int64, Double, String, String, String?, Int64, String?, String?, Int64?, String?, String, Double,
                              String?).self)
        return Journal.FileRecord(source: source, destination: destination, size: size, mtime: mtime, attributes: attributes,
                                  state: SQLiteJournal.state(state), session: session, confirmedOffset: offset, md5Hash: md5,
                                  crc32c: crc, generation: generation, error: error, runID: runID, updated: updated, content: content)
    }
}

/// A run's hold on its job in a shared journal: a session-level advisory lock on a connection
/// of its own. PostgreSQL releases it when the connection closes, so a killed process or a lost
/// machine lets the next run in (once the server notices the connection is gone).
final class PostgresRunLock: JobRunLock {
    private let connection: PostgresConnection
    private let released = Mutex(false)
    /// The server process of the lock's session (`pg_backend_pid()`).
    let backendPID: Int32

    init(target: PostgresLocation, job: String, key: String, shared: String?, wait: Bool) throws {
        connection = try PostgresJournal.connect(target, purpose: "run")
        do {
            if wait {
                if let shared { try PostgresJournal.waitForLock(shared, shared: true, on: connection) }
                try PostgresJournal.waitForLock(key, shared: false, on: connection)
            } else {
                for (name, exclusive) in [(shared, false), (Optional(key), true)] {
                    guard let name else { continue }
                    let taken = try connection.query(exclusive
                        ? "SELECT pg_try_advisory_lock(hashtextextended(\(name), 0))"
                        : "SELECT pg_try_advisory_lock_shared(hashtextextended(\(name), 0))", logger: PostgresJournal.logger)
                        .wait().first?.decode(Bool.self) ?? false
                    if taken { continue }
                    let holder = Self.holder(of: name, on: connection)
                    try? connection.close().wait()
                    throw JobLock.Busy(holder: holder ?? "unknown")
                }
            }
            if shared != nil {
                try PostgresJournal.keepApart(.shards, job: job, on: connection)
            }
            backendPID = try connection.query("SELECT pg_backend_pid()", logger: PostgresJournal.logger).wait().first?.decode(Int32.self) ?? 0
        } catch let error as JobLock.Busy {
            throw error
        } catch {
            try? connection.close().wait()
            throw JournalError(postgres: target, doing: "lock", error)
        }
    }

    /// Who holds the advisory lock `key`: "N on HOST" from the holder's `application_name`
    /// ("hoist run pid N on HOST").
    static func holder(of key: String, on connection: PostgresConnection) -> String? {
        let name = try? connection.query("""
            SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE \(unescaped: PostgresJournal.grantedAdvisoryKey) = hashtextextended(\(key), 0)
            """, logger: PostgresJournal.logger).wait().first?.decode(String.self)
        return name.map { $0.components(separatedBy: " pid ").last ?? $0 }
    }

    /// Whether the lock went without being released: its session ended.
    var isLost: Bool { connection.isClosed && !released.withLock { $0 } }

    func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { try? connection.close().wait() }
    }

    deinit { release() }
}

extension JournalError {
    /// A connection that could not be made, in a sentence: what failed, where, and what to check.
    init(connecting target: PostgresLocation, _ error: any Error) {
        let at = "\(target.host):\(target.port)"
        guard let error = error as? PSQLError else {
            self.init(message: "cannot reach the PostgreSQL journal at \(at) (\(Self.plain(error))): start the server, or check the host and port in \(target.location).")
            return
        }
        let state = error.serverInfo?[.sqlState]
        switch (error.code, state) {
        case (.server, "28P01"?):
            self.init(message: "PostgreSQL at \(at) refused the password of user \(target.user) (journal \(target.location)): "
                + "check the password in the journal URL or PGPASSWORD.")
        case (.server, "28000"?):
            self.init(message: "PostgreSQL at \(at) does not let user \(target.user) in (journal \(target.location)): "
                + Self.said(error) + ". Check the user and the server's pg_hba.conf.")
        case (.server, "3D000"?):
            self.init(message: "PostgreSQL at \(at) has no database \(target.database) (journal \(target.location)): "
                + "create it (createdb \(target.database)) or name another in the journal URL.")
        case (.authMechanismRequiresPassword, _):
            self.init(message: "PostgreSQL at \(at) asks user \(target.user) for a password and none was given (journal \(target.location)): "
                + "put it in the journal URL or in PGPASSWORD.")
        case (.sslUnsupported, _):
            self.init(message: "PostgreSQL at \(at) does not offer TLS, and the journal URL asks for sslmode=\(target.sslMode.rawValue): "
                + "enable ssl on the server, or use sslmode=disable on a trusted network.")
        case (.server, _):
            self.init(message: "PostgreSQL at \(at) refused the connection (journal \(target.location)): \(error.serverInfo?[.message] == nil ? "no reason given" : Self.said(error)).")
        case (.failedToAddSSLHandler, _):
            self.init(message: "cannot set up TLS to PostgreSQL at \(at) (journal \(target.location)): check sslrootcert= in the journal URL.")
        default:
            if let underlying = error.underlying, underlying is NIOSSLError || "\(underlying)".contains("certificate") {
                // The server's certificate: not from a trusted CA, or not for this host name.
                self.init(message: "PostgreSQL at \(at) presented a certificate that sslmode=\(target.sslMode.rawValue) does not trust "
                    + "(\(Self.plain(underlying))): name the CA that signed it with sslrootcert=FILE in the journal URL \(target.location), "
                    + "and the host as the certificate names it.")
                return
            }
            let reason = error.underlying.map(Self.plain) ?? "\(error.code)"
            self.init(message: "cannot reach the PostgreSQL journal at \(at) (\(reason)): start the server, or check the host and port in \(target.location).")
        }
    }

    /// A query that failed: the server's own message when it gave one.
    init(postgres target: PostgresLocation, doing: String, _ error: any Error) {
        if let error = error as? JournalError {
            self = error
            return
        }
        guard let error = error as? PSQLError else {
            self.init(message: "cannot \(doing) the journal \(target.location): \(Self.plain(error)).")
            return
        }
        if error.serverInfo?[.message] != nil {
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \(printable($0, limit: 5)))" } ?? ""
            self.init(message: "cannot \(doing) the journal \(target.location): \(Self.said(error))\(state).")
        } else {
            let reason = error.underlying.map(Self.plain) ?? "\(error.code)"
            self.init(message: "cannot \(doing) the journal \(target.location): the connection to PostgreSQL failed (\(reason)). "
                + "The next run goes on from what was recorded.")
        }
    }

    /// What the server said (its error's message): one line, bounded.
    static func said(_ error: PSQLError) -> String {
        printable(error.serverInfo?[.message] ?? "", limit: outsideTextLimit)
    }

    /// An error's text without a type's dump, one line.
    static func plain(_ error: any Error) -> String {
        let text = "\(error)"
        if text.contains("refused") { return "connection refused" }
        if text.lowercased().contains("timed out") || text.contains("connectTimeout") { return "connection timed out" }
        if let error = error as? IOError { return error.description }
        return printable(text, limit: 200)
    }
}

extension PostgresJournal {
    /// Its reads and claims are queries to a server.
    public var waitsOnTheNetwork: Bool { true }
    /// Workers on many machines share runs through the server (`SharedRun`).
    public var supportsSharedRuns: Bool { true }

    public func joinSharedRun(wait: Bool, lease: Double, fingerprint: String) throws -> SharedRun {
        try SharedRun(journal: self, wait: wait, lease: lease, fingerprint: fingerprint)
    }
}
