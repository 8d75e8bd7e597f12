import Foundation
import HoistStorage
import PostgresNIO
import Synchronization

/// One run of a job shared by many `hoist run --worker` processes (on one machine or many)
/// through a PostgreSQL journal.
///
/// - **Plan once**: the first process takes the job's plan lock, walks the tree and writes the
///   files to upload as `pending` rows of a new run; the others wait on that lock and then join
///   the planned run. A run whose planner died before it finished planning is marked
///   `interrupted` and planned anew (the journal's `done` rows make that cheap).
/// - **Claims**: a worker takes pending rows in batches (`FOR UPDATE SKIP LOCKED`, so two workers
///   never take one row) and writes its id on them; its uploads then go through the journal's
///   recorder as in any run (`uploading` with the session, `done` once verified).
/// - **Leases**: a worker's heartbeat (every third of its lease) stamps its row with the
///   server's clock. A worker whose heartbeat is older than its lease, or whose lock connection
///   is gone (kill -9: PostgreSQL drops the session at once), has lost its files: the next claim
///   takes them, and a half-sent file continues its resumable session from the server's offset.
/// - **Fencing**: a worker that cannot renew its lease stops its uploads (`onLost`), so two
///   workers never finalize one object; a `done` row is never claimed again.
/// - **End**: a worker finding nothing to claim waits while other live workers hold files (one
///   of them may still die), and leaves when the run has no unfinished file; the last one marks
///   the run `ok` or `failed` with the totals of the files' rows.
///
/// Runs of one job never overlap: every worker holds the job's advisory lock shared, which
/// excludes a run of the whole job (`claimRun`, exclusive), and a new plan is made only while no
/// planned run is going.
public final class SharedRun: JobRunLock, Sendable {
    public let runID: String
    /// This worker's id (random), as `hoist status` shows it.
    public let worker: String
    /// Whether this process makes the plan (else it joined a planned run).
    public let plans: Bool
    /// Seconds a worker may go without a heartbeat before its files are taken.
    public let lease: Double
    /// When the run started: the time templates of its files are filled with (`{date}`...).
    public let started: Date
    let journal: PostgresJournal
    private let hold: PostgresConnection
    private let state = Mutex(State())
    private struct State {
        var released = false
        var planning: [PlannedRow] = []
        var lastReap = 0.0
        var lastBeat = Date()
        /// A heartbeat query is under way (it may never return: a network partition).
        var beating = false
        /// Why the last heartbeat failed, for the message when the lease runs out.
        var beatError: String?
        var onLost: (@Sendable (String) -> Void)?
        var lost: String?
    }
    /// Signalled when the run is released: the heartbeat's thread ends.
    private let stopBeating = DispatchSemaphore(value: 0)

    /// Joins the job's shared run, or makes its plan when none is going.
    /// - Parameter wait: wait for a run of the whole job (not shared) to end, instead of `JobLock.Busy`.
    /// - Parameter fingerprint: the manifest's (`Job.fingerprint`): a worker joins only a run
    ///   planned from the same manifest.
    /// - Throws: `JobLock.Busy`, or a `JournalError` in a sentence.
    public init(journal: PostgresJournal, wait: Bool, lease: Double = 30, fingerprint: String = "") throws {
        self.journal = journal
        self.lease = lease
        let worker = String(UUID().uuidString.lowercased().prefix(8))
        let target = journal.target
        let hold = try PostgresJournal.connect(target, purpose: "worker")
        let jobKey = journal.jobLockName
        let planKey = Self.planKey(journal.job)
        var plans = false
        var runID = ""
        var started = Date()
        let waiting = Date().timeIntervalSince1970
        do {
            func lock(_ sql: PostgresQuery) throws -> Bool {
                try hold.query(sql, logger: PostgresJournal.logger).wait().first?.decode(Bool?.self) ?? true
            }
            if wait {
                try PostgresJournal.waitForLock(jobKey, shared: true, on: hold)
            } else if try !lock("SELECT pg_try_advisory_lock_shared(hashtextextended(\(jobKey), 0))") {
                throw JobLock.Busy(holder: PostgresRunLock.holder(of: jobKey, on: hold) ?? "unknown")
            }
            try PostgresJournal.keepApart(.workers, job: journal.job, on: hold)
            try PostgresJournal.waitForLock(Self.workerLockPrefix + worker, shared: false, on: hold)
            try PostgresJournal.waitForLock(planKey, shared: false, on: hold, longest: 0.2)
            let backend = try hold.query("SELECT pg_backend_pid()", logger: PostgresJournal.logger).wait().first?.decode(Int32.self) ?? 0
            // Under the plan lock: join the planned run, or plan a new one.
            (runID, plans, started) = try Self.joinOrPlan(journal, backend: backend, waitingSince: waiting, fingerprint: fingerprint,
                                                          worker: worker, lease: lease)
            if !plans { _ = try lock("SELECT pg_advisory_unlock(hashtextextended(\(planKey), 0))") }
        } catch let error as JobLock.Busy {
            try? hold.close().wait()
            throw error
        } catch {
            try? hold.close().wait()
            throw JournalError(postgres: target, doing: "join a shared run in", error)
        }
        self.runID = runID
        self.plans = plans
        self.started = started
        self.worker = worker
        self.hold = hold
        journal.holdLost.withLock { $0 = { hold.isClosed } }
        journal.writer.withLock { $0 = (runID, worker) }
        startHeartbeat()
    }

    deinit { release() }

    /// Joins the job's planned shared run, or makes a new one for this worker to plan (the
    /// caller holds the plan lock), and records this worker in it.
    /// - Returns: the run's id, whether this worker plans it, and when the run started.
    private static func joinOrPlan(_ journal: PostgresJournal, backend: Int32, waitingSince waiting: Double, fingerprint: String,
                                   worker: String, lease: Double) throws -> (String, Bool, Date) {
        var plans = false
        var runID = ""
        var started = Date()
        let jobKey = journal.jobLockName
        try journal.transaction { run in
            _ = try run(journal.markDeadRunsInterrupted(except: backend))
            // A plan that failed while this worker waited for it fails this worker too (one
            // plan, one error), rather than being made again.
            if let (error, pid, host) = try run("""
                SELECT error, pid, host FROM hoist_run WHERE job = \(journal.job) AND shared AND status = 'failed' AND NOT planned
                  AND started >= \(waiting - 1) ORDER BY started DESC LIMIT 1
                """).first.map({ try $0.decode((String?, Int32, String?).self) }) {
                throw JournalError(message: "the shared run's plan (made by pid \(pid) on \(host ?? "?")) failed: \(error ?? "no reason given")")
            }
            let found = try run("""
                SELECT id, planned, fingerprint, started, pid, host FROM hoist_run
                WHERE job = \(journal.job) AND status = 'running' AND shared ORDER BY started DESC LIMIT 1
                """).first.map { try $0.decode((String, Bool, String?, Double, Int32, String?).self) }
            if let (id, planned, theirs, when, pid, host) = found, planned {
                guard theirs == fingerprint else {
                    throw JournalError(message: "this worker's manifest differs from the one the shared run of \(journal.job) was planned "
                        + "with (by pid \(pid) on \(host ?? "?")), or its roots are elsewhere: run every worker with the same manifest, "
                        + "with the files at the same paths")
                }
                runID = id
                started = Date(timeIntervalSince1970: when)
            } else {
                if let id = found?.0 {
                    // Its planner died while planning (this process holds the plan lock now).
                    _ = try run("UPDATE hoist_run SET status = 'interrupted', finished = \(Date().timeIntervalSince1970) WHERE id = \(id)")
                }
                plans = true
                runID = UUID().uuidString.lowercased()
                _ = try run("""
                    INSERT INTO hoist_run (id, job, started, uploaded, skipped, failed, cancelled, bytes, status, pid, host, lock_key, shared,
                                           planned, fingerprint)
                    VALUES (\(runID), \(journal.job), \(started.timeIntervalSince1970), 0, 0, 0, 0, 0, 'running', \(getpid()),
                            \(ProcessInfo.processInfo.hostName), hashtextextended(\(jobKey), 0), true, false, \(fingerprint))
                    """)
            }
            _ = try run("""
                INSERT INTO hoist_worker (run_id, worker, host, pid, started, heartbeat, lease, status)
                VALUES (\(runID), \(worker), \(ProcessInfo.processInfo.hostName), \(getpid()), \(Date().timeIntervalSince1970),
                        extract(epoch from clock_timestamp()), \(lease), 'running')
                """)
        }
        return (runID, plans, started)
    }

    /// Beats every third of the lease on a thread of its own until the run is released.
    private func startHeartbeat() {
        let stop = stopBeating
        let lease = lease
        // The lease's clock is kept on this thread, apart from the heartbeat's query, so a query
        // that never returns (a network partition: no reset, no answer) is noticed all the same.
        let beats = DispatchQueue(label: "hoist.heartbeat")
        Thread.detachNewThread { [weak self] in
            while stop.wait(timeout: .now() + lease / 3) == .timedOut {
                guard let self else { return }
                self.checkSilence()
                let idle = self.state.withLock { state in
                    defer { state.beating = true }
                    return !state.beating
                }
                if idle {
                    beats.async {
                        self.beat()
                        self.state.withLock { $0.beating = false }
                    }
                }
            }
        }
    }

    /// The advisory lock a worker holds while it lives is "hoist worker ID" (`workerLost` reads it).
    static let workerLockPrefix = "hoist worker "

    /// SQL, for a `hoist_worker` row `w` still `running`: its worker is lost, silent past its
    /// lease or its lock's session gone (kill -9, a lost machine noticed).
    static let workerLost = """
        (w.heartbeat < extract(epoch from clock_timestamp()) - w.lease OR NOT EXISTS (
            SELECT 1 FROM pg_locks l WHERE \(PostgresJournal.grantedAdvisoryKey) = hashtextextended('\(workerLockPrefix)' || w.worker, 0)))
        """

    /// The advisory lock one process holds while it plans a job's shared run.
    static func planKey(_ job: String) -> String { "hoist plan " + job }

    /// Lets the workers waiting for the plan in.
    private func releasePlanLock() throws {
        _ = try hold.query("SELECT pg_advisory_unlock(hashtextextended(\(Self.planKey(journal.job)), 0))", logger: PostgresJournal.logger).wait()
    }

    /// Called once when this worker lost its hold (heartbeat failed past the lease, or the lock's
    /// connection closed): its files may be taken by others, so its uploads must stop.
    public func onLost(_ handler: @escaping @Sendable (String) -> Void) {
        let lost = state.withLock { state -> String? in
            state.onLost = handler
            return state.lost
        }
        if let lost { handler(lost) }
    }

    private func beat() {
        if state.withLock({ $0.released }) { return }
        if hold.isClosed { return lose("the connection holding this worker's lock closed") }
        do {
            let alive = try journal.query("""
                UPDATE hoist_worker SET heartbeat = extract(epoch from clock_timestamp())
                WHERE run_id = \(runID) AND worker = \(worker) AND status = 'running' RETURNING 1
                """).first != nil
            guard alive else {
                // Frozen (SIGSTOP, a paused machine) past the lease: the others took its files.
                return lose("the other workers found it silent for longer than its lease (\(Int(lease)) s) and took its files")
            }
            state.withLock {
                $0.lastBeat = Date()
                $0.beatError = nil
            }
        } catch {
            // `checkSilence` says so once the lease is nearly spent.
            state.withLock { $0.beatError = describe(error) }
        }
    }

    /// Whether no heartbeat reached the journal for most of the lease because they failed or
    /// are not back. (A process that was frozen instead learns from its next beat whether the
    /// others took its files.)
    private func checkSilence() {
        let (last, error, stuck, released) = state.withLock { ($0.lastBeat, $0.beatError, $0.beating, $0.released) }
        guard !released, error != nil || stuck, Date().timeIntervalSince(last) > lease * 0.8 else { return }
        lose("no heartbeat reached the journal for \(Int(lease * 0.8)) s (\(error ?? "the journal did not answer"))")
    }

    /// This worker lost its hold: its uploads must stop (once).
    ///
    /// (Before it learns so, a worker thawed after a freeze sends nothing: `isOpen`.)
    private func lose(_ failure: String) {
        let message = "lost this worker's hold on \(journal.job) in the journal \(journal.location): \(failure). "
            + "Stopped so that no file is sent by two workers; the others (or the next run) go on from what was recorded."
        let (first, handler) = state.withLock { state -> (Bool, (@Sendable (String) -> Void)?) in
            guard state.lost == nil else { return (false, nil) }
            state.lost = message
            return (true, state.onLost)
        }
        guard first else { return }
        handler?(message)
    }

    // MARK: Plan

    /// Adds a file to the plan (written in batches; `planFinished` writes the rest): its row
    /// (`pending`), its file set and its path below that set's root, where a worker finds it.
    func plan(_ record: Journal.FileRecord, fileSet: Int, relativePath: String) throws {
        let row = PlannedRow(record: record, set: fileSet, relative: relativePath)
        let batch = state.withLock { state -> [PlannedRow]? in
            state.planning.append(row)
            guard state.planning.count >= 1000 else { return nil }
            defer { state.planning.removeAll(keepingCapacity: true) }
            return state.planning
        }
        if let batch { try writePlan(batch) }
    }

    /// A file of the plan: its journal row, and where a worker finds it (its file set, its
    /// path below the root).
    private struct PlannedRow: Encodable, Sendable {
        let record: Journal.FileRecord
        let set: Int
        let relative: String
        func encode(to encoder: any Encoder) throws {
            try record.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(set, forKey: .fileSet)
            try container.encode(relative, forKey: .relativePath)
        }
        enum Key: String, CodingKey { case fileSet, relativePath }
    }

    private func writePlan(_ rows: [PlannedRow]) throws {
        guard !rows.isEmpty else { return }
        let json = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
        do {
            _ = try journal.query("""
                INSERT INTO hoist_file (job, source, destination, size, mtime, attributes, state, session, confirmed_offset, run_id,
                                        updated, file_set, relative_path)
                SELECT \(journal.job), source, destination, size, mtime, attributes,
                       -- `uploading`: begun by an earlier run, perhaps stored (`PlanItem.mayBeStored`).
                       CASE WHEN state = 'uploading' THEN 'uploading' ELSE 'pending' END, session, 0, "runID", updated,
                       "fileSet", "relativePath"
                FROM jsonb_to_recordset(\(json)::jsonb) AS r(source text, destination text, size bigint, mtime double precision,
                     attributes text, state text, session text, "runID" text, updated double precision, "fileSet" integer,
                     "relativePath" text)
                ON CONFLICT (job, source, destination) DO UPDATE SET size = EXCLUDED.size, mtime = EXCLUDED.mtime,
                    attributes = EXCLUDED.attributes, state = EXCLUDED.state, session = EXCLUDED.session, run_id = EXCLUDED.run_id,
                    updated = EXCLUDED.updated, file_set = EXCLUDED.file_set, relative_path = EXCLUDED.relative_path,
                    worker = NULL, error = NULL
                """)
        } catch {
            throw JournalError(postgres: journal.target, doing: "write the plan to", error)
        }
    }

    /// Writes the rest of the plan, marks the run planned and lets the waiting workers join.
    /// - Parameter failed: files the plan could not take (unreadable folders, impossible names).
    func planFinished(skipped: Int, failed: Int) throws {
        try writePlan(state.withLock { state in
            defer { state.planning = [] }
            return state.planning
        })
        do {
            _ = try journal.query("UPDATE hoist_run SET planned = true, skipped = \(Int64(skipped)), failed = \(Int64(failed)) WHERE id = \(runID)")
            try releasePlanLock()
        } catch {
            throw JournalError(postgres: journal.target, doing: "write the plan to", error)
        }
    }

    /// Ends a plan that could not be made (two files for one object, a template that cannot be
    /// filled): the run fails with `message`, and a worker waiting to join plans anew (and meets it).
    func planFailed(_ message: String) throws {
        do {
            _ = try journal.query("""
                UPDATE hoist_run SET status = 'failed', error = \(message), finished = \(Date().timeIntervalSince1970) WHERE id = \(runID)
                """)
            try releasePlanLock()
        } catch {
            throw JournalError(postgres: journal.target, doing: "write the plan to", error)
        }
    }

    // MARK: Claims

    /// What a claim found.
    enum Claim {
        /// Files for this worker to upload, now its own.
        case files([Journal.ClaimedFile])
        /// Nothing to take now, but live workers hold unfinished files (one may yet die).
        case wait
        /// The run has no unfinished file.
        case finished
    }

    /// Takes up to `limit` files: pending ones, and those of workers that died or went silent.
    func claim(limit: Int) throws -> Claim {
        do {
            let now = Date().timeIntervalSince1970
            if state.withLock({ state in
                defer { if now - state.lastReap >= 1 { state.lastReap = now } }
                return now - state.lastReap >= 1
            }) {
                // Workers whose lock's session is gone (killed, machine lost and noticed), or
                // silent past their lease, are lost now: their files go to the others.
                _ = try journal.query("""
                    UPDATE hoist_worker w SET status = 'lost', finished = \(now)
                    WHERE run_id = \(runID) AND status = 'running' AND worker <> \(worker) AND \(unescaped: Self.workerLost)
                    """)
            }
            let rows = try journal.query("""
                WITH live AS (
                    SELECT worker FROM hoist_worker WHERE run_id = \(runID) AND status = 'running'
                      AND heartbeat >= extract(epoch from clock_timestamp()) - lease),
                taken AS (
                    SELECT job, source, destination, worker AS previous FROM hoist_file
                    WHERE job = \(journal.job) AND run_id = \(runID) AND state IN ('pending', 'uploading')
                      -- Unclaimed, or held by a worker that is not a live one of this run.
                      AND (worker IS NULL OR worker NOT IN (SELECT worker FROM live))
                    -- The queue's index order (a walk's), so the scan starts at the first unfinished row.
                    ORDER BY job, run_id, source, destination LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                UPDATE hoist_file f SET worker = \(worker)
                FROM taken WHERE f.job = taken.job AND f.source = taken.source AND f.destination = taken.destination
                RETURNING f.source, f.destination, f.size, f.mtime, f.attributes, f.session, f.file_set, f.relative_path,
                          taken.previous IS NOT NULL OR f.state = 'uploading'
                """)
            var files: [Journal.ClaimedFile] = []
            for row in rows {
                let (source, destination, size, mtime, attributes, session, set, relative, takenOver)
                    = try row.decode((String, String, Int64, Double, String, String?, Int32?, String?, Bool).self)
                files.append(Journal.ClaimedFile(source: source, destination: destination, size: size, mtime: mtime,
                                                 attributes: attributes, session: session, fileSetIndex: Int(set ?? 0),
                                                 relativePath: relative ?? source, takenOver: takenOver))
            }
            // In walk order, as the plan went (RETURNING keeps no order).
            files.sort { ($0.source, $0.destination) < ($1.source, $1.destination) }
            if !files.isEmpty { return .files(files) }
            let left = try journal.query(journal.unfinishedCount(runID)).first?.decode(Int64.self) ?? 0
            return left == 0 ? .finished : .wait
        } catch {
            throw JournalError(postgres: journal.target, doing: "claim files from", error)
        }
    }

    /// Takes a claimed file out of the run's queue: a `before_upload` hook or no-clobber skipped
    /// it, or a hook sent it elsewhere (its row under the new destination is the one recorded).
    func release(source: String, destination: String) throws {
        do {
            _ = try journal.query("""
                DELETE FROM hoist_file WHERE job = \(journal.job) AND source = \(source) AND destination = \(destination)
                  AND run_id = \(runID) AND state = 'pending' AND worker = \(worker)
                """)
        } catch {
            throw JournalError(postgres: journal.target, doing: "write", error)
        }
    }

    /// Unfinished rows of the run that name this worker (at most `limit`), by key.
    func heldRows(limit: Int = 100) throws -> [(source: String, destination: String)] {
        do {
            return try journal.query("""
                SELECT source, destination FROM hoist_file
                WHERE job = \(journal.job) AND run_id = \(runID) AND worker = \(worker) AND state IN ('pending', 'uploading') LIMIT \(limit)
                """).map { try $0.decode((String, String).self) }.map { (source: $0.0, destination: $0.1) }
        } catch {
            throw JournalError(postgres: journal.target, doing: "claim files from", error)
        }
    }

    /// Puts rows this worker holds back in the queue, for any worker to claim (and judge) anew.
    func giveBack(_ rows: [(source: String, destination: String)]) throws {
        do {
            for row in rows {
                _ = try journal.query("""
                    UPDATE hoist_file SET worker = NULL
                    WHERE job = \(journal.job) AND source = \(row.source) AND destination = \(row.destination) AND run_id = \(runID)
                      AND worker = \(worker) AND state IN ('pending', 'uploading')
                    """)
            }
        } catch {
            throw JournalError(postgres: journal.target, doing: "write", error)
        }
    }

    /// Records a claimed file that failed before its upload started, so the run does not wait for it.
    func failed(source: String, destination: String, message: String) throws {
        do {
            _ = try journal.query("""
                UPDATE hoist_file SET state = 'failed', error = \(message), updated = \(Date().timeIntervalSince1970)
                WHERE job = \(journal.job) AND source = \(source) AND destination = \(destination) AND run_id = \(runID)
                  AND worker = \(worker) AND state <> 'done'
                """)
        } catch {
            throw JournalError(postgres: journal.target, doing: "write", error)
        }
    }

    // MARK: End

    /// How this worker's part of the run ended, as `finish` records it.
    public struct WorkerEnd: Sendable {
        public enum Status: String, Sendable { case done, failed, interrupted }
        public var status: Status
        public var uploaded: Int
        public var failed: Int
        public var bytes: Int64

        public init(status: Status, uploaded: Int, failed: Int, bytes: Int64) {
            (self.status, self.uploaded, self.failed, self.bytes) = (status, uploaded, failed, bytes)
        }
    }

    /// Why this worker lost its hold on the run, once it did (`onLost` was called with it).
    public var lostHold: String? { state.withLock { $0.lost } }

    /// Records this worker's end; the worker that finds the run without unfinished files ends
    /// the run with the totals of the files' rows. The files it holds and did not finish (not
    /// started, or cancelled: the recorder put those back to `pending`) go to the others.
    public func finish(_ end: WorkerEnd) throws {
        let status = end.status.rawValue
        let now = Date().timeIntervalSince1970
        do {
            try journal.transaction { run in
                _ = try run("""
                    UPDATE hoist_worker SET status = \(status), finished = \(now), uploaded = \(Int64(end.uploaded)),
                        failed = \(Int64(end.failed)), bytes = \(end.bytes)
                    WHERE run_id = \(runID) AND worker = \(worker)
                    """)
                _ = try run("""
                    UPDATE hoist_file SET worker = NULL
                    WHERE job = \(journal.job) AND run_id = \(runID) AND worker = \(worker) AND state IN ('pending', 'uploading')
                    """)
                let left = try run(journal.unfinishedCount(runID)).first?.decode(Int64.self) ?? 0
                guard left == 0 else { return }
                // The totals from the files' rows (a worker's own row may not be written yet).
                _ = try run("""
                    UPDATE hoist_run r SET finished = \(now), uploaded = t.uploaded, failed = r.failed + t.failed, bytes = t.bytes,
                        status = CASE WHEN r.failed + t.failed > 0 THEN 'failed' ELSE 'ok' END
                    FROM (SELECT count(*) FILTER (WHERE state = 'done') AS uploaded, count(*) FILTER (WHERE state = 'failed') AS failed,
                                 coalesce(sum(size) FILTER (WHERE state = 'done'), 0) AS bytes
                          FROM hoist_file WHERE job = \(journal.job) AND run_id = \(runID)) t
                    WHERE r.id = \(runID) AND r.status = 'running'
                    """)
            }
        } catch {
            throw JournalError(postgres: journal.target, doing: "record this worker's end in", error)
        }
    }

    /// Lets the job go: the heartbeat stops and the lock's connection closes.
    public func release() {
        let first = state.withLock { state in
            defer { state.released = true }
            return !state.released
        }
        guard first else { return }
        stopBeating.signal()
        try? hold.close().wait()
    }
}

/// The fence of this worker's uploads (`Storage.transferFence`): open while its last heartbeat
/// reached the journal within 60% of its lease (it beats every third) and it has not lost its
/// hold. A worker frozen (SIGSTOP, a paused VM) past that sends no byte and starts no request of
/// an upload once thawed until a heartbeat tells whether its files are still its own; the
/// others take them only once the whole lease has passed (`SharedRunFencingTests`).
extension SharedRun: TransferFence {
    public var isOpen: Bool {
        state.withLock { state in state.lost == nil && !state.released && Date().timeIntervalSince(state.lastBeat) < lease * 0.6 }
    }
}

extension Journal {
    /// A file a worker claimed from a shared run's plan.
    public struct ClaimedFile: Sendable {
        public let source: String
        public let destination: String
        public let size: Int64
        public let mtime: Double
        public let attributes: String
        /// A session left unfinished (by an earlier run, or a worker that died), to continue.
        public let session: String?
        public let fileSetIndex: Int
        public let relativePath: String
        /// Taken from a worker that died or went silent, or begun by an earlier run: it may have
        /// stored the object already.
        public let takenOver: Bool
    }
}

extension Journal {
    /// One worker of a shared run, as `hoist status` shows it.
    public struct WorkerRecord: Sendable {
        public let worker: String
        public let host: String
        public let pid: Int32
        /// running, done, interrupted, failed, or lost (died, or went silent past its lease).
        public let status: String
        public let started: Double
        /// Now while it runs, else its end.
        public let last: Double
        /// Files done and failed, and bytes done, by the journal's rows this worker holds.
        public let uploaded: Int
        public let failed: Int
        public let bytes: Int64
        /// Files it holds now: claimed or in flight.
        public let holding: Int
    }

    /// The newest shared run of a job: its workers and the files not yet finished.
    public struct SharedRunStatus: Sendable {
        public let runID: String
        public let status: RunStatus
        public let planned: Bool
        public let pending: Int
        public let workers: [WorkerRecord]
    }
}
