import Foundation
import HoistTestSupport
@testable import HoistStorage
import Synchronization

/// Records every event of an upload task, in the order observers saw them.
final class EventRecorder: Sendable {
    struct Event: Equatable, Sendable {
        let status: StorageTaskStatus
        let completed: Int64
        let total: Int64
    }

    private struct State {
        var events: [Event] = []
        var last: StorageTaskSnapshot?
        var waiters: [CheckedContinuation<StorageTaskSnapshot, Never>] = []
        var onProgress: (@Sendable (StorageTaskSnapshot) -> Void)?
    }

    private let state = Mutex(State())

    /// Uploads `content` to `reference` with a recorder in place before the task starts.
    /// `putData`/`putFile` start the task as they return, so a recorder made after them can miss
    /// the first events of a fast upload on a loaded machine (a late observer sees only the state
    /// the task is in). Tests that assert the whole sequence of events record this way.
    static func upload(_ content: StorageUploadTask.Content, to reference: StorageReference,
                       metadata: StorageMetadata? = nil) -> (StorageUploadTask, EventRecorder) {
        let task = StorageUploadTask(reference: reference, content: content, metadata: metadata)
        let recorder = EventRecorder(task)
        task.enqueue()
        return (task, recorder)
    }

    /// Starts recording `task`'s events.
    init(_ task: StorageUploadTask, onProgress: (@Sendable (StorageTaskSnapshot) -> Void)? = nil) {
        state.withLock { $0.onProgress = onProgress }
        for status in [StorageTaskStatus.resume, .progress, .pause, .success, .failure] {
            task.observe(status) { [self] snapshot in record(snapshot) }
        }
    }

    private func record(_ snapshot: StorageTaskSnapshot) {
        let event = Event(status: snapshot.status, completed: snapshot.progress?.completedUnitCount ?? -1,
                          total: snapshot.progress?.totalUnitCount ?? -1)
        let (waiters, onProgress): ([CheckedContinuation<StorageTaskSnapshot, Never>], (@Sendable (StorageTaskSnapshot) -> Void)?) =
            state.withLock { state in
                state.events.append(event)
                guard snapshot.status == .success || snapshot.status == .failure else {
                    return ([], snapshot.status == .progress ? state.onProgress : nil)
                }
                state.last = snapshot
                defer { state.waiters.removeAll() }
                return (state.waiters, nil)
            }
        onProgress?(snapshot)
        for waiter in waiters { waiter.resume(returning: snapshot) }
    }

    var events: [Event] { state.withLock { $0.events } }
    var statuses: [StorageTaskStatus] { events.map(\.status) }

    /// The `.success` or `.failure` snapshot, once it arrives.
    func finished() async -> StorageTaskSnapshot {
        await withCheckedContinuation { continuation in
            let done: StorageTaskSnapshot? = state.withLock { state in
                if let last = state.last { return last }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}

/// Statuses with runs of `.progress` folded into one, for comparing event orders.
func folded(_ statuses: [StorageTaskStatus]) -> [StorageTaskStatus] {
    statuses.reduce(into: []) { result, status in
        if !(status == .progress && result.last == .progress) { result.append(status) }
    }
}

/// The storage error code of a snapshot's error.
func errorCode(_ snapshot: StorageTaskSnapshot) -> StorageErrorCode? {
    guard let error = snapshot.error as NSError?, error.domain == StorageErrorDomain else { return nil }
    return StorageErrorCode(rawValue: error.code)
}
