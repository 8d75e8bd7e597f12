import Foundation
import Synchronization

/// Something outside a transfer that holds all its bytes back while closed: a shared run's
/// worker whose hold on its files is not confirmed (after a freeze, until a heartbeat reaches
/// the journal). Asked between pieces of I/O, so `isOpen` must be quick.
public protocol TransferFence: Sendable {
    var isOpen: Bool { get }
}

/// The pause and cancel switch of one transfer, checked by backends between pieces of I/O.
public final class TransferControl: Sendable {
    private struct State {
        var paused = false
        var cancelled = false
        /// Cancelled to be continued later (`checkpoint` of a task): the session is kept.
        var keepsSession = false
        /// Past `commitCheckpoint()`: the object is being stored, a cancel comes too late.
        var committed = false
        var waiters: [CheckedContinuation<Void, any Error>] = []
    }

    private let state = Mutex(State())
    /// The bandwidth limit this transfer shares with others, if any.
    public let limiter: BandwidthLimiter?
    /// What holds every byte back while closed, if anything (`TransferFence`).
    public let fence: (any TransferFence)?
    /// The most a backend sends at once (the storage's `uploadChunkSizeBytes`, rounded to
    /// 256 KiB); nil for no limit. Progress is reported at least once per chunk.
    public let chunkSize: Int64?
    /// The queue the task's observers run on now: `commitCheckpoint()` lets it catch up (nil:
    /// nothing of this task's is waiting on it).
    private let observerQueue: (@Sendable () -> DispatchQueue?)?

    public init(limiter: BandwidthLimiter? = nil, fence: (any TransferFence)? = nil, chunkSize: Int64? = nil,
                observerQueue: (@Sendable () -> DispatchQueue?)? = nil) {
        self.limiter = limiter
        self.fence = fence
        self.chunkSize = chunkSize
        self.observerQueue = observerQueue
    }

    /// Call right before the step that makes the object visible (a local rename), or, for a
    /// backend where the server's last answer did, before reporting success. Waits until the
    /// observers of every event reported so far have run (so a `cancel()` from the handler of
    /// the last progress event counts), then as `checkpoint()`; once it returns, `cancel()` has
    /// no effect. A second call returns at once.
    public func commitCheckpoint() async throws {
        if state.withLock({ $0.committed }) { return }
        if let queue = observerQueue?() {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                queue.async { continuation.resume() }
            }
        }
        try await checkpoint()
        let cancelled = state.withLock { state in
            if !state.cancelled { state.committed = true }
            return state.cancelled
        }
        if cancelled { throw Self.cancelledError }
    }

    /// Waits for the bandwidth limit to allow `count` more bytes (returns at once without one).
    public func throttle(_ count: Int) async throws {
        guard let limiter else { return }
        let wait = limiter.take(count)
        if wait > 0 { try await sleep(wait) }
    }

    /// Returns at once while running; waits while paused or fenced; throws `cancelled` once cancelled.
    public func checkpoint() async throws {
        while let fence, !fence.isOpen, !isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
        // Running (nearly always): no continuation, no suspension.
        let (cancelled, paused) = state.withLock { ($0.cancelled, $0.paused) }
        if cancelled { throw Self.cancelledError }
        if !paused { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let verdict: Result<Void, any Error>? = state.withLock { state in
                if state.cancelled { return .failure(Self.cancelledError) }
                if state.paused {
                    state.waiters.append(continuation)
                    return nil
                }
                return .success(())
            }
            if let verdict { continuation.resume(with: verdict) }
        }
    }

    /// Waits `seconds`, or less if cancelled (then throws `cancelled`).
    public func sleep(_ seconds: TimeInterval) async throws {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if isCancelled { throw Self.cancelledError }
            try? await Task.sleep(for: .milliseconds(min(50, max(1, Int(end.timeIntervalSinceNow * 1000)))))
        }
        if isCancelled { throw Self.cancelledError }
    }

    /// Whether the fence (if any) lets bytes go now.
    public var isFenceOpen: Bool { fence?.isOpen ?? true }

    /// True while paused: a backend that cannot wait (a C callback) asks this instead.
    public var isPaused: Bool { state.withLock { $0.paused } }
    /// True once cancelled.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }
    /// True once cancelled to be continued by a later process: its session is not abandoned.
    public var keepsSession: Bool { state.withLock { $0.cancelled && $0.keepsSession } }

    func pause() { state.withLock { $0.paused = true } }

    func resume() {
        let waiters = state.withLock { state in
            state.paused = false
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// - Parameter keepingSession: the session stays on the server, for a later process to
    ///   continue (a watcher stopped by SIGTERM), where a cancel abandons it.
    func cancel(keepingSession: Bool = false) {
        let waiters = state.withLock { state in
            guard !state.committed else { return [CheckedContinuation<Void, any Error>]() }
            if !state.cancelled { state.keepsSession = keepingSession }
            state.cancelled = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(throwing: Self.cancelledError) }
    }

    static var cancelledError: NSError {
        StorageErrorCode.cancelled.error("User cancelled the upload/download.")
    }
}
