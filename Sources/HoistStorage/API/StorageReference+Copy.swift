import Foundation

/// Hoist's addition to FirebaseStorage's API, which has no copy: an object copied on the server
/// to another reference of the same storage (`StorageBackend.copy(from:to:ifSourceGeneration:)`).
extension StorageReference {
    /// Copies the object here to `destination`, a reference of the same storage, on the server:
    /// no byte is downloaded or uploaded. The copy has the object's bytes and metadata, verified
    /// by its checksums; the object here is left as it is. Transient failures are retried as
    /// `getMetadata` retries them.
    ///
    /// ```swift
    /// let copied = try await ref.copy(to: storage.reference(withPath: "archive/space.jpg"))
    /// print(copied.generation, copied.md5Hash ?? "")
    /// ```
    /// - Returns: the copy's metadata.
    /// - Throws: `StorageError.objectNotFound` when nothing is stored here; `bucketMismatch` for
    ///   a destination of another storage; `invalidArgument` where the storage cannot copy
    ///   (`BackendCapabilities.copiesObjects`); `nonMatchingChecksum` for a copy that does not
    ///   hold the object's bytes.
    public func copy(to destination: StorageReference) async throws -> StorageMetadata {
        do {
            guard case .copied(let resource) = try await copy(to: destination, ifSourceGeneration: nil) else {
                throw StorageFailure(.internalError, "A copy with no condition was refused.")
            }
            return StorageMetadata(resource)
        } catch {
            throw StorageError(error)
        }
    }

    /// The copy, or the error (an `NSError` in `StorageErrorDomain`), passed to `completion` on
    /// the callback queue.
    public func copy(to destination: StorageReference,
                     completion: @escaping @Sendable (_ metadata: StorageMetadata?, _ error: (any Error)?) -> Void) {
        deliver(completion) {
            guard case .copied(let resource) = try await self.copy(to: destination, ifSourceGeneration: nil) else {
                throw StorageFailure(.internalError, "A copy with no condition was refused.")
            }
            return StorageMetadata(resource)
        }
    }

    /// Copies the object here to `destination` only while it is still `generation` (any, when
    /// nil): a watcher's rename, whose file it hashed against the object of that generation.
    /// What it did, or a `StorageFailure`.
    package func copy(to destination: StorageReference, ifSourceGeneration generation: Int64?) async throws -> CopyOutcome {
        guard let source = path.object, let target = destination.path.object else {
            throw StorageFailure(.objectNotFound, "The root of bucket \(bucket) is not an object.", details: ["bucket": bucket])
        }
        guard destination.storage === storage || (destination.storage.isEqual(storage) && destination.bucket == bucket) else {
            throw StorageFailure(.bucketMismatch, "Cannot copy gs://\(bucket)/\(source) to \(destination): it is another storage's.",
                                 details: ["bucket": bucket, "object": source])
        }
        return try await withOperationRetries {
            try await self.storage.backend.copy(from: source, to: target, ifSourceGeneration: generation)
        }
    }
}
