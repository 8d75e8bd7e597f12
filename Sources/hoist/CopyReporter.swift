import Foundation
import HoistJobs
import HoistStorage
import Synchronization

/// What `hoist cp` shows: a progress line on a terminal, JSON lines with `--json`, otherwise
/// only errors. Counts files and bytes for the summary. Events arrive on the storage's serial
/// callback queue, so lines come out in the order things happened.
final class CopyReporter: Sendable {
    private let json: Bool
    private let terminal: Bool
    private let verbose: Bool
    private let totalFiles: Int
    private let totalBytes: Int64
    private let started = Date()
    private struct Counts {
        var doneFiles = 0
        var failedFiles = 0
        var doneBytes: Int64 = 0
        var inFlight: [String: Int64] = [:]
        var lastJSONProgress: [String: Date] = [:]
        var ticker: Task<Void, Never>?
    }
    private let counts = Mutex(Counts())

    init(json: Bool, terminal: Bool, verbose: Bool = false, files: Int, bytes: Int64) {
        self.json = json
        self.terminal = terminal
        self.verbose = verbose
        totalFiles = files
        totalBytes = bytes
    }

    func start() {
        guard terminal else { return }
        let ticker = Task { [weak self] in
            while !Task.isCancelled {
                self?.draw()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        counts.withLock { $0.ticker = ticker }
    }

    /// Uploads one file, reporting its events; never throws (a failure is counted and shown).
    /// Uploads in flight, so a signal can cancel them; once stopped, new ones are cancelled at once.
    private let live = Mutex<(stopped: Bool, tasks: [ObjectIdentifier: StorageUploadTask])>((false, [:]))

    /// Cancels every upload in flight and any started later: each abandons its session and
    /// leaves no object.
    func cancelAll() {
        let tasks = live.withLock { live in
            live.stopped = true
            return Array(live.tasks.values)
        }
        for task in tasks { task.cancel() }
    }

    /// True once `cancelAll()` was called.
    var isStopped: Bool { live.withLock { $0.stopped } }

    func upload(_ item: CopyPlan.Item, to ref: StorageReference, metadata: StorageMetadata) async {
        let task = ref.putFile(from: URL(fileURLWithPath: item.file), metadata: metadata)
        let id = ObjectIdentifier(task)
        if live.withLock({ live in live.tasks[id] = task; return live.stopped }) { task.cancel() }
        defer { live.withLock { _ = $0.tasks.removeValue(forKey: id) } }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            for status in [StorageTaskStatus.resume, .progress, .pause] {
                task.observe(status) { self.event(item, $0) }
            }
            for status in [StorageTaskStatus.success, .failure] {
                task.observe(status) {
                    self.finished(item, $0)
                    continuation.resume()
                }
            }
        }
    }

    private func event(_ item: CopyPlan.Item, _ snapshot: StorageTaskSnapshot) {
        let completed = snapshot.progress?.completedUnitCount ?? 0
        let show = counts.withLock { counts -> Bool in
            if counts.inFlight[item.object] != nil || snapshot.status == .resume { counts.inFlight[item.object] = completed }
            guard json else { return false }
            if snapshot.status == .progress {
                let now = Date()
                if let last = counts.lastJSONProgress[item.object], now.timeIntervalSince(last) < 0.5, completed < item.size {
                    return false
                }
                counts.lastJSONProgress[item.object] = now
            }
            return true
        }
        guard show else { return }
        print(JSONLine.encode(["event": name(snapshot.status), "file": item.file, "object": item.object,
                               "completed": completed, "total": snapshot.progress?.totalUnitCount ?? item.size]))
    }

    private func finished(_ item: CopyPlan.Item, _ snapshot: StorageTaskSnapshot) {
        counts.withLock { counts in
            counts.inFlight[item.object] = nil
            counts.lastJSONProgress[item.object] = nil
            if snapshot.status == .success {
                counts.doneFiles += 1
                counts.doneBytes += snapshot.metadata?.size ?? item.size
            } else {
                counts.failedFiles += 1
            }
        }
        if snapshot.status == .success {
            if json {
                print(JSONLine.encode(["event": "success", "file": item.file, "object": item.object,
                                       "size": snapshot.metadata?.size ?? 0, "md5Hash": snapshot.metadata?.md5Hash ?? "",
                                       "generation": snapshot.metadata?.generation ?? 0]))
            } else if verbose {
                clearLine()
                FileHandle.standardOutput.write(Data(
                    "uploaded  \(item.file) -> \(item.object) (\(ByteFormatter.string(snapshot.metadata?.size ?? item.size)))\n".utf8))
            }
            return
        }
        let error = snapshot.error.map { $0 as NSError }
        let code = error.map { StorageErrorCode(of: $0) } ?? .unknown
        let message = error?.localizedDescription ?? "failed"
        if json {
            print(JSONLine.encode(["event": "failure", "file": item.file, "object": item.object, "code": code.name,
                                   "rawValue": code.rawValue, "message": message]))
        } else {
            clearLine()
            FileHandle.standardError.write(Data("hoist: \(item.file): \(code.name): \(message)\n".utf8))
        }
    }

    /// Ends the display; returns how many files failed.
    func finish() -> Int {
        let (ticker, doneFiles, failedFiles, doneBytes) = counts.withLock { ($0.ticker, $0.doneFiles, $0.failedFiles, $0.doneBytes) }
        ticker?.cancel()
        let seconds = Date().timeIntervalSince(started)
        if json {
            print(JSONLine.encode(["event": "summary", "files": totalFiles, "uploaded": doneFiles, "failed": failedFiles,
                                   "bytes": doneBytes, "seconds": seconds, "peakRSSBytes": peakResidentBytes()]))
        } else if terminal {
            clearLine()
            let rate = seconds > 0 ? Double(doneBytes) / seconds : 0
            FileHandle.standardError.write(Data(
                "\(doneFiles) of \(totalFiles) files, \(ByteFormatter.string(doneBytes)) in \(String(format: "%.1f", seconds)) s (\(ByteFormatter.string(Int64(rate)))/s)\(failedFiles > 0 ? ", \(failedFiles) failed" : "")\n".utf8))
        }
        return failedFiles
    }

    private func draw() {
        let (moving, doneBytes, doneFiles, failedFiles) = counts.withLock {
            ($0.inFlight.values.reduce(0, +), $0.doneBytes, $0.doneFiles, $0.failedFiles)
        }
        let bytes = doneBytes + moving
        let seconds = max(0.001, Date().timeIntervalSince(started))
        let rate = Double(bytes) / seconds
        var line = "\(doneFiles + failedFiles)/\(totalFiles) files  \(ByteFormatter.string(bytes))/\(ByteFormatter.string(totalBytes))"
        if rate > 0 { line += "  \(ByteFormatter.string(Int64(rate)))/s  ETA \(Int((Double(max(0, totalBytes - bytes)) / rate).rounded(.up))) s" }
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line.prefix(max(1, terminalColumns(STDERR_FILENO) - 1)))".utf8))
    }

    private func clearLine() {
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    private func name(_ status: StorageTaskStatus) -> String {
        switch status {
        case .resume: "resume"
        case .progress: "progress"
        case .pause: "pause"
        case .success: "success"
        case .failure: "failure"
        case .unknown: "unknown"
        }
    }
}
