import Foundation

/// Everything a storage backend owns, registered under its URL scheme (as rclone's
/// `fs.Register(&fs.RegInfo{...})`): how its URLs look, which `storage:` keys of a manifest it
/// reads, how it is made, and what it can do. Callers ask the registration or the backend's
/// `capabilities`; none names a backend's type.
///
/// ```swift
/// BackendRegistry.register(BackendRegistration(
///     scheme: "mem", urlForm: .bucket, forms: ["mem://BUCKET"], copyForm: "mem://BUCKET/PATH",
///     options: NoBackendOptions.self, capabilities: BackendCapabilities()) { context in
///         MemoryBackend(bucket: context.location.bucket)
///     })
/// ```
public struct BackendRegistration: Sendable {
    /// Makes a backend for a parsed location and its options, or throws: a `BackendOptionError`
    /// for an option that cannot be used (naming the key), a `StorageFailure` for anything else.
    public typealias Factory = @Sendable (BackendContext) throws -> any StorageBackend

    /// Lowercase, without the colon: `gs`, `file`.
    public let scheme: String
    /// How the rest of the URL reads.
    public let urlForm: StorageURLForm
    /// The storage URL forms it serves, for messages and docs: `gs://BUCKET`.
    public let forms: [String]
    /// The destination form of `hoist cp` for messages: `gs://BUCKET/PATH`.
    public let copyForm: String
    /// The `storage:` keys it reads beside `url`, decoded from the same mapping.
    public let options: any BackendOptions.Type
    /// What every backend of this family can do (worked out when asked: the GCS family's
    /// executor is the HTTP engine, which starts when named).
    public var capabilities: BackendCapabilities { makeCapabilities() }
    private let makeCapabilities: @Sendable () -> BackendCapabilities
    public let factory: Factory

    public init(scheme: String, urlForm: StorageURLForm, forms: [String], copyForm: String, options: any BackendOptions.Type,
                capabilities: @autoclosure @escaping @Sendable () -> BackendCapabilities, factory: @escaping Factory) {
        self.scheme = scheme.lowercased()
        self.urlForm = urlForm
        self.forms = forms
        self.copyForm = copyForm
        self.options = options
        makeCapabilities = capabilities
        self.factory = factory
    }

    /// Splits a `hoist cp` destination URL of this scheme into the storage URL and the object
    /// path (or prefix) in it: `gs://b/x/y` is `gs://b` and `x/y`; a folder's URL is the
    /// storage itself, with objects at its root.
    /// - Throws: `StorageFailure` (`invalidArgument`) for a URL that names no bucket.
    public func splitCopyDestination(_ text: String) throws -> (storageURL: String, path: String) {
        if urlForm == .folder { return (text, "") }
        let prefix = scheme + "://"
        guard text.lowercased().hasPrefix(prefix) else {
            throw StorageFailure(.invalidArgument, "'\(text)' names no bucket: use \(copyForm).")
        }
        let rest = text.dropFirst(prefix.count)
        let bucket = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard !bucket.isEmpty else { throw StorageFailure(.invalidArgument, "'\(text)' names no bucket: use \(copyForm).") }
        return (prefix + bucket, String(rest.dropFirst(bucket.count).drop { $0 == "/" }))
    }

    /// Checks a storage URL given as the bucket of `hoist cp` (`--storage`): for a bucket
    /// form, a bucket and no path.
    /// - Returns: what is wrong, or nil.
    public func problemAsCopyStorage(_ url: String) -> String? {
        guard urlForm != .folder else { return nil }
        let rest = url.dropFirst(scheme.count + 1)
        guard rest.hasPrefix("//"), case let bucket = rest.dropFirst(2), !bucket.isEmpty, !bucket.hasPrefix("/") else {
            return "names no bucket: use \(forms[0])."
        }
        if urlForm == .bucket, bucket.contains("/") { return "names a path: use \(forms[0]), and put the path in DEST." }
        return nil
    }
}

/// How a storage URL's text after `SCHEME:` reads.
public enum StorageURLForm: Sendable, Equatable {
    /// `SCHEME://BUCKET`: a manifest's URL names only the bucket (paths go in `destination`).
    case bucket
    /// `SCHEME://BUCKET[/PREFIX]`: the URL may name a prefix inside the bucket.
    case bucketAndPrefix
    /// A folder of this machine: `SCHEME:///ABS/DIR`, `SCHEME:/ABS/DIR` or `SCHEME:REL/DIR`.
    /// The objects are files below it: a job fences the folder off from its file sets.
    case folder
}

/// The `storage:` keys of a manifest that a backend reads, decoded from the `storage:` mapping
/// itself (keys sit flat beside `url`). A mistake in a value is a `DecodingError` (the manifest
/// reader shows it as `FILE:LINE:COL: message`); a key no backend asks for is unknown there,
/// with a "did you mean" among the keys of `url`'s backend.
public protocol BackendOptions: Decodable, Sendable {
    /// Every key it reads, as written in manifests: the schema and docs/manifest.md list them
    /// (`ManifestKeyTests` checks both ways).
    static var keys: [String] { get }
    /// No option set: what `Storage.storage(url:)` and `hoist cp` use.
    init()
    /// Checks what can be checked before the backend is made (a file an option names can be
    /// read), for `hoist validate`. By default nothing.
    /// - Throws: `BackendOptionError` naming the key.
    func check(in context: BackendContext) throws
    /// Warnings every run with these options prints (a safety check switched off). By default none.
    var warnings: [String] { get }
    /// The files and folders the backend reads (key files, CA bundles), from the options or the
    /// environment: a job's hooks may not write there. By default none.
    func reads(in context: BackendContext) -> [BackendRead]
}

extension BackendOptions {
    public func check(in context: BackendContext) throws {}
    public var warnings: [String] { [] }
    public func reads(in context: BackendContext) -> [BackendRead] { [] }
}

/// A file or folder a backend reads, as a job's hooks must leave it.
public struct BackendRead: Sendable, Equatable {
    /// Absolute, as given (not resolved through links).
    public let path: String
    /// What it is, for messages: "the credentials file".
    public let what: String
    /// A folder read whole (nothing may be written anywhere inside).
    public let isTree: Bool

    public init(path: String, what: String, isTree: Bool) {
        self.path = path
        self.what = what
        self.isTree = isTree
    }
}

/// The options of a backend that reads no `storage:` key but `url`.
public struct NoBackendOptions: BackendOptions {
    public static let keys: [String] = []
    public init() {}
    public init(from decoder: any Decoder) throws {}
}

/// What a factory gets: the location, its options, and the surroundings to read them in.
public struct BackendContext: Sendable {
    public var location: StorageLocation
    public var options: any BackendOptions
    /// The environment credentials and endpoints are read from.
    public var environment: [String: String]
    /// The folder relative paths (of options, of a folder URL) are taken from: a manifest's.
    public var directory: String
    /// A CA bundle that wins over the options' and the environment's (`--ca-bundle`).
    public var caBundle: String?
    /// How many transfers the caller runs at once (a job's `upload.concurrency`): a backend that
    /// sends one large object over several connections uses as many; nil: its own default.
    public var concurrency: Int?
    /// The caller acts on what an upload stored: it deletes the file once its object is verified
    /// (a job that moves), or deletes the object later only while it still has the generation
    /// recorded (a job that mirrors). A backend whose answer to an upload does not say all that
    /// a read of the object would (an S3 multipart object's assembled size, the ETag later reads
    /// report) reads each object back.
    public var readsBackUploads: Bool

    public init(location: StorageLocation, options: any BackendOptions, environment: [String: String] = ProcessInfo.processInfo.environment,
                directory: String = FileManager.default.currentDirectoryPath, caBundle: String? = nil, concurrency: Int? = nil,
                readsBackUploads: Bool = false) {
        self.location = location
        self.options = options
        self.environment = environment
        self.directory = directory
        self.caBundle = caBundle
        self.concurrency = concurrency
        self.readsBackUploads = readsBackUploads
    }

    /// A path of an option, made absolute against `directory`.
    public func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        return URL(fileURLWithPath: directory).appendingPathComponent(path).standardizedFileURL.path
    }

    /// The options as the backend's own type, or its defaults for options of another type.
    public func options<Options: BackendOptions>(as type: Options.Type) -> Options {
        options as? Options ?? Options()
    }

    /// The CA bundle a backend trusts: the context's (`--ca-bundle`), else `named` (a manifest's
    /// `caBundle`, resolved against its folder), else nil (the environment's).
    /// - Throws: `BackendOptionError` at `key` when `named` cannot be read.
    public func caBundle(named: String?, key: String) throws -> String? {
        if let caBundle { return caBundle }
        guard let named else { return nil }
        let path = resolve(named)
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw BackendOptionError(key: key, "CA bundle \(path) cannot be read: name a PEM "
                + "file of CA certificates, or a folder of them hashed by `openssl rehash`")
        }
        return path
    }
}

/// An option that cannot be used, found when the backend is checked or made: `key` is the
/// `storage:` key, so a manifest's reader can point at its line.
public struct BackendOptionError: Error, CustomStringConvertible, Sendable {
    public let key: String
    public let message: String
    public init(key: String, _ message: String) {
        self.key = key
        self.message = message
    }
    public var description: String { message }
}

/// What a backend can do, so callers ask instead of downcasting (rclone's `fs.Features`).
public struct BackendCapabilities: Sendable {
    /// A checksum a backend's stored objects carry and a finished session verifies.
    public enum Checksum: String, Sendable, CaseIterable {
        case md5, crc32c
    }

    /// The executor an upload's code runs best on (its transport's thread, so an answer
    /// resumes the upload with no other thread woken); nil: the global one.
    public var preferredExecutor: (any TaskExecutor)?
    /// The checksums a stored object carries.
    public var checksums: Set<Checksum>
    /// A session started by one process can be continued by another (its id journaled).
    public var resumesAcrossProcesses: Bool
    /// The CA bundle its requests trust (nil: the system store, or no network): other requests
    /// of the same job (a hook's notifications) trust the same.
    public var caBundle: String?
    /// A killed upload leaves something the server keeps (and bills) until it is ended (S3's
    /// multipart uploads), which `endStaleUploads` ends: a run asks its journal which are its own
    /// only then (a question that reads every row).
    public var leavesStaleUploads: Bool
    /// Objects are copied on the server (`copy(from:to:ifSourceGeneration:)`); where not, a
    /// caller uploads the file again instead.
    public var copiesObjects: Bool

    public init(preferredExecutor: (any TaskExecutor)? = nil, checksums: Set<Checksum> = [], resumesAcrossProcesses: Bool = false,
                caBundle: String? = nil, leavesStaleUploads: Bool = false, copiesObjects: Bool = false) {
        self.preferredExecutor = preferredExecutor
        self.checksums = checksums
        self.resumesAcrossProcesses = resumesAcrossProcesses
        self.caBundle = caBundle
        self.leavesStaleUploads = leavesStaleUploads
        self.copiesObjects = copiesObjects
    }
}
