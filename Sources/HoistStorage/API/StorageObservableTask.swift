import Foundation
import Synchronization

/// A task whose events can be observed. Observers run on the storage's `callbackQueue`, in
/// the order the events happened.
public class StorageObservableTask: StorageTask, @unchecked Sendable {
    typealias Handler = (StorageTaskSnapshot) -> Void

    private var handlers: [StorageTaskStatus: [(handle: String, run: Handler)]] = [:]
    /// `observeInPlace` handlers; guarded by `lock`.
    private var inPlaceHandlers: [StorageTaskStatus: [Handler]] = [:]
    /// `StorageUploadTask.observeRetries` observers (Hoist's, beside the SDK's statuses); guarded by `lock`.
    var retryHandlers: [(handle: String, run: (StorageUploadRetry) -> Void)] = []

    /// True once a `.progress` event has fired; guarded by `lock`.
    var hasReportedProgress: Bool { false }

    /// Deliveries sent to the callback queue whose handlers have not all run yet.
    let deliveries: PendingDeliveries

    init(reference: StorageReference, deliveries: PendingDeliveries = PendingDeliveries()) {
        self.deliveries = deliveries
        super.init(reference: reference)
    }

    /// Calls `handler` on every `status` event. An observer added while the task is already in
    /// that state (running for `.resume`, running after a first progress event for `.progress`,
    /// paused, succeeded, failed) is called once at once. All observers are removed after success or failure.
    /// - Returns: a handle for `removeObserver(withHandle:)`.
    @discardableResult
    public func observe(_ status: StorageTaskStatus, handler: @escaping (StorageTaskSnapshot) -> Void) -> String {
        let handle = RandomID.handle()
        lock.withLock {
            let fireNow: Bool
            switch status {
            case .resume: fireNow = state == .running
            case .progress: fireNow = state == .running && hasReportedProgress
            case .pause: fireNow = state == .paused
            case .success: fireNow = state == .success
            case .failure: fireNow = state == .failed
            case .unknown: fireNow = false
            }
            if fireNow { dispatch([handler], snapshotUnderLock(status)) }
            if !state.isFinished, status != .unknown {
                handlers[status, default: []].append((handle, handler))
            }
        }
        return handle
    }

    /// Calls `handler` on every event of `statuses` where it happens: on the thread that made it,
    /// right after the task's state changed (outside its lock), instead of on the callback queue.
    /// For a scheduler's own observers that are thread-safe and quick (a journal's batcher): an
    /// event then costs no thread hand-off, and the task never waits for the queue to store its
    /// object. The events of the task's own run come in order; a `pause()` or `resume()` called
    /// on another thread may be heard before or after a progress event made at the same moment.
    /// Add them before the task starts; `removeAllObservers()` leaves them.
    package func observeInPlace(_ statuses: Set<StorageTaskStatus>, handler: @escaping @Sendable (StorageTaskSnapshot) -> Void) {
        lock.withLock {
            for status in statuses where status != .unknown { inPlaceHandlers[status, default: []].append(handler) }
        }
    }

    /// Removes one observer; an unknown handle is ignored.
    public func removeObserver(withHandle handle: String) {
        lock.withLock {
            for status in handlers.keys { handlers[status]?.removeAll { $0.handle == handle } }
            retryHandlers.removeAll { $0.handle == handle }
        }
    }

    /// Removes every observer of `status`.
    public func removeAllObservers(for status: StorageTaskStatus) {
        lock.withLock { handlers[status] = nil }
    }

    /// Removes every observer.
    public func removeAllObservers() {
        lock.withLock {
            handlers.removeAll()
            retryHandlers.removeAll()
        }
    }

    /// Moves to `newState` (when `change` allows) and tells the observers of `status`,
    /// all under the lock, so observers see events in the order they happened.
    /// - Returns: false when `change` refused the move.
    @discardableResult
    func transition(_ status: StorageTaskStatus, _ change: () -> Bool) -> Bool {
        let (changed, inPlace) = lock.withLock { () -> (Bool, UncheckedSendable<([Handler], StorageTaskSnapshot)>?) in
            guard change() else { return (false, nil) }
            if let observers = handlers[status], !observers.isEmpty {
                dispatch(observers.map(\.run), snapshotUnderLock(status))
            }
            let inPlace = inPlaceHandlers[status].map { UncheckedSendable(($0, snapshotUnderLock(status))) }
            if state.isFinished {
                handlers.removeAll()
                inPlaceHandlers.removeAll()
                retryHandlers.removeAll()
            }
            return (true, inPlace)
        }
        if let (observers, snapshot) = inPlace?.value {
            for observer in observers { observer(snapshot) }
        }
        return changed
    }

    private func dispatch(_ handlers: [Handler], _ snapshot: StorageTaskSnapshot) {
        guard !handlers.isEmpty else { return }
        let work = UncheckedSendable((handlers, snapshot))
        let deliveries = self.deliveries
        deliveries.sent()
        reference.storage.callbackQueue.async {
            let (handlers, snapshot) = work.value
            for handler in handlers { handler(snapshot) }
            deliveries.ran()
        }
    }
}

/// How many of a task's deliveries to the callback queue have not finished running, so
/// `TransferControl.commitCheckpoint()` waits for the queue only when some have not: the usual
/// small upload then skips a round trip through the queue (two thread hand-offs per file).
final class PendingDeliveries: Sendable {
    private let count = Atomic<Int>(0)
    /// Call before handing a delivery to the queue.
    func sent() { count.add(1, ordering: .sequentiallyConsistent) }
    /// Call after its handlers have run.
    func ran() { count.subtract(1, ordering: .sequentiallyConsistent) }
    /// True while some delivery has not finished.
    var any: Bool { count.load(ordering: .sequentiallyConsistent) > 0 }
}

/// Carries a value the compiler cannot prove `Sendable` to the callback queue; safe here
/// because observers only ever run on that one serial queue.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
