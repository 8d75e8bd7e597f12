/// The events an upload task reports to its observers.
public enum StorageTaskStatus: Int, Sendable, CaseIterable {
    case unknown
    /// The task started, or resumed after a pause.
    case resume
    /// Bytes moved.
    case progress
    /// The task paused.
    case pause
    /// The object is stored; the snapshot carries its metadata.
    case success
    /// The task failed or was cancelled; the snapshot carries the error.
    case failure
}
