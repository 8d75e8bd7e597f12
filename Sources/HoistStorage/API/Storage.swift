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
/// embedded default) and `gs://BUCKET` (Cloud Storage). Instances are cached per URL, as in
/// FirebaseStorage. Two storages are equal (`isEqual`, `==`) when they have the same URL and
/// bucket, as FirebaseStorage compares app and bucket.
public final class Storage: NSObject, Sendable {
    /// The URL this storage was made from.
    public let url: String
    /// Where its objects live (an emulator's, after `useEmulator(withHost:port:)`).
    public var backend: any StorageBackend { settings.withLock { $0.backend } }
    private let settings: Mutex<Settings>

    private struct Settings: Sendable {
        var backend: any StorageBackend
        /// True once a reference was made: `useEmulator` is too late then, as in FirebaseStorage.
        var configured = false
        var callbackQueue = DispatchQueue(label: "hoist.storage.callbacks")
        var maxUploadRetryTime: TimeInterval = 600
        var maxDownloadRetryTime: TimeInterval = 600
        var maxOperationRetryTime: TimeInterval = 120
        var uploadChunkSizeBytes: Int64 = .max
        var retryInitialDelay: TimeInterval = 1
        var maxUploadRetries = Int.max
        var bandwidthLimiter: BandwidthLimiter?
        var transferFence: (any TransferFence)?
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
        settings = Mutex(Settings(backend: backend))
    }

    private init(url: String, settings: Settings) {
        self.url = url
        self.settings = Mutex(settings)
    }

    /// The serial queue every observer and completion handler runs on. Unlike FirebaseStorage,
    /// whose default is the main queue, the default is a serial queue of the storage's own: a
    /// program on Linux rarely runs a main loop. A task waits for the handlers of its events
    /// to have run before it stores its object, so keep this queue free to run them.
    public var callbackQueue: DispatchQueue {
        get { settings.withLock { $0.callbackQueue } }
        set { settings.withLock { $0.callbackQueue = newValue } }
    }

    /// How long an upload keeps retrying transient failures (connection errors, 408, 429, 5xx),
    /// in seconds (default 600): the sum of the waits between tries stays below it, then the task
    /// fails with `retryLimitExceeded`.
    public var maxUploadRetryTime: TimeInterval {
        get { settings.withLock { $0.maxUploadRetryTime } }
        set { settings.withLock { $0.maxUploadRetryTime = newValue } }
    }

    /// How long a download keeps retrying, in seconds (default 600). Hoist does not download,
    /// so this has no effect; it is kept so FirebaseStorage code compiles.
    public var maxDownloadRetryTime: TimeInterval {
        get { settings.withLock { $0.maxDownloadRetryTime } }
        set { settings.withLock { $0.maxDownloadRetryTime = newValue } }
    }

    /// How long other operations (`getMetadata`, `downloadURL`) keep retrying transient failures
    /// (connection errors, 408, 429, 5xx), in seconds (default 120), waiting `retryInitialDelay`
    /// and then twice as long each time; past it they fail with `retryLimitExceeded`. Uploads
    /// follow `maxUploadRetryTime` instead.
    public var maxOperationRetryTime: TimeInterval {
        get { settings.withLock { $0.maxOperationRetryTime } }
        set { settings.withLock { $0.maxOperationRetryTime = newValue } }
    }

    /// The most an upload sends at once (default `.max`: the whole rest of the file). As in
    /// FirebaseStorage, values below 256 KiB count as 256 KiB, larger ones are rounded down to
    /// a multiple of 256 KiB. A local bucket writes pieces of at most this size, GCS sends
    /// chunks of this size in a resumable session (objects larger than one chunk); progress is
    /// reported at least once per chunk.
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

    /// Holds back every byte of this storage's uploads while closed (a job sets it: a shared
    /// run's worker whose hold on its files is unconfirmed). Default none.
    package var transferFence: (any TransferFence)? {
        get { settings.withLock { $0.transferFence } }
        set { settings.withLock { $0.transferFence = newValue } }
    }

    /// The retry policy of other operations (metadata, download URLs).
    var operationRetryPolicy: RetryPolicy {
        settings.withLock { RetryPolicy(initialDelay: $0.retryInitialDelay, budget: $0.maxOperationRetryTime) }
    }

    /// The retry policy uploads follow.
    var uploadRetryPolicy: RetryPolicy {
        settings.withLock {
            RetryPolicy(initialDelay: $0.retryInitialDelay, budget: $0.maxUploadRetryTime, maxRetries: $0.maxUploadRetries)
        }
    }

    /// The chunk size uploads use, rounded as FirebaseStorage rounds it; nil for no limit.
    var effectiveChunkSize: Int64? {
        let size = uploadChunkSizeBytes
        guard size != .max else { return nil }
        let unit: Int64 = 256 << 10
        return max(unit, size / unit * unit)
    }

    /// The root of the bucket.
    public func reference() -> StorageReference {
        let backend = settings.withLock { settings in
            settings.configured = true
            return settings.backend
        }
        return StorageReference(storage: self, path: StoragePath(bucket: backend.bucket))
    }

    /// A reference to `path` in this bucket.
    public func reference(withPath path: String) -> StorageReference {
        reference().child(path)
    }

    /// A reference from `gs://bucket/path` or a Firebase download URL
    /// (`https://host/v0/b/bucket/o/path`) of this bucket. Like FirebaseStorage, this stops the
    /// program on a malformed URL or another bucket; `reference(for:)` throws instead.
    public func reference(forURL url: String) -> StorageReference {
        do {
            return try reference(for: url)
        } catch let error as StorageError {
            fatalError(error.localizedDescription)
        } catch {
            fatalError("Internal error finding StoragePath: \(error)")
        }
    }

    /// A reference from a `gs://`, `http://` or `https://` URL of this bucket.
    ///
    /// ```swift
    /// let ref = try storage.reference(for: URL(string: "gs://my-bucket/images/stars.jpg")!)
    /// ```
    /// - Throws: `StorageError.pathError` for a URL of another scheme or shape,
    ///   `StorageError.bucketMismatch` for a URL of another bucket.
    public func reference(for url: URL) throws -> StorageReference {
        try reference(for: url.absoluteString)
    }

    /// `reference(for:)` with the URL as a string (a Hoist convenience).
    /// - Throws: `StorageError.pathError` or `StorageError.bucketMismatch`.
    public func reference(for url: String) throws -> StorageReference {
        let path = try StoragePath.parse(url)
        let bucket = settings.withLock { settings in
            settings.configured = true
            return settings.backend.bucket
        }
        guard bucket.isEmpty || path.bucket == bucket else {
            throw StorageError.bucketMismatch(message:
                "Provided bucket: `\(path.bucket)` does not match the Storage bucket of the current instance: `\(bucket)`")
        }
        return StorageReference(storage: self, path: path)
    }

    /// Sends this storage's requests to an emulator at `host:port` (over `http`, without
    /// credentials), as FirebaseStorage does; download URLs then point there too. Call it
    /// before making any reference. A local (`file:`) bucket has no server: there the call
    /// only checks its arguments.
    ///
    /// ```swift
    /// let storage = Storage.storage(url: "gs://my-bucket")
    /// storage.useEmulator(withHost: "127.0.0.1", port: 9199)
    /// ```
    /// Stops the program, as FirebaseStorage does, for an empty host, a negative port, or a call
    /// after a reference was made.
    public func useEmulator(withHost host: String, port: Int) {
        guard !host.isEmpty else { fatalError("Invalid host argument: Cannot connect to empty host.") }
        guard port >= 0 else { fatalError("Invalid port argument: Port must be greater or equal to zero.") }
        settings.withLock { settings in
            guard !settings.configured else {
                fatalError("Cannot connect to emulator after Storage SDK initialization. "
                    + "Call useEmulator(host:port:) before creating a Storage reference or trying to load data.")
            }
            if let pointed = settings.backend.pointedAtEmulator(host: host, port: port) { settings.backend = pointed }
        }
    }

    // MARK: - NSObject

    /// A new `Storage` for the same URL and backend, with the same settings (`callbackQueue`,
    /// retry times, chunk size, bandwidth limit). It is equal to this one, but not cached.
    public override func copy() -> Any {
        Storage(url: url, settings: settings.withLock { $0 })
    }

    /// True for a `Storage` with the same URL and bucket.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? Storage else { return false }
        return other.url == url && other.backend.bucket == backend.bucket
    }

    /// A hash of the URL and bucket, so equal storages hash alike.
    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(url)
        hasher.combine(backend.bucket)
        return hasher.finalize()
    }

    /// `Storage(url)`.
    public override var description: String { "Storage(\(url))" }
}
