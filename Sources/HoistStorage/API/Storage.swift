import Foundation
import Synchronization

/// The entry point: one bucket, and the settings its tasks share.
///
/// ```swift
/// let storage = Storage.storage(url: "file:///srv/bucket")   // a local directory bucket
/// let storage = Storage.storage()                            // $HOIST_STORAGE_URL, else ./.hoist/bucket
/// ```
///
/// Supported URLs: `file:///ABS/DIR` and `file:REL/DIR` (a local directory bucket, the
/// embedded default). Instances are cached per URL, as in FirebaseStorage.
public final class Storage: Sendable {
    /// The URL this storage was made from.
    public let url: String
    /// Where its objects live.
    public let backend: any StorageBackend
    private let settings: Mutex<Settings>

    private struct Settings {
        var callbackQueue = DispatchQueue(label: "hoist.storage.callbacks")
        var maxUploadRetryTime: TimeInterval = 600
        var maxDownloadRetryTime: TimeInterval = 600
        var maxOperationRetryTime: TimeInterval = 120
        var uploadChunkSizeBytes: Int64 = .max
        var retryInitialDelay: TimeInterval = 1
        var maxUploadRetries = Int.max
        var bandwidthLimiter: BandwidthLimiter?
    }

    private static let instances = Mutex<[String: Storage]>([:])

    /// The default storage: `$HOIST_STORAGE_URL`, or the local bucket `./.hoist/bucket`.
    public static func storage() -> Storage {
        storage(url: ProcessInfo.processInfo.environment["HOIST_STORAGE_URL"] ?? "file:.hoist/bucket")
    }

    /// The storage for `url` (`file:///abs/dir`, `file:rel/dir`), made once per URL.
    public static func storage(url: String) -> Storage {
        instances.withLock { instances in
            if let existing = instances[url] { return existing }
            let storage = Storage(url: url, backend: BackendRegistry.backend(for: url))
            instances[url] = storage
            return storage
        }
    }

    /// A storage over a backend of your own (not cached).
    public init(url: String, backend: any StorageBackend) {
        self.url = url
        self.backend = backend
        settings = Mutex(Settings())
    }

    /// The serial queue every observer and completion handler runs on.
    public var callbackQueue: DispatchQueue {
        get { settings.withLock { $0.callbackQueue } }
        set { settings.withLock { $0.callbackQueue = newValue } }
    }

    /// How long an upload keeps retrying transient failures, in seconds (default 600).
    public var maxUploadRetryTime: TimeInterval {
        get { settings.withLock { $0.maxUploadRetryTime } }
        set { settings.withLock { $0.maxUploadRetryTime = newValue } }
    }

    /// How long a download keeps retrying, in seconds (default 600).
    public var maxDownloadRetryTime: TimeInterval {
        get { settings.withLock { $0.maxDownloadRetryTime } }
        set { settings.withLock { $0.maxDownloadRetryTime = newValue } }
    }

    /// How long other operations (metadata, download URL) keep retrying, in seconds (default 120).
    public var maxOperationRetryTime: TimeInterval {
        get { settings.withLock { $0.maxOperationRetryTime } }
        set { settings.withLock { $0.maxOperationRetryTime = newValue } }
    }

    /// The largest request body an upload sends at once (default: the whole rest of the file).
    public var uploadChunkSizeBytes: Int64 {
        get { settings.withLock { $0.uploadChunkSizeBytes } }
        set { settings.withLock { $0.uploadChunkSizeBytes = newValue } }
    }

    /// The first wait before retrying a transient failure, in seconds (default 1); later waits
    /// double, with jitter, up to 32 s, until `maxUploadRetryTime` is spent.
    public var retryInitialDelay: TimeInterval {
        get { settings.withLock { $0.retryInitialDelay } }
        set { settings.withLock { $0.retryInitialDelay = newValue } }
    }

    /// How many times an upload retries a transient failure, within `maxUploadRetryTime`
    /// (default: as often as the time allows).
    public var maxUploadRetries: Int {
        get { settings.withLock { $0.maxUploadRetries } }
        set { settings.withLock { $0.maxUploadRetries = newValue } }
    }

    /// A bandwidth limit all of this storage's uploads share (default none).
    public var bandwidthLimiter: BandwidthLimiter? {
        get { settings.withLock { $0.bandwidthLimiter } }
        set { settings.withLock { $0.bandwidthLimiter = newValue } }
    }

    /// The retry policy uploads follow.
    var uploadRetryPolicy: RetryPolicy {
        settings.withLock {
            RetryPolicy(initialDelay: $0.retryInitialDelay, budget: $0.maxUploadRetryTime, maxRetries: $0.maxUploadRetries)
        }
    }

    /// The root of the bucket.
    public func reference() -> StorageReference {
        StorageReference(storage: self, path: StoragePath(bucket: backend.bucket))
    }

    /// A reference to `path` in this bucket.
    public func reference(withPath path: String) -> StorageReference {
        reference().child(path)
    }

    /// A reference from `gs://bucket/path` or a Firebase download URL of this bucket.
    /// Like FirebaseStorage, this stops the program on a malformed URL or another bucket;
    /// `reference(for:)` throws instead.
    public func reference(forURL url: String) -> StorageReference {
        do {
            return try reference(for: url)
        } catch {
            fatalError("\(error.localizedDescription)")
        }
    }

    /// A reference from `gs://bucket/path` or a Firebase download URL of this bucket.
    /// - Throws: `pathError` for a malformed URL, `bucketMismatch` for another bucket.
    public func reference(for url: String) throws -> StorageReference {
        guard let path = StoragePath.parse(url) else {
            throw StorageErrorCode.pathError.error(
                "Internal error: URL must be gs://<bucket>/<path> or http[s]://<host>/v0/b/<bucket>/o/<path>: \(url)")
        }
        guard path.bucket == backend.bucket else {
            throw StorageErrorCode.bucketMismatch.error(
                "Provided bucket: `\(path.bucket)` does not match the Storage bucket of the current instance: `\(backend.bucket)`")
        }
        return StorageReference(storage: self, path: path)
    }
}
