import Foundation

/// When and how long to wait before trying a transient failure again: exponential backoff
/// with jitter, honoring a server's `Retry-After`, within a total time budget.
public struct RetryPolicy: Sendable {
    /// The first wait, in seconds; each later one doubles, up to `maximumDelay`.
    public var initialDelay: TimeInterval
    public var maximumDelay: TimeInterval
    /// How long one operation may keep retrying, in seconds.
    public var budget: TimeInterval
    /// How many retries one operation may make (after its first try).
    public var maxRetries: Int

    public init(initialDelay: TimeInterval = 1, maximumDelay: TimeInterval = 32, budget: TimeInterval = 600,
                maxRetries: Int = .max) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.budget = budget
        self.maxRetries = maxRetries
    }

    /// The wait before retry number `attempt` (1-based): a random point in the upper half of the
    /// exponential step, or the server's `Retry-After` when it asks for longer.
    public func delay(attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        let step = min(maximumDelay, initialDelay * pow(2, Double(max(0, attempt - 1))))
        let jittered = step * Double.random(in: 0.5...1.0)
        return max(jittered, retryAfter ?? 0)
    }

    /// True for failures worth another try: connection errors, timeouts, 408, 429 and 5xx.
    public static func isTransient(_ error: any Error) -> Bool {
        if let transport = error as? HTTPTransportError { return transport.isTransient }
        return (error as NSError).userInfo[StorageErrorRetryableKey] as? Bool == true
    }

    /// The wait a server asked for, if any.
    static func retryAfter(_ error: any Error) -> TimeInterval? {
        (error as NSError).userInfo[StorageErrorRetryAfterKey] as? TimeInterval
    }
}

/// `userInfo` key: true on a storage error worth retrying.
public let StorageErrorRetryableKey = "HoistRetryable"
/// `userInfo` key: the seconds a server's `Retry-After` asked to wait.
public let StorageErrorRetryAfterKey = "HoistRetryAfter"
/// `userInfo` key: the HTTP status of the server's answer.
public let StorageErrorResponseCodeKey = "ResponseCode"
/// `userInfo` key: the body of the server's answer.
public let StorageErrorResponseBodyKey = "ResponseBody"
