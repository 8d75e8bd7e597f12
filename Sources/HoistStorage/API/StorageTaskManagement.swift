import Foundation

/// The operations every task offers, as in FirebaseStorage: `enqueue()` starts it, `pause`,
/// `resume` and `cancel` control it. `StorageUploadTask` conforms.
///
/// FirebaseStorage declares `pause`, `resume` and `cancel` as optional Objective-C requirements,
/// so code written for it calls them with `?()`. Swift on Linux has no optional requirements;
/// here they are optional closures, which keeps that code compiling as written:
///
/// ```swift
/// func stop(_ task: any StorageTaskManagement) {
///     task.cancel?()
/// }
/// ```
///
/// A `StorageUploadTask` itself has the plain methods: `uploadTask.pause()`.
public protocol StorageTaskManagement: NSObjectProtocol {
    /// Prepares the task and begins its work; calling it again does nothing.
    func enqueue()
    /// Pauses the task while it is in progress.
    var pause: (() -> Void)? { get }
    /// Cancels the task: it fails with `cancelled`.
    var cancel: (() -> Void)? { get }
    /// Resumes a paused task.
    var resume: (() -> Void)? { get }
}

extension StorageTaskManagement where Self: StorageUploadTask {
    /// The task's `pause()`.
    public var pause: (() -> Void)? { { (self as StorageUploadTask).pause() } }
    /// The task's `cancel()`.
    public var cancel: (() -> Void)? { { (self as StorageUploadTask).cancel() } }
    /// The task's `resume()`.
    public var resume: (() -> Void)? { { (self as StorageUploadTask).resume() } }
}
