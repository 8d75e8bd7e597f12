import HoistStorage

/// A `JobObserver` that also hears when an upload waits to try again after a transient failure
/// (`StorageUploadTask.observeRetries`): the terminal display says "retrying", `--json` writes a
/// `retry` event. A retry comes after the events of the attempt that failed and before those of
/// the next, on the storage's callback queue like every other file event.
public protocol JobRetryObserver: JobObserver {
    func fileRetrying(_ item: PlanItem, _ retry: StorageUploadRetry)
}
