import Foundation
import HoistStorage
import Synchronization

/// Live upload tasks by a small id, forgotten once they finish.
final class TaskRegistry: Sendable {
    private let state = Mutex<(next: Int64, ids: [ObjectIdentifier: Int64], tasks: [Int64: StorageUploadTask])>((1, [:], [:]))
    func register(_ task: StorageUploadTask, finished: Bool) -> Int64 {
        state.withLock { state in
            let key = ObjectIdentifier(task)
            let id = state.ids[key] ?? state.next
            if state.ids[key] == nil {
                state.next += 1
                state.ids[key] = id
                state.tasks[id] = task
            }
            if finished {
                state.ids[key] = nil
                state.tasks[id] = nil
            }
            return id
        }
    }
    func task(_ id: Int64) -> StorageUploadTask? { state.withLock { $0.tasks[id] } }
}

/// Work a hook waits for, cancellable from another thread.
final class Requests: Sendable {
    private let state = Mutex<(cancelled: Bool, tasks: [Int: Task<Void, Never>], next: Int)>((false, [:], 0))

    /// Runs `work` and waits for it (the hooks' queue may block); nil when cancelled.
    func wait<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T? {
        let semaphore = DispatchSemaphore(value: 0)
        let result = Mutex<T?>(nil)
        let task = Task {
            let value = await work()
            result.withLock { $0 = value }
            semaphore.signal()
        }
        let id = state.withLock { state -> Int? in
            guard !state.cancelled else { return nil }
            state.next += 1
            state.tasks[state.next] = task
            return state.next
        }
        guard let id else {
            task.cancel()
            return nil
        }
        semaphore.wait()
        state.withLock { _ = $0.tasks.removeValue(forKey: id) }
        return result.withLock { $0 }
    }

    func cancelAll() {
        let tasks = state.withLock { state -> [Task<Void, Never>] in
            state.cancelled = true
            return Array(state.tasks.values)
        }
        for task in tasks { task.cancel() }
    }
}

final class CurrentScript: Sendable {
    private let name = Mutex("")
    var value: String {
        get { name.withLock { $0 } }
        set { name.withLock { $0 = newValue } }
    }
}

/// The job's pause and resume, once a runner is attached.
final class JobControls: Sendable {
    private let actions = Mutex<(pause: @Sendable () -> Void, resume: @Sendable () -> Void)?>(nil)
    func set(pause: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void) {
        actions.withLock { $0 = (pause, resume) }
    }
    func pause() { actions.withLock { $0 }?.pause() }
    func resume() { actions.withLock { $0 }?.resume() }
}

/// Runs async work from a thread that may block (the hooks' queue) and returns its value, or nil.
func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> T? {
    let semaphore = DispatchSemaphore(value: 0)
    let result = Mutex<T?>(nil)
    Task {
        let value = try? await work()
        result.withLock { $0 = value }
        semaphore.signal()
    }
    semaphore.wait()
    return result.withLock { $0 }
}
