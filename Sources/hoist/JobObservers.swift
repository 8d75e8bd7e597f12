import Foundation
import HoistJobs
import HoistStorage
import Synchronization

/// Every job event as one JSON line, to standard output or appended to a file.
final class JSONEventLog: JobRetryObserver {
    private let handle: FileHandle
    private let pacer = ProgressPacer(interval: 0.5)

    enum Sink { case standardOutput }

    init(sink: Sink) { handle = .standardOutput }

    /// Opens `path` to append, creating it; never through a symbolic link at its name, and
    /// only a regular file (a link planted there by another user would have root append to
    /// whatever it names).
    init?(appendingTo path: String) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            return nil
        }
        handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    private func emit(_ fields: [String: any Sendable]) {
        var line = Data(JSONLine.encode(fields.merging(["time": RFC3339Now()]) { a, _ in a }).utf8)
        line.append(10)
        handle.write(line)
    }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {
        var fields: [String: any Sendable] = ["event": "job_start", "job": job.manifest.name, "storage": job.manifest.storage.url]
        if let files, let bytes {
            fields["files"] = files
            fields["bytes"] = bytes
        }
        emit(fields)
    }

    func planCounted(files: Int, bytes: Int64) {
        emit(["event": "plan_counted", "files": files, "bytes": bytes])
    }

    var wantsTotalsEarly: Bool { true }

    func fileSkipped(_ item: PlanItem, reason: String) {
        var fields: [String: any Sendable] = ["event": "skip", "file": item.file.path, "reason": reason]
        if !item.destination.isEmpty { fields["object"] = item.destination }
        emit(fields)
    }

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let completed = snapshot.completed
        let total = snapshot.total
        var fields: [String: any Sendable] = ["file": item.file.path, "object": item.destination, "completed": completed, "total": total]
        fields["event"] = snapshot.status.name
        switch snapshot.status {
        case .resume:
            // Where the server stands is known only once it is asked: the first progress tells.
            if item.resumeSession != nil, completed == 0 { fields["continuing"] = true }
        case .pause: break
        case .progress:
            guard pacer.admit(item.destination, final: completed >= total) else { return }
        case .success:
            pacer.finished(item.destination)
            fields["size"] = snapshot.metadata?.size ?? 0
            fields["md5Hash"] = snapshot.metadata?.md5Hash ?? ""
            fields["generation"] = snapshot.metadata?.generation ?? 0
        case .failure:
            pacer.finished(item.destination)
            let failure = snapshot.failure ?? (.unknown, "")
            fields["code"] = failure.code.name
            fields["rawValue"] = failure.code.rawValue
            fields["message"] = failure.message
        case .unknown: return
        }
        emit(fields)
    }

    /// `{"event":"copy","file":...,"object":...,"from":...}`: a renamed file stored by a copy on
    /// the server of its earlier name's object.
    func fileCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource) {
        emit(["event": "copy", "file": item.file.path, "object": item.destination, "from": source, "size": copied.size ?? 0,
              "generation": copied.generation ?? 0])
    }

    /// A `failure` event for a file that failed before its upload started.
    func fileFailed(path: String, destination: String, size: Int64, message: String) {
        emit(["event": "failure", "file": path, "object": destination, "completed": 0, "total": size,
              "code": StorageErrorCode.invalidArgument.name, "rawValue": StorageErrorCode.invalidArgument.rawValue, "message": message])
    }

    func walkWarning(path: String, message: String) {
        emit(["event": "warning", "file": path, "message": message])
    }

    /// `{"event":"delete","object":...,"outcome":"deleted"}`: a mirror's deletion.
    func objectDeleted(_ deletion: Deletion, _ outcome: DeletionOutcome) {
        var fields: [String: any Sendable] = ["event": "delete", "object": deletion.object, "reason": deletion.reason,
                                              "outcome": outcome.name, "generation": deletion.generation]
        if let source = deletion.source { fields["file"] = source }
        if case .failed(let message) = outcome { fields["message"] = message }
        emit(fields)
    }

    /// `{"event":"remove","file":...,"object":...,"evidence":"uploaded"}`: a file `move` removed,
    /// and on what evidence (`uploaded` by this run, or its object `verified` now).
    func fileRemoved(_ item: PlanItem, evidence: String) {
        emit(["event": "remove", "kind": "file", "file": item.file.path, "object": item.destination, "evidence": evidence])
    }

    /// `{"event":"remove","kind":"folder","file":...,"evidence":"empty"}`: a folder a move emptied.
    func folderRemoved(_ path: String) {
        emit(["event": "remove", "kind": "folder", "file": path, "evidence": "empty"])
    }

    /// `{"event":"abort","object":...,"evidence":"stale"}`: an unfinished upload of the job's ended.
    func uploadAborted(object: String, evidence: String) {
        emit(["event": "abort", "object": object, "evidence": evidence])
    }

    /// What a run that could not start prints with `--json`: a `job_end` saying why.
    func startFailed(job: String, reason: String) {
        var summary = JobSummary(job: job)
        summary.fatal = reason
        jobFinished(summary)
    }

    /// `{"event":"retry","attempt":2,"delay":1.6,"status":503,...}`: the upload waits `delay`
    /// seconds and tries again (`status` is absent for a failure without an answer).
    func fileRetrying(_ item: PlanItem, _ retry: StorageUploadRetry) {
        var fields: [String: any Sendable] = [
            "event": "retry", "file": item.file.path, "object": item.destination, "attempt": retry.attempt,
            "delay": (retry.delay * 1000).rounded() / 1000, "completed": retry.completed, "total": item.file.size,
            "message": retry.message,
        ]
        if let code = retry.responseCode { fields["status"] = code }
        emit(fields)
    }

    func jobFinished(_ summary: JobSummary) {
        emit(["event": "job_end", "job": summary.job, "uploaded": summary.uploaded, "failed": summary.failed,
              "skipped": summary.skipped, "cancelled": summary.cancelled, "bytes": summary.bytes,
              "unchanged": summary.unchanged, "seconds": summary.seconds, "interrupted": summary.interrupted,
              "deleted": summary.deleted, "deleteRefused": summary.deleteRefused, "moved": summary.moved, "copied": summary.copied,
              "peakRSSBytes": peakResidentBytes()].merging(summary.fatal.map { ["fatal": $0] } ?? [:]) { a, _ in a }
                .merging(summary.deleteRefusal.map { ["deleteRefusal": $0] } ?? [:]) { a, _ in a })
    }
}

func RFC3339Now() -> String { Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)) }

/// A line per file as it ends (`-v`): uploaded, failed, skipped and why. Without `verbose`,
/// only failures (a terminal shows them as they happen, above the progress line).
final class FileLines: JobObserver {
    private let verbose: Bool
    private let say: @Sendable (String, Bool) -> Void

    init(verbose: Bool, say: @escaping @Sendable (String, Bool) -> Void) {
        self.verbose = verbose
        self.say = say
    }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}

    func fileSkipped(_ item: PlanItem, reason: String) {
        if verbose { say("skipped   \(item.file.relativePath) (\(reason))", false) }
    }

    func fileFailed(path: String, destination: String, size: Int64, message: String) {
        say("hoist: \(path): \(message)", true)
    }

    var fileEventStatuses: Set<StorageTaskStatus> { verbose ? [.success, .failure] : [.failure] }

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        switch snapshot.status {
        case .success:
            if verbose {
                say("uploaded  \(item.file.relativePath) -> \(item.destination) (\(ByteFormatter.string(item.file.size)))", false)
            }
        case .failure:
            let failure = snapshot.failure ?? (.unknown, "failed")
            say("hoist: \(item.file.path): \(failure.message)", true)
        default:
            return
        }
    }

    func objectDeleted(_ deletion: Deletion, _ outcome: DeletionOutcome) {
        switch outcome {
        case .failed(let message): say("hoist: \(deletion.object): mirror could not delete it: \(message)", true)
        case .deleted: if verbose { say("deleted   \(deletion.object) (\(deletion.source == nil ? "stray" : "file gone"))", false) }
        case .changed: if verbose { say("kept      \(deletion.object) (another writer replaced it)", false) }
        case .vetoed: if verbose { say("kept      \(deletion.object) (before_delete)", false) }
        case .kept: if verbose { say("kept      \(deletion.object) (its file is back)", false) }
        case .absent: break
        }
    }

    func fileCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource) {
        if verbose { say("copied    \(item.file.relativePath) -> \(item.destination) (from \(source), on the server)", false) }
    }

    func fileRemoved(_ item: PlanItem, evidence: String) {
        if verbose { say("removed   \(item.file.relativePath) (\(evidence == "uploaded" ? "uploaded" : "its object verified"))", false) }
    }

    func jobFinished(_ summary: JobSummary) {}
}

/// The walk's warnings (links not followed...), as they are found, unless `--quiet` or `--json`.
final class WarningLines: JobObserver {
    private let say: @Sendable (String) -> Void

    init(say: @escaping @Sendable (String) -> Void) { self.say = say }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
    func fileSkipped(_ item: PlanItem, reason: String) {}
    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {}
    var fileEventStatuses: Set<StorageTaskStatus> { [] }
    func walkWarning(path: String, message: String) { say("hoist: warning: \(path): \(message)") }
    func jobFinished(_ summary: JobSummary) {}
}

/// The terminal display of `hoist run`: files and bytes done of the total, rate, ETA, and the
/// files in flight, redrawn five times a second on standard error on one line that fits the
/// terminal's width (read at each redraw; `SignalHandlers` redraws at once on SIGWINCH). Log lines (`printAbove`)
/// go above it: the line is cleared, the text printed, the line drawn again. While the run is
/// paused it says PAUSED; it shows a rate (and an ETA) only when bytes moved in the last seconds.
final class ProgressDisplay: JobRetryObserver {
    private struct State {
        /// Files and bytes to upload; nil while the walk is still counting them.
        var files: Int?
        var bytes: Int64?
        var doneFiles = 0
        var doneBytes: Int64 = 0
        var inFlight: [String: Int64] = [:]
        var started = Date()
        var ticker: Task<Void, Never>?
        /// Bytes moved by a moment, the last few seconds: the rate now, not since the start.
        var samples: [(time: Date, bytes: Int64)] = []
        /// What the status line shows now ("" when none is drawn).
        var line = ""
        var finished = false
        var isPaused: (@Sendable () -> Bool)?
        /// Files waiting to try again after a transient failure: the retry and when the next try starts.
        var retrying: [String: (retry: StorageUploadRetry, next: Date)] = [:]
    }
    private let state = Mutex(State())
    /// How many columns the line may take; by default the terminal's width.
    private let columns: @Sendable () -> Int

    init(columns: @escaping @Sendable () -> Int = { terminalColumns(STDERR_FILENO) }) {
        self.columns = columns
    }

    /// Where the display learns that the run is paused (the runner is made after the display).
    func pausedBy(_ isPaused: @escaping @Sendable () -> Bool) {
        state.withLock { $0.isPaused = isPaused }
    }

    /// Prints a line above the status line (which is drawn again below it).
    func printAbove(_ text: String) {
        state.withLock { s in
            let redraw = s.finished || s.line.isEmpty ? "" : s.line
            FileHandle.standardError.write(Data("\r\u{1B}[K\(text)\n\(redraw)".utf8))
        }
    }

    func planCounted(files: Int, bytes: Int64) {
        state.withLock {
            $0.files = files
            $0.bytes = bytes
        }
    }

    var wantsTotalsEarly: Bool { true }

    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {
        let ticker = Task { [weak self] in
            while !Task.isCancelled {
                self?.draw()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        state.withLock {
            $0.files = files
            $0.bytes = bytes
            $0.started = Date()
            $0.ticker = ticker
        }
    }

    func fileSkipped(_ item: PlanItem, reason: String) {}

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        state.withLock { state in
            switch snapshot.status {
            case .success, .failure:
                state.retrying[item.file.relativePath] = nil
                state.inFlight[item.file.relativePath] = nil
                state.doneFiles += 1
                if snapshot.status == .success { state.doneBytes += item.file.size }
            default:
                let completed = snapshot.completed
                // The job's line counts the files' bytes, as its total does: a compressed file's
                // progress (of its gzip stream, whose size is known before a byte goes) is
                // scaled to its file's size, so the line only grows and ends at the total.
                state.inFlight[item.file.relativePath] = item.compression == nil || snapshot.total <= 0 ? completed
                    : min(item.file.size, Int64(Double(completed) / Double(snapshot.total) * Double(item.file.size)))
                // Bytes moving again after the wait: the retry is under way, no longer waiting.
                if let waiting = state.retrying[item.file.relativePath], Date() >= waiting.next, completed > waiting.retry.completed {
                    state.retrying[item.file.relativePath] = nil
                }
            }
        }
    }

    func fileRetrying(_ item: PlanItem, _ retry: StorageUploadRetry) {
        state.withLock { $0.retrying[item.file.relativePath] = (retry, Date().addingTimeInterval(retry.delay)) }
    }

    func jobFinished(_ summary: JobSummary) {
        state.withLock { s in
            s.ticker?.cancel()
            s.finished = true
            s.line = ""
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        }
    }

    /// Draws the status line again, cut to the terminal's width.
    func draw() {
        let width = columns()
        state.withLock { s in
            guard !s.finished else { return }
            let now = Date()
            let line = Self.statusLine(&s, now: now)
            // One column short of the width: a line that reaches the last column wraps on some terminals.
            s.line = String(line.prefix(max(1, width - 1)))
            FileHandle.standardError.write(Data("\r\u{1B}[K\(s.line)".utf8))
        }
    }

    private static func statusLine(_ s: inout State, now: Date) -> String {
        let bytes = s.doneBytes + s.inFlight.values.reduce(0, +)
        let paused = s.isPaused?() ?? false
        s.samples.append((now, bytes))
        s.samples.removeAll { now.timeIntervalSince($0.time) > 5 }
        if paused { s.samples = [(now, bytes)] }
        var rate: Double?
        if let first = s.samples.first, now.timeIntervalSince(first.time) >= 0.5, bytes > first.bytes {
            rate = Double(bytes - first.bytes) / now.timeIntervalSince(first.time)
        }
        var parts: [String] = []
        if paused { parts.append("PAUSED") }
        if let retrying = retryingPart(s.retrying, now: now) { parts.append(retrying) }
        if let files = s.files, let total = s.bytes {
            parts.append("\(s.doneFiles)/\(files) files")
            parts.append("\(ByteFormatter.string(bytes))/\(ByteFormatter.string(total))")
            if let rate {
                parts.append("\(ByteFormatter.string(Int64(rate)))/s")
                parts.append("ETA \(Int((Double(max(0, total - bytes)) / rate).rounded(.up))) s")
            }
        } else {
            parts.append("\(s.doneFiles) files")
            parts.append("\(ByteFormatter.string(bytes)) (counting...)")
            if let rate { parts.append("\(ByteFormatter.string(Int64(rate)))/s") }
        }
        let current = s.inFlight.keys.sorted().prefix(2).joined(separator: ", ")
        if !current.isEmpty { parts.append(current) }
        return parts.joined(separator: "  ")
    }
}

/// `retrying 2 (503, next in 1.6 s)` for the upload whose next try comes first (`+N more` when
/// others wait too), `retrying 2 (503)` once that try has started; nil when none is retrying.
/// A file stops retrying when it ends or its bytes move again after the wait.
func retryingPart(_ retrying: [String: (retry: StorageUploadRetry, next: Date)], now: Date) -> String? {
    guard let first = retrying.min(by: { $0.value.next < $1.value.next }) else { return nil }
    let wait = first.value.next.timeIntervalSince(now)
    var text = "retrying \(first.value.retry.attempt) (\(first.value.retry.reason)"
    text += wait > 0.05 ? String(format: ", next in %.1f s)", wait) : ")"
    if retrying.count > 1 { text += " +\(retrying.count - 1) more" }
    return text
}

/// The width of the terminal on `descriptor` (TIOCGWINSZ), else `$COLUMNS`, else 80.
func terminalColumns(_ descriptor: Int32) -> Int {
    var size = winsize()
    if ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
    if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 { return columns }
    return 80
}
