import Foundation
import Glibc
import HoistHTTP
import HoistStorage
import Synchronization

/// What a running watcher says of itself in a small file beside its journal (`JOURNAL.watch`),
/// for `hoist status` and for a run that finds the job locked: its process, since when it
/// watches, how many files wait to settle, its last upload and its last error.
///
/// Written by the watcher (atomically: a new file renamed over the old), read by others as
/// hostile input: a regular file of at most `maxBytes`, JSON whose every field is checked by
/// type and range (an allow-list: unknown fields are ignored), text made one printable line.
/// It proves nothing by itself: a reader believes it only for the process the job's lock names.
public struct WatchState: Sendable, Equatable {
    public var pid: Int32
    /// When the watcher started (seconds since 1970).
    public var since: Double
    /// Files touched and waiting to settle.
    public var queue = 0
    /// When the oldest of them was first touched (seconds since 1970), if any.
    public var oldestUnsettled: Double?
    public var lastUpload: String?
    public var lastUploadAt: Double?
    public var lastError: String?
    public var lastErrorAt: Double?

    public init(pid: Int32, since: Double) {
        self.pid = pid
        self.since = since
    }

    /// The most a state file may hold: more is not a watcher's.
    static let maxBytes = 16 << 10
    /// The most of a file name or error kept (what is longer is cut, as `printable` cuts it).
    static let textLimit = 500

    /// Where a watcher of the journal at `journal` keeps its state; nil for a journal that is no
    /// file (PostgreSQL keeps it in its database: `JournalStore.recordWatchState`).
    public static func path(journal: String) -> String? {
        PostgresLocation.isPostgres(journal) ? nil : journal + ".watch"
    }

    /// The state a live watcher holds the job with: the file at `path`, when it reads as a
    /// state and names `holder` (the process the lock file names), which is alive.
    public static func ofHolder(_ holder: String, at path: String) -> WatchState? {
        guard let state = read(path), "\(state.pid)" == holder, kill(state.pid, 0) == 0 || errno == EPERM else { return nil }
        return state
    }

    /// Reads a state file (numbers as `NSNumber`s, which on Linux a JSON `true` is too: one
    /// read as 1 names no process the lock file names); nil for anything that is not one (missing, not a regular file, too
    /// large, not the JSON object a watcher writes).
    public static func read(_ path: String) -> WatchState? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= maxBytes,
              let data = try? handle.read(upToCount: maxBytes + 1) else { return nil }
        return parse(data)
    }

    /// A state as a watcher writes it (`json`), read as hostile input (from a file, or a
    /// journal's database): nil for anything that is not one (too large, not the JSON object,
    /// no process or time in range).
    public static func parse(_ data: Data) -> WatchState? {
        guard data.count <= maxBytes, let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        func time(_ key: String) -> Double? {
            guard let value = object[key] as? NSNumber, value.doubleValue.isFinite,
                  value.doubleValue >= 0, value.doubleValue < 1e11 else { return nil }
            return value.doubleValue
        }
        func text(_ key: String) -> String? {
            (object[key] as? String).map { printable($0, limit: textLimit) }
        }
        guard let pid = object["pid"] as? NSNumber, pid.int64Value > 0, pid.int64Value <= Int64(Int32.max),
              pid.doubleValue == Double(pid.int64Value), let since = time("since") else { return nil }
        var state = WatchState(pid: Int32(pid.int64Value), since: since)
        if let queue = object["queue"] as? NSNumber, queue.int64Value >= 0, queue.int64Value <= Int64(Int32.max) {
            state.queue = Int(queue.int64Value)
        }
        state.oldestUnsettled = time("oldestUnsettled")
        state.lastUpload = text("lastUpload")
        state.lastUploadAt = time("lastUploadAt")
        state.lastError = text("lastError")
        state.lastErrorAt = time("lastErrorAt")
        return state
    }

    var json: Data {
        var object: [String: Any] = ["pid": Int(pid), "since": since, "queue": queue]
        object["oldestUnsettled"] = oldestUnsettled
        object["lastUpload"] = lastUpload
        object["lastUploadAt"] = lastUploadAt
        object["lastError"] = lastError
        object["lastErrorAt"] = lastErrorAt
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    /// The temporary file a state is written to before it is renamed into place.
    static func temporary(_ path: String) -> String { path + ".tmp" }

    /// Writes the state to `path`, readable by its owner only, through a new file renamed over
    /// the old (a link planted at either name is never followed). Errors are ignored: the state
    /// is for people, and the watcher goes on without it.
    func write(to path: String) {
        let temporary = Self.temporary(path)
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        guard (try? handle.write(contentsOf: json)) != nil, rename(temporary, path) == 0 else {
            unlink(temporary)
            return
        }
    }
}

/// Hears a watcher's passes for its state: the last file uploaded and the last failure.
final class WatchStateObserver: JobObserver {
    struct Last {
        var upload: (file: String, at: Double)?
        var error: (message: String, at: Double)?
    }
    let last = Mutex(Last())

    var fileEventStatuses: Set<StorageTaskStatus> { [.success, .failure] }
    var hearsFileEventsInPlace: Bool { true }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
    func fileSkipped(_ item: PlanItem, reason: String) {}
    func jobFinished(_ summary: JobSummary) {
        if let fatal = summary.fatal { failed(fatal) }
    }

    func fileFailed(path: String, destination: String, size: Int64, message: String) {
        failed("\(path): \(message)")
    }

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let now = Date().timeIntervalSince1970
        switch snapshot.status {
        case .success: last.withLock { $0.upload = (item.file.path, now) }
        case .failure where snapshot.failure?.code != .cancelled:
            failed("\(item.file.path): \(snapshot.failure?.message ?? "failed")")
        default: break
        }
    }

    private func failed(_ message: String) {
        let now = Date().timeIntervalSince1970
        last.withLock { $0.error = (message, now) }
    }
}
