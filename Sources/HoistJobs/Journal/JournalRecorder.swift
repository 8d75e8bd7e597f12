import Foundation
import HoistStorage
import Synchronization

/// Writes a run into its journal: the run's row at start and end; for each file, `uploading`
/// when it starts, its session and confirmed offset as bytes move (at most once a second), and
/// `done` with the server's checksums and generation only once the object is stored and its
/// checksums matched (a backend verifies them before reporting success).
final class JournalRecorder: JobObserver {
    let journal: Journal
    private let runID = UUID().uuidString.lowercased()
    private struct State {
        var run: Journal.RunRecord?
        var lastSaved: [String: Date] = [:]
        var failure: JournalError?
    }
    private let state = Mutex(State())

    /// The first write that failed; the runner stops the job on it.
    var failure: JournalError? { state.withLock { $0.failure } }

    private func attempt(_ write: () throws -> Void) {
        do {
            try write()
        } catch {
            let failure = error as? JournalError ?? JournalError(message: "cannot write the journal \(journal.path): \(error)")
            state.withLock { if $0.failure == nil { $0.failure = failure } }
        }
    }

    init(journal: Journal) { self.journal = journal }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {
        let run = Journal.RunRecord(id: runID, job: job.manifest.name, started: Date().timeIntervalSince1970, finished: nil,
                                    uploaded: 0, skipped: 0, failed: 0, cancelled: 0, bytes: 0, status: "running",
                                    pid: getpid(), error: nil)
        state.withLock { $0.run = run }
        attempt { try journal.save(run) }
    }

    func fileSkipped(_ item: PlanItem, reason: String) {}

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let key = item.file.path + "\n" + item.destination
        let task = snapshot.task as? StorageUploadTask
        switch snapshot.status {
        case .resume:
            let isNew = state.withLock { $0.lastSaved[key] == nil }
            guard isNew else { return }
            state.withLock { $0.lastSaved[key] = .distantPast }
            attempt { try journal.save(record(item, state: "uploading", session: task?.sessionID ?? item.resumeSession)) }
        case .progress:
            let now = Date()
            let due = state.withLock { state -> Bool in
                guard let last = state.lastSaved[key], now.timeIntervalSince(last) >= 1 else { return false }
                state.lastSaved[key] = now
                return true
            }
            guard due, let session = task?.sessionID else { return }
            attempt {
                try journal.saveProgress(source: item.file.path, destination: item.destination, session: session,
                                         offset: snapshot.progress?.completedUnitCount ?? 0)
            }
        case .success:
            state.withLock { _ = $0.lastSaved.removeValue(forKey: key) }
            var done = record(item, state: "done", session: nil)
            done.confirmedOffset = snapshot.metadata?.size ?? item.file.size
            done.md5Hash = snapshot.metadata?.md5Hash
            done.crc32c = snapshot.metadata?.resource.crc32c
            done.generation = snapshot.metadata?.generation
            attempt { try journal.save(done) }
        case .failure:
            state.withLock { _ = $0.lastSaved.removeValue(forKey: key) }
            var failed = record(item, state: "failed", session: nil)
            failed.error = snapshot.error.map { "\(StorageErrorCode(of: $0).name): \($0.localizedDescription)" }
            attempt { try journal.save(failed) }
        default:
            break
        }
    }

    func jobFinished(_ summary: JobSummary) {
        guard var run = state.withLock({ $0.run }) else { return }
        run.finished = Date().timeIntervalSince1970
        run.uploaded = summary.uploaded
        run.skipped = summary.skipped
        run.failed = summary.failed
        run.cancelled = summary.cancelled
        run.bytes = summary.bytes
        run.status = summary.interrupted ? "interrupted" : (summary.failed > 0 || summary.fatal != nil ? "failed" : "ok")
        run.error = summary.fatal
        attempt { try journal.save(run) }
    }

    private func record(_ item: PlanItem, state: String, session: String?) -> Journal.FileRecord {
        Journal.FileRecord(source: item.file.path, destination: item.destination, size: item.file.size,
                           mtime: item.file.modified.timeIntervalSince1970, attributes: Journal.attributesText(item.attributes),
                           state: state, session: session, confirmedOffset: 0, md5Hash: nil, crc32c: nil, generation: nil,
                           error: nil, runID: runID, updated: Date().timeIntervalSince1970)
    }
}
