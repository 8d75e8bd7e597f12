import Foundation
import HoistStorage
import Synchronization

/// Writes a run into its journal: the run's row at start and end; for each file, `uploading`
/// when it starts, its session and confirmed offset as bytes move (at most once a second), and
/// `done` with the server's checksums and generation only once the object is stored and its
/// checksums matched (a backend verifies them before reporting success).
///
/// Writes are batched: one transaction per 1,000 writes or 100 ms, on a queue of its own. A
/// batch holding `done` rows first makes the stored objects durable (`persist`, the backend's
/// `persist()`: one `syncfs` for a local bucket), so no row says done before its bytes are on
/// stable storage, and that costs once per batch rather than fsyncs per file. Within a batch a
/// file's writes fold into its row: a small file's `uploading` row, its session and its `done`
/// row are one statement, not three (the batch commits as one, so the journal ends the same).
final class JournalRecorder: JobObserver {
    let journal: any JournalStore
    private let runID: String
    private let persist: @Sendable () throws -> Void
    /// Whether the run's row is this recorder's (a shared run's is `SharedRun`'s).
    private let recordsRun: Bool
    private let writer = DispatchQueue(label: "hoist.journal")
    private struct State {
        var run: Journal.RunRecord?
        var failure: JournalError?
        var pending: [Journal.Write] = []
        var pendingDone = false
        var flushScheduled = false
        /// Where in `pending` each file's row is (by `key`): a later row of the file replaces it
        /// there, a progress write updates it.
        var pendingRows: [Bytewise: Int] = [:]
        /// Run once the writes recorded before them are committed (`whenCommitted`).
        var afterCommit: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())
    /// A file's session and confirmed offset are saved at most once a second.
    private let pacer = ProgressPacer(interval: 1)
    static let batchSize = 1000
    static let batchDelay = 0.1

    /// The first write that failed; the runner stops the job on it.
    var failure: JournalError? { state.withLock { $0.failure } }

    init(journal: any JournalStore, runID: String, persist: @escaping @Sendable () throws -> Void = {}, recordsRun: Bool = true) {
        self.journal = journal
        self.runID = runID
        self.persist = persist
        self.recordsRun = recordsRun
    }

    /// - Parameter key: the file's key, for a file's write: folded into its pending row if it has one.
    private func record(_ write: Journal.Write, done: Bool = false, key: String? = nil) {
        let (now, later) = state.withLock { state -> (Bool, Bool) in
            state.pendingDone = state.pendingDone || done
            // The row is pending, so a flush is already on its way.
            if let key, let index = state.pendingRows[Bytewise(key)], case .file(var row) = state.pending[index] {
                switch write {
                case .file:
                    state.pending[index] = write
                    return (false, false)
                case .progress(_, _, let session, let offset):
                    (row.session, row.confirmedOffset, row.updated) = (session, offset, Date().timeIntervalSince1970)
                    state.pending[index] = .file(row)
                    return (false, false)
                case .run, .content:
                    break
                }
            }
            if let key, case .file = write { state.pendingRows[Bytewise(key)] = state.pending.count }
            state.pending.append(write)
            if state.pending.count >= Self.batchSize { return (true, false) }
            if state.flushScheduled { return (false, false) }
            state.flushScheduled = true
            return (false, true)
        }
        if now { writer.async { self.flush() } }
        if later { writer.asyncAfter(deadline: .now() + Self.batchDelay) { self.flush() } }
    }

    /// Runs `action` (on the writer's queue) once every write recorded so far is committed:
    /// a file's `done` row, for `move`. Never when a batch failed: then nothing is known durable.
    func whenCommitted(_ action: @escaping @Sendable () -> Void) {
        let schedule = state.withLock { state -> Bool in
            state.afterCommit.append(action)
            if state.flushScheduled { return false }
            state.flushScheduled = true
            return true
        }
        if schedule { writer.asyncAfter(deadline: .now() + Self.batchDelay) { self.flush() } }
    }

    /// Commits what is pending now, and runs what waited for it.
    func commitNow() { writer.sync { flush() } }

    /// Commits what is pending (on the writer queue).
    private func flush() {
        let (writes, done, actions) = state.withLock { state -> ([Journal.Write], Bool, [@Sendable () -> Void]) in
            defer {
                state.pending.removeAll(keepingCapacity: true)
                state.pendingRows.removeAll(keepingCapacity: true)
                state.pendingDone = false
                state.flushScheduled = false
                state.afterCommit.removeAll()
            }
            return (state.pending, state.pendingDone, state.afterCommit)
        }
        if !writes.isEmpty {
            do {
                if done { try persist() }
                try journal.apply(writes)
            } catch {
                let failure = error as? JournalError ?? JournalError(message: "cannot record finished uploads in \(journal.location): \(error)")
                state.withLock { if $0.failure == nil { $0.failure = failure } }
            }
        }
        guard state.withLock({ $0.failure == nil }) else { return }
        for action in actions { action() }
    }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {
        let run = Journal.RunRecord(id: runID, job: job.manifest.name, started: Date().timeIntervalSince1970, finished: nil,
                                    uploaded: 0, skipped: 0, failed: 0, cancelled: 0, bytes: 0, status: .running,
                                    pid: getpid(), error: nil)
        guard recordsRun else { return }
        state.withLock { $0.run = run }
        record(.run(run))
    }

    /// A file `skipUnchanged: checksum` read and found unchanged keeps its hash under its new
    /// status, so the next run need not read it.
    func fileSkipped(_ item: PlanItem, reason: String) {
        guard let hash = item.rehashed else { return }
        record(.content(source: item.file.path, destination: item.destination, mtime: item.file.modified.timeIntervalSince1970,
                        content: hash.text))
    }

    /// Set once the run stops starting files: uploads cancelled from then on are pending, not failed.
    private let stopping = Atomic<Bool>(false)
    func runIsStopping() { stopping.store(true, ordering: .relaxed) }

    /// A file that failed before its upload started (a hook's error, a name that cannot be an
    /// object) is a failed row too, so `hoist status` counts what the run counted. One the walk
    /// could not name an object for has no row to be.
    func fileFailed(path: String, destination: String, size: Int64, message: String) {
        guard !destination.isEmpty else { return }
        let failed = Journal.FileRecord(source: path, destination: destination, size: size, mtime: 0, attributes: "{}", state: .failed,
                                        session: nil, confirmedOffset: 0, md5Hash: nil, crc32c: nil, generation: nil,
                                        error: message, runID: runID, updated: Date().timeIntervalSince1970)
        record(.file(failed), key: path + "\n" + destination)
    }

    /// Not `.pause`: a paused file's row stays as it is.
    var fileEventStatuses: Set<StorageTaskStatus> { [.resume, .progress, .success, .failure] }
    /// Its writes go to a locked batch: safe from any thread, and quick.
    var hearsFileEventsInPlace: Bool { true }

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let key = item.file.path + "\n" + item.destination
        let task = snapshot.task as? StorageUploadTask
        switch snapshot.status {
        case .resume:
            // The row of a file in flight (once bytes moved, a resume after a pause writes nothing).
            guard !pacer.started(key) else { return }
            record(.file(row(item, state: .uploading, session: task?.sessionID ?? item.resumeSession)), key: key)
        case .progress:
            // The first progress saves the session at once (it is known only once the upload started).
            guard pacer.admit(key, final: false), let session = task?.sessionID else { return }
            record(.progress(source: item.file.path, destination: item.destination, session: session,
                             offset: snapshot.completed), key: key)
        case .success:
            pacer.finished(key)
            recordDone(item, snapshot.metadata?.resource, key: key)
        case .failure:
            pacer.finished(key)
            if snapshot.failure?.code == .cancelled, !recordsRun || stopping.load(ordering: .relaxed) {
                // Cancelled because the run stops (Ctrl-C, a fatal error, failFast): pending, as
                // the run counts it (cancelled, not failed; a hook's own cancel is a failure in
                // both). A shared run's file goes back to the queue, for the other workers once
                // this one has ended. A checkpointed upload keeps its session for the next process.
                record(.file(row(item, state: .pending, session: task?.keptSession)), key: key)
                return
            }
            var failed = row(item, state: .failed, session: nil)
            failed.error = snapshot.failure.map { "\($0.code.name): \($0.message)" }
            record(.file(failed), key: key)
        default:
            break
        }
    }

    /// A renamed file stored by a copy on the server (`JobRunner.copyRenamed`): done, as an upload's.
    func fileCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource) {
        recordDone(item, copied, key: item.file.path + "\n" + item.destination)
    }

    /// The `done` row of `item`'s file, stored as `stored` describes it (the backend verified
    /// its checksums against the file's bytes, or a copy's against its source's).
    private func recordDone(_ item: PlanItem, _ stored: ObjectResource?, key: String) {
        var done = row(item, state: .done, session: nil)
        done.confirmedOffset = stored.map { $0.size ?? 0 } ?? item.file.size
        done.md5Hash = stored?.md5Hash
        done.crc32c = stored?.crc32c
        done.generation = stored.map { $0.generation ?? 0 }
        // The content's hash for `skipUnchanged: checksum`: a compressed file's from its
        // compression, else the object's, which the backend verified against the file's.
        if let crc = item.contentCRC32C ?? (item.compression == nil ? done.crc32c : nil) {
            done.content = Journal.ContentHash(crc32c: crc, status: item.file.statusKey).text
        }
        record(.file(done), done: true, key: key)
    }

    /// A session another process can continue just started, before its first byte: its id is
    /// written and committed now (one transaction per large file), so a process killed from here
    /// on leaves the session in the journal, and whoever takes the file (the next run, a shared
    /// run's other worker) continues it from the server's offset instead of starting anew.
    func sessionStarted(_ item: PlanItem, session: String) async {
        record(.progress(source: item.file.path, destination: item.destination, session: session, offset: 0),
               key: item.file.path + "\n" + item.destination)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            writer.async {
                self.flush()
                done.resume()
            }
        }
    }

    func jobFinished(_ summary: JobSummary) {
        guard var run = state.withLock({ $0.run }) else {
            writer.sync { flush() }
            return
        }
        run.finished = Date().timeIntervalSince1970
        run.uploaded = summary.uploaded
        run.skipped = summary.skipped
        run.failed = summary.failed
        run.cancelled = summary.cancelled
        run.bytes = summary.bytes
        run.status = summary.interrupted ? .interrupted : (summary.succeeded ? .ok : .failed)
        run.error = summary.fatal
            ?? (summary.deleteRefused > 0 ? "\(summary.deleteRefused) deletion\(summary.deleteRefused == 1 ? "" : "s") refused by maxDelete" : nil)
        record(.run(run))
        writer.sync { flush() }
    }

    /// The last attributes written and their text: the files of a file set share theirs, and
    /// encoding them is JSONEncoder's work.
    private let lastAttributes = Mutex<(ObjectResource, Bool, String)?>(nil)

    private func attributesText(_ item: PlanItem) -> String {
        let compressed = item.compression != nil
        if let (last, wasCompressed, text) = lastAttributes.withLock({ $0 }), last == item.attributes, wasCompressed == compressed { return text }
        let text = item.attributesText
        lastAttributes.withLock { $0 = (item.attributes, compressed, text) }
        return text
    }

    private func row(_ item: PlanItem, state: Journal.FileState, session: String?) -> Journal.FileRecord {
        Journal.FileRecord(source: item.file.path, destination: item.destination, size: item.file.size,
                           mtime: item.file.modified.timeIntervalSince1970, attributes: attributesText(item),
                           state: state, session: session, confirmedOffset: 0, md5Hash: nil, crc32c: nil, generation: nil,
                           error: nil, runID: runID, updated: Date().timeIntervalSince1970)
    }
}
