import Foundation
import PostgresNIO

/// The PostgreSQL queries of a shared run (`SharedRun`): what it asks of the journal's tables.
extension PostgresJournal {
    /// Marks this job's runs still `running` as `interrupted` when no session holds their lock
    /// any more (each held it while it ran, so none of those is alive); `except`, the
    /// caller's own session.
    func markDeadRunsInterrupted(except backend: Int32) -> PostgresQuery {
        """
        UPDATE hoist_run SET status = 'interrupted', finished = COALESCE(finished, \(Date().timeIntervalSince1970))
        WHERE job = \(job) AND status = 'running' AND NOT EXISTS (
            SELECT 1 FROM pg_locks l WHERE l.pid <> \(backend) AND \(unescaped: Self.grantedAdvisoryKey) = hoist_run.lock_key)
        """
    }

    /// SQL: a granted advisory lock `l` (a row of `pg_locks`) taken with one bigint key, then
    /// that key, to compare with `= KEY`.
    static let grantedAdvisoryKey = "l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint)"

    /// How many files of the run `runID` are not finished (pending or in flight).
    func unfinishedCount(_ runID: String) -> PostgresQuery {
        "SELECT count(*) FROM hoist_file WHERE job = \(job) AND run_id = \(runID) AND state IN ('pending', 'uploading')"
    }
}

extension PostgresJournal {
    /// The newest shared run of the job (`hoist run --worker`), or nil when it never had one.
    public func sharedRunStatus() throws -> Journal.SharedRunStatus? {
        do {
            guard let (runID, status, planned) = try query("""
                SELECT id, status, planned FROM hoist_run WHERE job = \(job) AND shared ORDER BY started DESC LIMIT 1
                """).first.map({ try $0.decode((String, String, Bool).self) }) else { return nil }
            let pending = try query(unfinishedCount(runID)).first?.decode(Int64.self) ?? 0
            // Files and bytes from the rows each worker holds (a worker's own totals are written
            // only at its end); a running worker whose lock's session is gone, or silent past its
            // lease, is shown lost (the others mark it so at their next claim).
            let workers = try query("""
                SELECT w.worker, w.host, w.pid,
                       CASE WHEN w.status = 'running' AND \(unescaped: SharedRun.workerLost) THEN 'lost' ELSE w.status END,
                       w.started, CASE WHEN w.status = 'running' THEN extract(epoch from clock_timestamp()) ELSE w.finished END,
                       coalesce(f.uploaded, 0), coalesce(f.failed, 0), coalesce(f.bytes, 0), coalesce(f.holding, 0)
                FROM hoist_worker w LEFT JOIN (
                    SELECT worker, count(*) FILTER (WHERE state = 'done') AS uploaded, count(*) FILTER (WHERE state = 'failed') AS failed,
                           coalesce(sum(size) FILTER (WHERE state = 'done'), 0)::bigint AS bytes,
                           count(*) FILTER (WHERE state IN ('pending', 'uploading')) AS holding
                    FROM hoist_file WHERE job = \(job) AND run_id = \(runID) AND worker IS NOT NULL GROUP BY worker) f
                  ON f.worker = w.worker
                WHERE w.run_id = \(runID) ORDER BY w.started, w.worker
                """).map { row in
                let (worker, host, pid, status, started, last, uploaded, failed, bytes, holding)
                    = try row.decode((String, String, Int32, String, Double, Double?, Int64, Int64, Int64, Int64).self)
                return Journal.WorkerRecord(worker: worker, host: host, pid: pid, status: status, started: started, last: last ?? started,
                                            uploaded: Int(uploaded), failed: Int(failed), bytes: bytes, holding: Int(holding))
            }
            return Journal.SharedRunStatus(runID: runID, status: Journal.RunStatus(rawValue: status) ?? .failed, planned: planned,
                                           pending: Int(pending), workers: workers)
        } catch {
            throw JournalError(postgres: target, doing: "read", error)
        }
    }
}
