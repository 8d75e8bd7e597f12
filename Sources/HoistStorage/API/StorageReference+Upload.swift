import Foundation

extension StorageReference {
    /// Uploads `uploadData` to this reference.
    /// - Returns: the task, to pause, resume, cancel or observe.
    @discardableResult
    public func putData(_ uploadData: Data, metadata: StorageMetadata? = nil) -> StorageUploadTask {
        putData(uploadData, metadata: metadata, completion: nil)
    }

    /// Uploads `uploadData` and calls `completion` on the callback queue with the stored
    /// object's metadata or the error (an `NSError` in `StorageErrorDomain`).
    @discardableResult
    public func putData(
        _ uploadData: Data, metadata: StorageMetadata? = nil,
        completion: (@Sendable (_ metadata: StorageMetadata?, _ error: (any Error)?) -> Void)?
    ) -> StorageUploadTask {
        start(StorageUploadTask(reference: self, content: .data(uploadData), metadata: metadata), completion)
    }

    /// Uploads the file at `fileURL` (a `file:` URL, or a relative path such as
    /// `URL(string: "path/to/image")`), read piece by piece, never whole.
    /// The content type is inferred from the file's extension unless `metadata` sets one.
    @discardableResult
    public func putFile(from fileURL: URL, metadata: StorageMetadata? = nil) -> StorageUploadTask {
        putFile(from: fileURL, metadata: metadata, completion: nil)
    }

    /// Uploads the file at `fileURL` and calls `completion` on the callback queue with the
    /// stored object's metadata or the error (an `NSError` in `StorageErrorDomain`). A missing
    /// file, a directory or a symbolic link fails with `unknown`, as in FirebaseStorage.
    @discardableResult
    public func putFile(
        from fileURL: URL, metadata: StorageMetadata? = nil,
        completion: (@Sendable (_ metadata: StorageMetadata?, _ error: (any Error)?) -> Void)?
    ) -> StorageUploadTask {
        start(StorageUploadTask(reference: self, content: .file(fileURL), metadata: metadata), completion)
    }

    /// Continues the upload session `sessionID` (from `StorageUploadTask.sessionID`, perhaps of a
    /// process that died) from the offset the server confirms; starts afresh when the session is
    /// gone. A Hoist extension: the journal uses it to resume after a crash.
    @discardableResult
    public func putFile(from fileURL: URL, metadata: StorageMetadata?, resumingSession sessionID: String) -> StorageUploadTask {
        start(StorageUploadTask(reference: self, content: .file(fileURL), metadata: metadata, resuming: sessionID), nil)
    }

    /// As `putFile(from:metadata:resumingSession:)` for a file another process may have stored
    /// without recording it (a job's worker that died): when there is no session to continue, an
    /// object already stored with the file's bytes (size, then MD5) and this metadata is taken
    /// as the upload, and nothing is sent. A Hoist extension.
    @discardableResult
    public func putFile(from fileURL: URL, metadata: StorageMetadata?, resumingSession sessionID: String?,
                        unlessStored: Bool) -> StorageUploadTask {
        start(StorageUploadTask(reference: self, content: .file(fileURL), metadata: metadata, resuming: sessionID,
                                unlessStored: unlessStored), nil)
    }

    /// The task `putFile(from:metadata:resumingSession:unlessStored:)` starts, not started:
    /// `JobRunner` adds its observers, then runs it in its own task (`runToEnd()`). The file is
    /// `source`, which the caller opened and checked (`ByteSource.openWalked`), or the failure
    /// to open it, which the task ends with; `path` names it (content type, messages); `size`:
    /// its size as the caller just read it.
    package func uploadTask(source: Result<ByteSource, StorageFailure>, path: String, size: Int64, metadata: StorageMetadata?,
                            resumingSession sessionID: String?, unlessStored: Bool) -> StorageUploadTask {
        StorageUploadTask(reference: self, content: .source(source, path: path), metadata: metadata,
                          resuming: sessionID, unlessStored: unlessStored, size: size)
    }

    /// `putData` with a `Result`; its error is a `StorageError`.
    @discardableResult
    public func putData(
        _ uploadData: Data, metadata: StorageMetadata? = nil,
        completion: @escaping @Sendable (Result<StorageMetadata, any Error>) -> Void
    ) -> StorageUploadTask {
        putData(uploadData, metadata: metadata, completion: Self.resultCallback(completion))
    }

    /// `putFile` with a `Result`; its error is a `StorageError`.
    @discardableResult
    public func putFile(
        from: URL, metadata: StorageMetadata? = nil,
        completion: @escaping @Sendable (Result<StorageMetadata, any Error>) -> Void
    ) -> StorageUploadTask {
        putFile(from: from, metadata: metadata, completion: Self.resultCallback(completion))
    }

    /// Uploads `uploadData` and returns the stored object's metadata.
    /// Cancelling the calling `Task` cancels the upload.
    /// - Throws: a `StorageError`, such as `.cancelled`.
    /// - Parameter onProgress: called on the callback queue as bytes move.
    public func putDataAsync(
        _ uploadData: Data, metadata: StorageMetadata? = nil, onProgress: (@Sendable (Progress?) -> Void)? = nil
    ) async throws -> StorageMetadata {
        try await awaitUpload(StorageUploadTask(reference: self, content: .data(uploadData), metadata: metadata), onProgress)
    }

    /// Uploads the file at `url` and returns the stored object's metadata.
    /// Cancelling the calling `Task` cancels the upload.
    /// - Throws: a `StorageError`, such as `.unknown` for a file that is not there.
    public func putFileAsync(
        from url: URL, metadata: StorageMetadata? = nil, onProgress: (@Sendable (Progress?) -> Void)? = nil
    ) async throws -> StorageMetadata {
        try await awaitUpload(StorageUploadTask(reference: self, content: .file(url), metadata: metadata), onProgress)
    }

    private func start(
        _ task: StorageUploadTask, _ completion: (@Sendable (StorageMetadata?, (any Error)?) -> Void)?
    ) -> StorageUploadTask {
        if let completion {
            task.observe(.success) { completion($0.metadata, nil) }
            task.observe(.failure) { completion(nil, $0.error) }
        }
        task.enqueue()
        return task
    }

    private func awaitUpload(_ task: StorageUploadTask, _ onProgress: (@Sendable (Progress?) -> Void)?) async throws -> StorageMetadata {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<StorageMetadata, any Error>) in
                if let progress = onProgress {
                    task.observe(.progress) { progress($0.progress) }
                }
                task.observe(.success) { snapshot in
                    if let metadata = snapshot.metadata {
                        continuation.resume(returning: metadata)
                    } else {
                        continuation.resume(throwing: StorageError.internalError(message: "Upload succeeded without metadata."))
                    }
                }
                task.observe(.failure) { snapshot in
                    continuation.resume(throwing: snapshot.error.map(StorageError.init)
                        ?? StorageError.internalError(message: "Internal Storage Error in putDataAsync"))
                }
                task.enqueue()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Adapts a `Result` completion to the `(value, error)` form; the error becomes a `StorageError`.
    static func resultCallback<T>(_ completion: @escaping @Sendable (Result<T, any Error>) -> Void) -> @Sendable (T?, (any Error)?) -> Void {
        { value, error in
            if let value {
                completion(.success(value))
            } else if let error {
                completion(.failure(StorageError(error)))
            } else {
                completion(.failure(StorageError.internalError(message: "Internal failure in getResultCallback")))
            }
        }
    }
}
