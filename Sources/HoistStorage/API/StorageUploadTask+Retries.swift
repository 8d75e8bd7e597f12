import Foundation

/// One retry of an upload: a transient failure (a 408, 429 or 5xx answer, a broken or refused
/// connection, a timeout) and the wait before the task tries again.
///
/// Hoist's addition, not FirebaseStorage's: the SDK's tasks report five statuses and retry
/// silently. A task tells `observeRetries(_:)` observers, so a display can say "retrying"
/// instead of standing still; the task's statuses and snapshots are unchanged.
public struct StorageUploadRetry: Sendable, Equatable {
    /// 1 for the first retry of this task (after its first failure), 2 for the second...
    public let attempt: Int
    /// How long the task waits before trying again, in seconds.
    public let delay: TimeInterval
    /// The HTTP status of the failed answer; nil for a failure without one (a connection error).
    public let responseCode: Int?
    /// What went wrong, as the error says it.
    public let message: String
    /// The bytes the task had reported sent when the attempt failed.
    public let completed: Int64

    public init(attempt: Int, delay: TimeInterval, responseCode: Int?, message: String, completed: Int64) {
        self.attempt = attempt
        self.delay = delay
        self.responseCode = responseCode
        self.message = message
        self.completed = completed
    }

    /// `503` or the error's words, for a short display.
    public var reason: String {
        if let responseCode { return String(responseCode) }
        return message.count <= 40 ? message : String(message.prefix(39)) + "…"
    }
}

extension StorageUploadTask {
    /// Calls `handler` on the storage's `callbackQueue` each time the task is about to wait and
    /// try again after a transient failure, in order with the task's other events (a retry comes
    /// after the events of the attempt that failed, before those of the next). Removed with
    /// `removeObserver(withHandle:)` or `removeAllObservers()`, and after success or failure.
    /// - Returns: a handle for `removeObserver(withHandle:)`.
    @discardableResult
    public func observeRetries(_ handler: @escaping @Sendable (StorageUploadRetry) -> Void) -> String {
        let observer = Observer(RandomID.handle(), handler)
        lock.withLock {
            if !state.isFinished { retryHandlers.append(observer) }
        }
        return observer.handle
    }

    /// Tells the retry observers, under the lock that orders every event of the task.
    func reportRetry(attempt: Int, delay: TimeInterval, after failure: StorageFailure) {
        let code = failure.httpStatus
        let message = failure.message
        lock.withLock {
            guard !retryHandlers.isEmpty, !state.isFinished else { return }
            let retry = StorageUploadRetry(attempt: attempt, delay: delay, responseCode: code, message: message, completed: completed)
            let observers = retryHandlers
            let deliveries = self.deliveries
            deliveries.sent()
            reference.storage.callbackQueue.async {
                for observer in observers { observer.deliver(retry) }
                deliveries.ran()
            }
        }
    }
}
