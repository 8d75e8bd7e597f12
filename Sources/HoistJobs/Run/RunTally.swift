import HoistStorage

/// How an upload the runner started ended.
enum UploadOutcome: Sendable {
    case success(bytes: Int64)
    /// Stored by a copy on the server (a renamed file, `JobRunner.copyRenamed`): `bytes` in the object, none sent.
    case copied(bytes: Int64)
    case failure(StorageErrorCode, String)
    /// Not started: the file is no longer the one the walk found.
    case refused(String)
}

/// What the run must do after the tally counted something.
enum StopAction: Equatable {
    case goOn
    /// Start nothing more; uploads in flight go on.
    case stopStarting
    /// Start nothing more and cancel the uploads in flight.
    case stopAll
}

/// The run's counts (`JobSummary`) and its policy on failures: which are fatal (no other file
/// can escape them), and when `maxErrors` / `failFast` stop the run. A value with no I/O: the
/// runner tells it what happened and does what it answers (`RunTallyTests`).
struct RunTally {
    private(set) var summary: JobSummary
    let failFast: Bool
    let maxErrors: Int

    /// Failures that no other file of the job can escape: the run stops at once.
    static let fatalCodes: Set<StorageErrorCode> = [.unauthenticated, .bucketNotFound, .projectNotFound]
    /// At most this many failures are kept for the report.
    static let keptFailures = 100

    init(job: String, failFast: Bool, maxErrors: Int?) {
        summary = JobSummary(job: job)
        self.failFast = failFast
        self.maxErrors = maxErrors ?? .max
    }

    /// A file not uploaded on purpose.
    mutating func skipped(_ reason: SkipReason) {
        summary.skipped += 1
        switch reason {
        case .unchanged: summary.unchanged += 1
        case .vetoed: summary.vetoed += 1
        case .exists: summary.existing += 1
        default: break
        }
    }

    /// A file that failed before its upload started (a hook's error, a file swapped after the
    /// walk). While the run is interrupted it counts as cancelled instead.
    /// - Returns: whether it counted as a failure (observers hear of it), and what to stop.
    mutating func failedBeforeStart(file: String, destination: String, message: String, interrupted: Bool) -> (failed: Bool, StopAction) {
        if interrupted {
            summary.cancelled += 1
            return (false, .goOn)
        }
        summary.failed += 1
        keep(.init(file: file, destination: destination, code: .invalidArgument, message: message))
        return (true, failFast || summary.failed >= maxErrors ? .stopStarting : .goOn)
    }

    /// A file whose admission was cut short because the run stopped meanwhile.
    mutating func notStarted(interrupted: Bool) {
        if interrupted { summary.cancelled += 1 }
    }

    /// An upload ended. `stopping`: the run was stopping (a cancelled upload is then cancelled, not failed).
    mutating func uploadEnded(file: String, destination: String, _ outcome: UploadOutcome, stopping: Bool) -> StopAction {
        switch outcome {
        case .success(let bytes):
            summary.uploaded += 1
            summary.bytes += bytes
        case .copied:
            summary.copied += 1
        case .failure(.cancelled, _) where stopping:
            summary.cancelled += 1
        case .refused:
            preconditionFailure("a refused file is told with failedBeforeStart")
        case .failure(let code, let message):
            summary.failed += 1
            keep(.init(file: file, destination: destination, code: code, message: message))
            if Self.fatalCodes.contains(code), summary.fatal == nil {
                summary.fatal = message
                return .stopAll
            }
            if failFast { return .stopAll }
            if summary.failed >= maxErrors { return .stopStarting }
        }
        return .goOn
    }

    /// The run cannot go on (a journal write failed, a shared run's claim failed): the first
    /// reason stands.
    mutating func fatal(_ message: String) -> StopAction {
        if summary.fatal == nil { summary.fatal = message }
        return .stopAll
    }

    /// A file or folder inside a root that the walk could not read: a failure, told at the end.
    mutating func walkFailed(path: String, message: String) {
        summary.failed += 1
        keep(.init(file: path, destination: "", code: .invalidArgument, message: message))
    }

    /// The plan could not be made (two files for one object, a template that cannot be
    /// filled): the run failed, and stopped there.
    mutating func planFailed(manifest: String, message: String) {
        summary.failed += 1
        summary.failures.append(.init(file: manifest, destination: "", code: .invalidArgument, message: message))
        if summary.fatal == nil { summary.fatal = message }
    }

    /// The run's `mirror` or `move` could not do its work (a listing failed, `maxDelete` was
    /// passed, a delete failed, a moved file was kept): a failure the run exits 1 with.
    mutating func afterUploadsFailed(manifest: String, destination: String = "", message: String) {
        summary.failed += 1
        keep(.init(file: manifest, destination: destination, code: .invalidArgument, message: message))
    }

    /// A mirror's deletions were refused by `maxDelete` (none happened): their own outcome,
    /// not failed files; the run exits 1 and says why.
    mutating func deletionsRefused(_ count: Int, manifest: String, message: String) {
        summary.deleteRefused += max(1, count)
        summary.deleteRefusal = "\(manifest): \(message)"
    }

    /// A deletion ended.
    mutating func deletion(_ outcome: DeletionOutcome) {
        switch outcome {
        case .deleted: summary.deleted += 1
        case .changed, .vetoed, .kept: summary.deleteKept += 1
        case .absent, .failed: break
        }
    }

    mutating func moved(_ count: Int) { summary.moved += count }

    mutating func ended(interrupted: Bool, fatal: String?, seconds: Double) {
        summary.interrupted = interrupted
        if summary.fatal == nil, let fatal { summary.fatal = fatal }
        summary.seconds = seconds
    }

    private mutating func keep(_ failure: JobSummary.Failure) {
        if summary.failures.count < Self.keptFailures { summary.failures.append(failure) }
    }
}
