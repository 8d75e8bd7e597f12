import Foundation
import Synchronization

/// An immutable view of a task at the moment of one event.
public final class StorageTaskSnapshot: @unchecked Sendable, CustomStringConvertible {
    /// The task this snapshot describes.
    public let task: StorageTask
    /// The object's metadata once stored (`.success`), else nil.
    public let metadata: StorageMetadata?
    /// Where the task uploads to.
    public let reference: StorageReference
    /// Bytes sent (`completedUnitCount`) of all (`totalUnitCount`): one `Progress`, made when
    /// first asked for (most snapshots of a batch run are never asked; a `Progress` is a lock and
    /// a dictionary).
    public var progress: Progress? {
        made.withLock { made in
            if let made { return made }
            let progress = Progress.discreteProgress(totalUnitCount: total)
            progress.completedUnitCount = completed
            made = progress
            return progress
        }
    }
    /// `progress`'s counts, without making it.
    package let completed: Int64
    package let total: Int64
    private let made = Mutex<Progress?>(nil)
    /// Why the task failed (`.failure`): an `NSError` in `StorageErrorDomain`.
    public let error: (any Error)?
    /// The event this snapshot was taken for.
    public let status: StorageTaskStatus

    init(task: StorageTask, status: StorageTaskStatus, completed: Int64, total: Int64,
         metadata: ObjectResource?, error: NSError?) {
        self.task = task
        self.reference = task.reference
        self.status = status
        self.completed = completed
        self.total = total
        self.metadata = metadata.map(StorageMetadata.init)
        self.error = error
    }

    public var description: String {
        switch status {
        case .resume: "<State: Resume>"
        case .progress: "<State: Progress, Progress: \(progress?.completedUnitCount ?? 0)/\(progress?.totalUnitCount ?? 0)>"
        case .pause: "<State: Paused>"
        case .success: "<State: Success>"
        case .failure: "<State: Failed, Error: \(error.map { "\($0.localizedDescription)" } ?? "nil")>"
        case .unknown: "<State: Unknown>"
        }
    }
}
