import Foundation
import HoistJobs
import HoistStorage
import Synchronization

/// Every job event as one JSON line, to standard output or appended to a file.
final class JSONEventLog: JobObserver {
    private let handle: FileHandle
    private let lastProgress = Mutex<[String: Date]>([:])

    enum Sink { case standardOutput }

    init(sink: Sink) { handle = .standardOutput }

    init?(appendingTo path: String) {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        self.handle = handle
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

    func fileSkipped(_ item: PlanItem, reason: String) {
        emit(["event": "skip", "file": item.file.path, "reason": reason])
    }

    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let completed = snapshot.progress?.completedUnitCount ?? 0
        let total = snapshot.progress?.totalUnitCount ?? item.file.size
        var fields: [String: any Sendable] = ["file": item.file.path, "object": item.destination, "completed": completed, "total": total]
        switch snapshot.status {
        case .resume: fields["event"] = "resume"
        case .pause: fields["event"] = "pause"
        case .progress:
            let now = Date()
            let show = lastProgress.withLock { last in
                if let previous = last[item.destination], now.timeIntervalSince(previous) < 0.5, completed < total { return false }
                last[item.destination] = now
                return true
            }
            guard show else { return }
            fields["event"] = "progress"
        case .success:
            lastProgress.withLock { _ = $0.removeValue(forKey: item.destination) }
            fields["event"] = "success"
            fields["size"] = snapshot.metadata?.size ?? 0
            fields["md5Hash"] = snapshot.metadata?.md5Hash ?? ""
            fields["generation"] = snapshot.metadata?.generation ?? 0
        case .failure:
            lastProgress.withLock { _ = $0.removeValue(forKey: item.destination) }
            let error = snapshot.error.map { $0 as NSError }
            let code = error.map { StorageErrorCode(of: $0) } ?? .unknown
            fields["event"] = "failure"
            fields["code"] = code.name
            fields["rawValue"] = code.rawValue
            fields["message"] = error?.localizedDescription ?? ""
        case .unknown: return
        }
        emit(fields)
    }

    func jobFinished(_ summary: JobSummary) {
        emit(["event": "job_end", "job": summary.job, "uploaded": summary.uploaded, "failed": summary.failed,
              "skipped": summary.skipped, "cancelled": summary.cancelled, "bytes": summary.bytes,
              "seconds": summary.seconds, "interrupted": summary.interrupted])
    }
}

func RFC3339Now() -> String { Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)) }

/// The terminal display of `hoist run`: files and bytes done of the total, rate, ETA, and the
/// files in flight, redrawn five times a second on standard error.
final class ProgressDisplay: JobObserver {
    private struct State {
        /// Files and bytes to upload; nil while the walk is still counting them.
        var files: Int?
        var bytes: Int64?
        var doneFiles = 0
        var doneBytes: Int64 = 0
        var inFlight: [String: Int64] = [:]
        var started = Date()
        var ticker: Task<Void, Never>?
    }
    private let state = Mutex(State())

    func planCounted(files: Int, bytes: Int64) {
        state.withLock {
            $0.files = files
            $0.bytes = bytes
        }
    }

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
                state.inFlight[item.file.relativePath] = nil
                state.doneFiles += 1
                if snapshot.status == .success { state.doneBytes += item.file.size }
            default:
                state.inFlight[item.file.relativePath] = snapshot.progress?.completedUnitCount ?? 0
            }
        }
    }

    func jobFinished(_ summary: JobSummary) {
        state.withLock { $0.ticker?.cancel() }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }

    private func draw() {
        let line = state.withLock { s -> String in
            let bytes = s.doneBytes + s.inFlight.values.reduce(0, +)
            let seconds = max(0.001, Date().timeIntervalSince(s.started))
            let rate = Double(bytes) / seconds
            let current = s.inFlight.keys.sorted().prefix(2).joined(separator: ", ")
            guard let files = s.files, let total = s.bytes else {
                return "\(s.doneFiles) files  \(ByteFormatter.string(bytes)) (counting...)  \(ByteFormatter.string(Int64(rate)))/s  \(current)"
            }
            let eta = rate > 0 ? "ETA \(Int(Double(max(0, total - bytes)) / rate)) s" : ""
            return "\(s.doneFiles)/\(files) files  \(ByteFormatter.string(bytes))/\(ByteFormatter.string(total))  "
                + "\(ByteFormatter.string(Int64(rate)))/s  \(eta)  \(current)"
        }
        let width = 160
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line.prefix(width))".utf8))
    }
}
