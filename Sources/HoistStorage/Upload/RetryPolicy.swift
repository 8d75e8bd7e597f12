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

    /// The wait before retry number `attempt`, or nil once retrying is spent: past `maxRetries`,
    /// or a wait that would end at or after `deadline` (the first try's start plus `budget`).
    public func delay(attempt: Int, retryAfter: TimeInterval?, deadline: Date, now: Date = Date()) -> TimeInterval? {
        guard attempt <= maxRetries else { return nil }
        let wait = delay(attempt: attempt, retryAfter: retryAfter)
        return now.addingTimeInterval(wait) < deadline ? wait : nil
    }

    /// When retrying must stop, for an operation first tried at `start`.
    public func deadline(from start: Date = Date()) -> Date { start.addingTimeInterval(budget) }

    /// True for failures worth another try: a `StorageFailure` its backend marked `retryable`
    /// (for GCS: connection errors, timeouts, 408, 429 and 5xx).
    public static func isTransient(_ error: any Error) -> Bool {
        (error as? StorageFailure)?.retryable == true
    }

    /// The wait a server asked for, if any.
    static func retryAfter(_ error: any Error) -> TimeInterval? {
        (error as? StorageFailure)?.retryAfter
    }
}
