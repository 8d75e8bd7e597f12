import Foundation

extension StorageReference {
    /// A URL that downloads the object: for a local bucket, its `file://` URL.
    /// - Throws: `objectNotFound` when nothing is stored here.
    public func downloadURL() async throws -> URL {
        guard let object = path.object else {
            throw StorageErrorCode.objectNotFound.error("The root of bucket \(bucket) is not an object.")
        }
        do {
            return try await storage.backend.downloadURL(for: object)
        } catch {
            throw NSError.storage(error)
        }
    }

    /// The download URL, or the error, passed to `completion` on the callback queue.
    public func downloadURL(completion: @escaping (_ url: URL?, _ error: (any Error)?) -> Void) {
        deliver(completion) { try await self.downloadURL() }
    }

    /// The download URL as a `Result`.
    public func downloadURL(completion: @escaping (Result<URL, any Error>) -> Void) {
        downloadURL(completion: Self.resultCallback(completion))
    }

    /// The stored object's metadata.
    /// - Throws: `objectNotFound` when nothing is stored here.
    public func getMetadata() async throws -> StorageMetadata {
        guard let object = path.object else {
            throw StorageErrorCode.objectNotFound.error("The root of bucket \(bucket) is not an object.")
        }
        do {
            return StorageMetadata(try await storage.backend.metadata(of: object))
        } catch {
            throw NSError.storage(error)
        }
    }

    /// The stored object's metadata, or the error, passed to `completion` on the callback queue.
    public func getMetadata(completion: @escaping (_ metadata: StorageMetadata?, _ error: (any Error)?) -> Void) {
        deliver(completion) { try await self.getMetadata() }
    }

    /// Runs `operation` and hands its outcome to `completion` on the callback queue.
    private func deliver<T: Sendable>(
        _ completion: @escaping (T?, (any Error)?) -> Void, _ operation: @escaping @Sendable () async throws -> T
    ) {
        let completion = UncheckedSendable(completion)
        let queue = storage.callbackQueue
        Task {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await operation()) } catch { outcome = .failure(error) }
            queue.async {
                switch outcome {
                case .success(let value): completion.value(value, nil)
                case .failure(let error): completion.value(nil, error)
                }
            }
        }
    }
}
