import Foundation

extension StorageReference {
    /// A URL that downloads the object: for a local bucket, its `file://` URL; for GCS, the
    /// Firebase form `https://firebasestorage.googleapis.com:443/v0/b/BUCKET/o/PATH?alt=media&token=TOKEN`
    /// (the emulator's host and port after `useEmulator`).
    /// - Throws: `StorageError.objectNotFound` when nothing is stored here.
    public func downloadURL() async throws -> URL {
        do {
            return try await fetchDownloadURL()
        } catch {
            throw StorageError(error)
        }
    }

    /// The download URL, or the error (an `NSError` in `StorageErrorDomain`), passed to
    /// `completion` on the callback queue.
    public func downloadURL(completion: @escaping @Sendable (_ url: URL?, _ error: (any Error)?) -> Void) {
        deliver(completion) { try await self.fetchDownloadURL() }
    }

    /// The download URL as a `Result`; its error is a `StorageError`.
    public func downloadURL(completion: @escaping @Sendable (Result<URL, any Error>) -> Void) {
        downloadURL(completion: Self.resultCallback(completion))
    }

    /// The stored object's metadata, read from the bucket (for GCS, one metadata request).
    ///
    /// ```swift
    /// let metadata = try await ref.getMetadata()
    /// print(metadata.size, metadata.contentType ?? "", metadata.md5Hash ?? "")
    /// ```
    /// - Throws: `StorageError.objectNotFound` when nothing is stored here.
    public func getMetadata() async throws -> StorageMetadata {
        do {
            return try await fetchMetadata()
        } catch {
            throw StorageError(error)
        }
    }

    /// The stored object's metadata, or the error (an `NSError` in `StorageErrorDomain`),
    /// passed to `completion` on the callback queue.
    public func getMetadata(completion: @escaping @Sendable (_ metadata: StorageMetadata?, _ error: (any Error)?) -> Void) {
        deliver(completion) { try await self.fetchMetadata() }
    }

    /// The stored object's metadata as a `Result`; its error is a `StorageError`.
    public func getMetadata(completion: @escaping @Sendable (Result<StorageMetadata, any Error>) -> Void) {
        getMetadata(completion: Self.resultCallback(completion))
    }

    /// Deletes the object, as FirebaseStorage's `delete()`.
    /// - Throws: `StorageError.objectNotFound` when nothing is stored here.
    public func delete() async throws {
        do { _ = try await deleteStored() } catch { throw StorageError(error) }
    }

    /// Deletes the object; `completion` gets nil, or the error (an `NSError` in
    /// `StorageErrorDomain`), on the callback queue.
    public func delete(completion: (@Sendable (_ error: (any Error)?) -> Void)?) {
        deliver({ (_: Bool?, error: (any Error)?) in completion?(error) }) { try await self.deleteStored() }
    }

    /// Deletes the object only while it is still `generation` (retrying transient failures as
    /// `getMetadata` does); what it did, or a `StorageFailure`.
    package func delete(ifGeneration generation: Int64) async throws -> DeleteOutcome {
        guard let object = path.object else { return .absent }
        return try await withOperationRetries { try await self.storage.backend.deleteObject(object, generation: generation) }
    }

    /// The stored object deleted (whichever generation it is); failures as storage `NSError`s.
    private func deleteStored() async throws -> Bool {
        let metadata = try await fetchMetadata()
        do {
            guard try await delete(ifGeneration: metadata.generation) != .absent else {
                throw StorageErrorCode.objectNotFound.error("Object \(path.object ?? "") does not exist.")
            }
        } catch let error as NSError where error.domain == StorageErrorDomain {
            throw error
        } catch {
            throw NSError.storage(error)
        }
        return true
    }

    /// The download URL; failures as storage `NSError`s.
    private func fetchDownloadURL() async throws -> URL {
        guard let object = path.object else {
            throw StorageErrorCode.objectNotFound.error("The root of bucket \(bucket) is not an object.")
        }
        do {
            return try await withOperationRetries { try await self.storage.backend.downloadURL(for: object) }
        } catch {
            throw NSError.storage(error)
        }
    }

    /// The metadata; failures as storage `NSError`s.
    private func fetchMetadata() async throws -> StorageMetadata {
        guard let object = path.object else {
            throw StorageErrorCode.objectNotFound.error("The root of bucket \(bucket) is not an object.")
        }
        do {
            return StorageMetadata(try await withOperationRetries { try await self.storage.backend.metadata(of: object) })
        } catch {
            throw NSError.storage(error)
        }
    }

    /// Runs `operation` again after a transient failure, with backoff, until the storage's
    /// `maxOperationRetryTime` is spent; then fails with `retryLimitExceeded`.
    func withOperationRetries<T: Sendable>(_ operation: @Sendable () async throws -> T) async throws -> T {
        let policy = storage.operationRetryPolicy
        let deadline = policy.deadline()
        var failures = 0
        while true {
            do {
                return try await operation()
            } catch where RetryPolicy.isTransient(error) {
                failures += 1
                guard let delay = policy.delay(attempt: failures, retryAfter: RetryPolicy.retryAfter(error), deadline: deadline)
                else { throw UploadDriver.retryLimitExceeded(after: error) }
                try await Task.sleep(for: .seconds(delay))
            }
        }
    }

    /// Runs `operation` and hands its outcome to `completion` on the callback queue.
    func deliver<T: Sendable>(
        _ completion: @escaping @Sendable (T?, (any Error)?) -> Void, _ operation: @escaping @Sendable () async throws -> T
    ) {
        let queue = storage.callbackQueue
        Task {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await operation()) } catch { outcome = .failure(NSError.storage(error)) }
            queue.async {
                switch outcome {
                case .success(let value): completion(value, nil)
                case .failure(let error): completion(nil, error)
                }
            }
        }
    }
}
