import Foundation
import Synchronization

/// A task whose events can be observed. Observers run on the storage's `callbackQueue`, in
/// the order the events happened.
///
/// Handlers are `@Sendable`: they run on the callback queue, not where they were written. In
/// Swift 6, a plain closure written in main-actor code (top-level code in `main.swift`, a
/// SwiftUI view) is inferred `@MainActor`, and calling it on another queue stops the process
/// (`dispatch_assert_queue`); a `@Sendable` closure is not isolated to any actor, so it runs
/// where it is called, and the compiler checks what it captures instead of the program
/// crashing. (firebase-ios-sdk delivers plain closures on `DispatchQueue.main` by default,
/// which a command-line program's main thread may never serve.) Main-actor work inside a
/// handler hops there: `Task { @MainActor in ... }`.
///
/// A handler removed (`removeObserver(withHandle:)`, `removeAllObservers`) never runs again,
/// even for an event already on its way to the queue: each delivery asks whether it is still
/// registered when it runs.
public class StorageObservableTask: StorageTask, @unchecked Sendable {
    typealias Handler = @Sendable (StorageTaskSnapshot) -> Void

    /// A handler with its handle, and whether it was removed (read on the callback queue when
    /// an event is delivered).
    final class Observer<Event>: Sendable {
        let handle: String
        let run: @Sendable (Event) -> Void
        private let removed = Atomic<Bool>(false)
        init(_ handle: String, _ run: @escaping @Sendable (Event) -> Void) {
            self.handle = handle
            self.run = run
        }
        func remove() { removed.store(true, ordering: .releasing) }
        /// Runs the handler unless it was removed before now.
        func deliver(_ event: Event) { if !removed.load(ordering: .acquiring) { run(event) } }
    }

    private var handlers: [StorageTaskStatus: [Observer<StorageTaskSnapshot>]] = [:]
    /// `observeInPlace` handlers; guarded by `lock`.
    private var inPlaceHandlers: [StorageTaskStatus: [Handler]] = [:]
    /// `StorageUploadTask.observeRetries` observers (Hoist's, beside the SDK's statuses); guarded by `lock`.
    var retryHandlers: [Observer<StorageUploadRetry>] = []

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
    public func observe(_ status: StorageTaskStatus, handler: @escaping @Sendable (StorageTaskSnapshot) -> Void) -> String {
        let observer = Observer(RandomID.handle(), handler)
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
            if fireNow { dispatch([observer], snapshotUnderLock(status)) }
            if !state.isFinished, status != .unknown {
                handlers[status, default: []].append(observer)
            }
        }
        return observer.handle
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

    /// Removes one observer; an unknown handle is ignored. It is not called again, not even for
    /// an event that happened before it was removed and has not reached it yet.
    public func removeObserver(withHandle handle: String) {
        lock.withLock {
            for status in handlers.keys {
                handlers[status]?.removeAll { observer in
                    guard observer.handle == handle else { return false }
                    observer.remove()
                    return true
                }
            }
            retryHandlers.removeAll { observer in
                guard observer.handle == handle else { return false }
                observer.remove()
                return true
            }
        }
    }

    /// Removes every observer of `status`.
    public func removeAllObservers(for status: StorageTaskStatus) {
        lock.withLock {
            handlers[status]?.forEach { $0.remove() }
            handlers[status] = nil
        }
    }

    /// Removes every observer.
    public func removeAllObservers() {
        lock.withLock {
            for observers in handlers.values { observers.forEach { $0.remove() } }
            retryHandlers.forEach { $0.remove() }
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
                dispatch(observers, snapshotUnderLock(status))
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

    /// Sends `snapshot` to `observers` on the callback queue; each runs unless removed by then.
    private func dispatch(_ observers: [Observer<StorageTaskSnapshot>], _ snapshot: StorageTaskSnapshot) {
        guard !observers.isEmpty else { return }
        let snapshot = UncheckedSendable(snapshot)
        let deliveries = self.deliveries
        deliveries.sent()
        reference.storage.callbackQueue.async {
            for observer in observers { observer.deliver(snapshot.value) }
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
