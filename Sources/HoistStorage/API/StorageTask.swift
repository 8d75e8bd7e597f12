import Foundation

/// The base of upload tasks: state, progress, result, and the snapshot of them.
/// Thread-safe: every mutable field is guarded by `lock`.
public class StorageTask: NSObject, @unchecked Sendable {
    /// Where the task works.
    public let reference: StorageReference

    let lock = NSLock()
    var state: TaskState = .unknown
    var completed: Int64 = 0
    var total: Int64 = 0
    var result: ObjectResource?
    var error: NSError?

    enum TaskState: Equatable {
        case unknown, running, paused, success, failed
        var isFinished: Bool { self == .success || self == .failed }

        /// The event a late observer of this state is told about at once.
        var status: StorageTaskStatus {
            switch self {
            case .unknown: .unknown
            case .running: .resume
            case .paused: .pause
            case .success: .success
            case .failed: .failure
            }
        }
    }

    init(reference: StorageReference) { self.reference = reference }

    /// The task as it is now.
    public var snapshot: StorageTaskSnapshot { lock.withLock { snapshotUnderLock(state.status) } }

    func snapshotUnderLock(_ status: StorageTaskStatus) -> StorageTaskSnapshot {
        StorageTaskSnapshot(task: self, status: status, completed: completed, total: total,
                            metadata: status == .success ? result : nil, error: error)
    }
}
