import Foundation

/// Where objects live. Everything above it (tasks, retries, observers) is written once;
/// a backend only moves bytes and reads metadata.
///
/// Contract for every method: failures are `StorageFailure`s (the public API makes the
/// `NSError`s users see), marked `retryable` when another try may succeed; a missing object is
/// `objectNotFound`, a missing bucket `bucketNotFound`, a refused permission `unauthorized`.
/// `BackendConformanceTests` checks every backend against this contract.
public protocol StorageBackend: Sendable {
    /// The bucket's name, as references show it.
    var bucket: String { get }

    /// Opens an upload session for the object at `path` (never empty) of `size` bytes.
    /// Nothing is visible at `path` until the session finishes.
    func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession

    /// As `startUpload(to:attributes:size:)`, for a storage whose `uploadChunkSizeBytes` asks
    /// for chunks of `chunkSize` bytes (nil: no limit); the default ignores it. A backend that
    /// sends small objects in one request sends those larger than one chunk in chunks.
    func startUpload(to path: String, attributes: ObjectResource, size: Int64, chunkSize: Int64?) async throws
        -> any UploadSession

    /// Reopens a session by the `id` of one started earlier, perhaps by another process.
    /// - Throws: `objectNotFound` when the session is gone (finished, abandoned or expired).
    func resumeUpload(id: String) async throws -> any UploadSession

    /// `resumeUpload(id:)` for an upload to `path`: a session that would store another object
    /// (a session id read back from a journal or a bucket's own files) is refused. By default
    /// (a backend whose sessions do not say their object before they finish) as `resumeUpload(id:)`.
    /// - Throws: `objectNotFound` when the session is gone; `invalidArgument` for one of another object.
    func resumeUpload(id: String, for path: String) async throws -> any UploadSession

    /// `resumeUpload(id:for:)` with the object's attributes, for a session that writes them only
    /// when it finishes (a GCS parallel upload composes its object at the end). By default
    /// (sessions that were given their metadata when they started) as `resumeUpload(id:for:)`.
    func resumeUpload(id: String, for path: String, attributes: ObjectResource) async throws -> any UploadSession

    /// Deletes the object at `path` if it is still the given generation (any generation when nil).
    /// Missing objects and other generations are left alone, silently. Used to take back an
    /// object that must not stay (its file changed while it was read).
    func delete(_ path: String, generation: Int64?) async throws

    /// Deletes the object at `path` only while it is still `generation` (GCS: `ifGenerationMatch`;
    /// S3: the ETag the generation stands for, sent as `If-Match`; a local bucket: under the
    /// object's lock), and says what it did: an object another writer replaced since is left
    /// alone (`changed`). The default reads the metadata, then deletes that generation.
    func deleteObject(_ path: String, generation: Int64) async throws -> DeleteOutcome

    /// Copies the object at `source` to `destination` in the same bucket on the server, no byte
    /// through this process (GCS `rewrite`, S3 `CopyObject`, a local bucket a new file), with the
    /// source's metadata; the source is left as it is. With `generation`, only while the source is
    /// still that generation (GCS `ifSourceGenerationMatch`; S3 `x-amz-copy-source-if-match` on
    /// the ETag the generation stands for; a local bucket under the object's lock): otherwise
    /// nothing is written and the outcome is `sourceChanged`. The copy is verified: its CRC32C or
    /// MD5 must be the source's (else `nonMatchingChecksum`; a GCS or local copy that fails it is
    /// deleted). Where `capabilities.copiesObjects` is false the default fails with
    /// `invalidArgument`, and a caller uploads instead.
    /// - Throws: `objectNotFound` when there is no source.
    func copy(from source: String, to destination: String, ifSourceGeneration generation: Int64?) async throws -> CopyOutcome

    /// One page of the objects whose paths start with `prefix`, in the order the server lists
    /// them, from `page` (a token of the previous page; nil for the first). The default fails
    /// with `invalidArgument`: a backend that cannot list.
    func list(prefix: String, page: String?) async throws -> ObjectListing

    /// Checks, before the first byte moves, that uploads can work at all: credentials found,
    /// host reached, bucket there. Fails within seconds, naming the cause and the fix.
    func checkAccess() async throws

    /// Ends the unfinished uploads under this storage's prefix begun more than `age` seconds
    /// ago, which no run continued (S3's multipart uploads: their parts are billed until
    /// ended), and only those whose session ids are in `sessions` (the job's journal's): an
    /// upload another application began in the same place is not the job's to end.
    /// The paths whose uploads were ended. The default has none: GCS's sessions expire by
    /// themselves within a week, and a parallel upload's parts are in the journal.
    func endStaleUploads(olderThan age: TimeInterval, startedBy sessions: Set<String>) async throws -> [String]

    /// See the extension: deferring durability to batches, and making them durable.
    func deferPersistence()
    func persist() throws

    /// The stored object's metadata. - Throws: `objectNotFound` when there is none.
    func metadata(of path: String) async throws -> ObjectResource

    /// A URL that downloads the object. - Throws: `objectNotFound` when there is none.
    func downloadURL(for path: String) async throws -> URL

    /// The download URL of an object just stored, from its metadata where the backend can
    /// (no request); by default the same as `downloadURL(for:)`.
    func downloadURL(for path: String, stored: ObjectResource) async throws -> URL

    /// What this backend can do (its executor, checksums, resume across processes); by default nothing special.
    var capabilities: BackendCapabilities { get }

    /// What a run should tell its user of how its objects were stored (a local bucket's file
    /// system refused extended attributes, so some metadata went to sidecars), each said once;
    /// by default nothing.
    var notes: [String] { get }

    /// The same backend with its requests sent to an emulator at `host:port` over `http`,
    /// without credentials (`Storage.useEmulator`); nil for a backend with no server (the default).
    func pointedAtEmulator(host: String, port: Int) -> (any StorageBackend)?
}

extension StorageBackend {
    public func resumeUpload(id: String, for path: String) async throws -> any UploadSession {
        try await resumeUpload(id: id)
    }

    public func deleteObject(_ path: String, generation: Int64) async throws -> DeleteOutcome {
        let stored: ObjectResource
        do { stored = try await metadata(of: path) } catch let failure as StorageFailure where failure.code == .objectNotFound {
            return .absent
        }
        guard stored.generation == generation else { return .changed }
        try await delete(path, generation: generation)
        return .deleted
    }

    public func endStaleUploads(olderThan age: TimeInterval, startedBy sessions: Set<String>) async throws -> [String] { [] }

    public func copy(from source: String, to destination: String, ifSourceGeneration generation: Int64?) async throws -> CopyOutcome {
        throw StorageFailure(.invalidArgument, "This storage (\(bucket)) cannot copy objects: upload the file instead.",
                             details: ["bucket": bucket, "object": source])
    }

    public var notes: [String] { [] }

    public func list(prefix: String, page: String?) async throws -> ObjectListing {
        throw StorageFailure(.invalidArgument, "This storage (\(bucket)) cannot list its objects.", details: ["bucket": bucket])
    }

    public func resumeUpload(id: String, for path: String, attributes: ObjectResource) async throws -> any UploadSession {
        try await resumeUpload(id: id, for: path)
    }

    /// Lets objects stored from now on wait for `persist()` to become durable, instead of each
    /// paying for it when it is stored. For a caller that records objects done in batches (a
    /// job's journal) and calls `persist()` before each batch. By default there is nothing to defer.
    public func deferPersistence() {}

    /// Makes every object stored so far durable. A backend whose objects are durable once
    /// stored (a server that answered) does nothing, the default.
    public func persist() throws {}

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64, chunkSize: Int64?) async throws
        -> any UploadSession
    {
        try await startUpload(to: path, attributes: attributes, size: size)
    }

    /// Checks, before the first byte moves, that uploads can work at all: credentials found,
    /// host reached, bucket there (GCS: one request). By default, nothing to check.
    /// - Throws: a storage error whose message names the cause and the fix.
    public func checkAccess() async throws {}

    public func downloadURL(for path: String, stored: ObjectResource) async throws -> URL {
        try await downloadURL(for: path)
    }

    public var capabilities: BackendCapabilities { BackendCapabilities() }

    public func pointedAtEmulator(host: String, port: Int) -> (any StorageBackend)? { nil }
}

/// One object being written. Its `id` survives a restart of the process.
public protocol UploadSession: Sendable {
    var id: String { get }

    /// Whether another process can continue this session by its `id` (a resumable session, a
    /// multipart upload); false (the default) for one request that either stores or not.
    var continuesElsewhere: Bool { get }

    /// Whether a later process can continue the session by its `id` once this one stops
    /// without abandoning it (a checkpoint): `continuesElsewhere` unless the backend says more.
    var continuesLater: Bool { get }

    /// How many bytes the server holds, from the start of the object.
    func confirmedOffset() async throws -> Int64

    /// Sends `source` from `offset` (which must be the confirmed offset) to the end, or as far
    /// as the backend takes in one go. `.finished` is returned only for an object whose size
    /// and checksums equal the whole of `source`, including bytes an earlier process sent: on
    /// a mismatch the backend removes what it stored and throws `nonMatchingChecksum`. Calls `control.checkpoint()` between pieces, so a pause
    /// stops the I/O and a cancel ends it (throwing `cancelled`); reports the bytes the server
    /// holds through `progress`.
    /// - Returns: `.finished` with the stored object's metadata, or `.partial` with the new
    ///   confirmed offset when the backend wants another call.
    func send(
        from source: ByteSource, at offset: Int64, control: TransferControl,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome

    /// Gives the session up: nothing of it is left in the bucket. Never throws.
    func abandon() async
}

extension UploadSession {
    public var continuesElsewhere: Bool { false }
    public var continuesLater: Bool { continuesElsewhere }
}

/// What one `send` achieved.
public enum SendOutcome: Sendable, Equatable {
    /// The server holds this many bytes; call `send` again from there.
    case partial(Int64)
    /// The object is stored.
    case finished(ObjectResource)
}

/// What a conditional delete (`deleteObject(_:generation:)`) did.
public enum DeleteOutcome: String, Sendable, Equatable {
    /// The object was that generation, and is gone.
    case deleted
    /// There was no object.
    case absent
    /// The object is another generation now (someone replaced it): left alone.
    case changed
}

extension DeleteOutcome {
    /// What a conditional `DELETE` answered with `status` did (GCS and S3 alike): 200/204
    /// deleted, 404 absent, 412 another generation; nil for any other status (a failure).
    package init?(deleteStatus status: Int) {
        switch status {
        case 200, 204: self = .deleted
        case 404: self = .absent
        case 412: self = .changed
        default: return nil
        }
    }
}

/// What a copy (`copy(from:to:ifSourceGeneration:)`) did.
public enum CopyOutcome: Sendable, Equatable {
    /// The destination holds the source's bytes and metadata, verified: its description.
    case copied(ObjectResource)
    /// The source is another generation than the one asked for: nothing was written.
    case sourceChanged
}

/// One object of a listing: its path (below the storage URL's prefix) and generation.
public struct ListedObject: Sendable, Equatable {
    public let path: String
    public let generation: Int64?
    public let size: Int64?

    public init(path: String, generation: Int64?, size: Int64?) {
        self.path = path
        self.generation = generation
        self.size = size
    }
}

/// A page of a listing and the token of the next (nil: the last page).
public struct ObjectListing: Sendable {
    public var objects: [ListedObject]
    public var next: String?

    public init(objects: [ListedObject], next: String?) {
        self.objects = objects
        self.next = next
    }
}
