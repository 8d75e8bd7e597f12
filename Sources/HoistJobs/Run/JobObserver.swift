import Foundation
import HoistStorage

/// Hears what a job does. Per-file events arrive on the storage's serial callback queue, in
/// the order they happened; the others on the runner's task.
public protocol JobObserver: Sendable {
    /// The run starts. `files` and `bytes` (to upload) are nil while they are being counted: a
    /// run walks the tree once, uploading as it goes, and `planCounted` tells them at the end of the walk.
    func jobStarted(_ job: Job, files: Int?, bytes: Int64?)
    /// The walk is over: the run uploads this many files and bytes in all (unless it stops early).
    func planCounted(files: Int, bytes: Int64)
    /// True for an observer that shows the totals while the run goes (a progress line, an event
    /// log; default: false): only then are they counted ahead of the walk, by a second walk
    /// (`CountAhead`), which a run that no one watches (cron) does not pay for.
    var wantsTotalsEarly: Bool { get }
    func fileSkipped(_ item: PlanItem, reason: String)
    /// A file failed before any upload of it started (a name that cannot be an object, a folder
    /// that cannot be listed, a hook's error, a file swapped for a link): it has no task events.
    func fileFailed(path: String, destination: String, size: Int64, message: String)
    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot)
    /// A file renamed within its root (`hoist watch`) was stored by a copy on the server of the
    /// object its earlier name was stored as (`source`), no byte sent: the copy's description.
    /// On the callback queue, or in place for an observer that hears file events so.
    func fileCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource)
    /// The statuses whose `fileEvent`s this observer acts on (default: all). The runner asks an
    /// upload only for the events some observer wants: an event no one hears is never handed to
    /// the callback queue (a thread hand-off per event and file).
    var fileEventStatuses: Set<StorageTaskStatus> { get }
    /// True for an observer whose `fileEvent` is thread-safe and quick (default: false): it hears
    /// its events on the upload's own thread as they happen, not on the callback queue, so they
    /// cost no thread hand-off and no upload waits for the queue before storing its object. The
    /// events of one file come in order, but may come at the same time as another file's.
    var hearsFileEventsInPlace: Bool { get }
    /// Something the walk left out on purpose but that a user should know of (links not
    /// followed, a link whose target is gone, a link loop): not a failure.
    func walkWarning(path: String, message: String)
    /// A `mirror` deletion was tried (after every upload of the run succeeded): its outcome.
    func objectDeleted(_ deletion: Deletion, _ outcome: DeletionOutcome)
    /// `move` removed a file (`evidence`: `uploaded` by this run, or its object `verified` now).
    func fileRemoved(_ item: PlanItem, evidence: String)
    /// `removeEmptyFolders` removed a folder a move emptied (its path).
    func folderRemoved(_ path: String)
    /// An unfinished upload of the job's was ended (`evidence`: `replaced`, its file changed
    /// since an earlier run began it; `stale`, over a day old, recorded in the journal).
    func uploadAborted(object: String, evidence: String)
    func jobFinished(_ summary: JobSummary)
}

extension JobObserver {
    public var fileEventStatuses: Set<StorageTaskStatus> { [.resume, .progress, .pause, .success, .failure] }
    public var hearsFileEventsInPlace: Bool { false }
    public func planCounted(files: Int, bytes: Int64) {}
    public var wantsTotalsEarly: Bool { false }
    public func fileFailed(path: String, destination: String, size: Int64, message: String) {}
    public func walkWarning(path: String, message: String) {}
    public func fileCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource) {}
    public func objectDeleted(_ deletion: Deletion, _ outcome: DeletionOutcome) {}
    public func fileRemoved(_ item: PlanItem, evidence: String) {}
    public func folderRemoved(_ path: String) {}
    public func uploadAborted(object: String, evidence: String) {}
}

/// How a run ended.
public struct JobSummary: Sendable {
    public struct Failure: Sendable {
        public let file: String
        public let destination: String
        public let code: StorageErrorCode
        public let message: String
    }

    public let job: String
    public var uploaded = 0
    public var failed = 0
    public var cancelled = 0
    /// Files not uploaded on purpose: `unchanged` + `vetoed` + those the manifest's filters left out.
    public var skipped = 0
    /// Skipped as unchanged since their last upload (the journal).
    public var unchanged = 0
    /// Skipped by a `before_upload` hook.
    public var vetoed = 0
    /// Skipped because the object exists (`upload.noClobber`).
    public var existing = 0
    /// Bytes sent (a file stored by a copy on the server sends none).
    public var bytes: Int64 = 0
    /// Files renamed within a root stored by a copy on the server of their earlier name's object (`hoist watch`).
    public var copied = 0
    /// Objects `mirror` deleted.
    public var deleted = 0
    /// Objects `mirror` left: replaced by another writer since, or kept by `before_delete`.
    public var deleteKept = 0
    /// Deletions `upload.maxDelete` (or the default limit) refused: none of them happened, and
    /// the run exits 1.
    public var deleteRefused = 0
    /// Why they were refused.
    public var deleteRefusal: String?
    /// Files `move` removed once their objects were stored.
    public var moved = 0
    public var seconds: Double = 0
    /// Stopped by a signal or `cancelAll()`.
    public var interrupted = false
    /// The first failures (at most 100), for the report.
    public var failures: [Failure] = []
    /// Why the whole job stopped, when no further file could succeed (credentials refused, the
    /// bucket gone, the journal not writable): the run exits 2.
    public var fatal: String?

    public init(job: String) { self.job = job }

    /// Whether the run did all it was asked: nothing failed, no deletion was refused, not
    /// interrupted, not stopped.
    public var succeeded: Bool { failed == 0 && deleteRefused == 0 && !interrupted && fatal == nil }

    /// `photos: 12 uploaded (3.4 MiB), 5 unchanged, 3 not included, 1 vetoed by a hook, 1 failed in 1.2 s`
    /// ("not included": left out by `include`, `exclude`, sizes or age).
    public var line: String {
        var parts = ["\(uploaded) uploaded (\(ByteFormatter.string(bytes)))"]
        if copied > 0 { parts.append("\(copied) copied on the server (renamed)") }
        if unchanged > 0 { parts.append("\(unchanged) unchanged") }
        if skipped - unchanged - vetoed - existing > 0 { parts.append("\(skipped - unchanged - vetoed - existing) not included") }
        if vetoed > 0 { parts.append("\(vetoed) vetoed by a hook") }
        if existing > 0 { parts.append("\(existing) already in the bucket") }
        if deleted > 0 { parts.append("\(deleted) deleted") }
        if deleteKept > 0 { parts.append("\(deleteKept) kept from deletion") }
        if deleteRefused > 0 { parts.append("\(deleteRefused) deletion\(deleteRefused == 1 ? "" : "s") refused by maxDelete") }
        if moved > 0 { parts.append("\(moved) moved") }
        if failed > 0 { parts.append("\(failed) failed") }
        if cancelled > 0 { parts.append("\(cancelled) cancelled") }
        return "\(job): " + parts.joined(separator: ", ") + String(format: " in %.1f s", seconds) + (interrupted ? " (interrupted)" : "")
    }
}

/// Byte counts for people: `3.4 MiB`.
public enum ByteFormatter {
    public static func string(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}
