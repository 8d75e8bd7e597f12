import Foundation

/// The operations every task offers, as in FirebaseStorage: `enqueue()` starts it, `pause()`,
/// `resume()` and `cancel()` control it. `StorageUploadTask` conforms.
///
/// ```swift
/// func stopAll(_ tasks: [any StorageTaskManagement]) { tasks.forEach { $0.cancel() } }
/// ```
///
/// FirebaseStorage declares `pause`, `resume` and `cancel` as optional Objective-C requirements;
/// Swift on Linux has no optional requirements, so here a task implements all four.
public protocol StorageTaskManagement: NSObjectProtocol {
    /// Prepares the task and begins its work; calling it again does nothing.
    func enqueue()
    /// Pauses the task while it is in progress.
    func pause()
    /// Cancels the task: it fails with `cancelled`.
    func cancel()
    /// Resumes a paused task.
    func resume()
}
