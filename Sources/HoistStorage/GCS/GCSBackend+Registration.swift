import Foundation
import HoistHTTP

/// The `storage:` keys of a `gs://` job, beside `url` (docs/manifest.md, "storage").
public struct GCSOptions: BackendOptions {
    /// A service-account key file (relative to the manifest's folder); default: the
    /// environment, as Google's tools read it.
    public var credentials: String?
    /// Objects up to this many bytes go up in one request; larger ones through a resumable session.
    public var multipartThreshold: Int64?
    /// Set a Firebase download token on each object (default true).
    public var downloadTokens: Bool?
    /// Send large files as parallel composite uploads: `auto` (the default) when the first bytes
    /// show one stream slow, `true` always, `false` never (one stream each).
    public var parallelUploads: ParallelUploads?

    /// The values of `parallelUploads`.
    public enum ParallelUploads: Sendable, Equatable {
        case auto, always, never

        /// A manifest's word: `auto`, or a YAML boolean's.
        init?(_ word: String) {
            switch word {
            case "auto": self = .auto
            case "true", "True", "TRUE", "yes", "on": self = .always
            case "false", "False", "FALSE", "no", "off": self = .never
            default: return nil
            }
        }
    }
    /// Files of at least this many bytes go up as parallel composite uploads (default 150 MiB).
    public var parallelUploadThreshold: Int64?
    /// Skip TLS certificate checks. Never outside a test network: every run warns.
    public var insecureSkipTLSVerify: Bool?
    /// A PEM file of CA certificates (or a folder hashed by `openssl rehash`) to trust instead
    /// of the system store, relative to the manifest's folder.
    public var caBundle: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case credentials, multipartThreshold, downloadTokens, parallelUploads, parallelUploadThreshold, insecureSkipTLSVerify, caBundle
    }

    public static var keys: [String] { CodingKeys.allCases.map(\.stringValue) }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        credentials = try c.decodeIfPresent(String.self, forKey: .credentials).flatMap { $0.isEmpty ? nil : $0 }
        multipartThreshold = try c.decodeIfPresent(ByteSize.self, forKey: .multipartThreshold)?.bytes
        downloadTokens = try c.decodeIfPresent(Bool.self, forKey: .downloadTokens)
        // A YAML scalar decodes as text (`true` too), a JSON boolean only as one.
        if let word = try? c.decodeIfPresent(String.self, forKey: .parallelUploads) {
            guard let value = ParallelUploads(word) else {
                throw DecodingError.dataCorruptedError(forKey: .parallelUploads, in: c,
                                                       debugDescription: "parallelUploads is auto, true or false, not \"\(printable(word, limit: 40))\"")
            }
            parallelUploads = value
        } else if let flag = try c.decodeIfPresent(Bool.self, forKey: .parallelUploads) {
            parallelUploads = flag ? .always : .never
        }
        parallelUploadThreshold = try c.decodeIfPresent(ByteSize.self, forKey: .parallelUploadThreshold)?.bytes
        insecureSkipTLSVerify = try c.decodeIfPresent(Bool.self, forKey: .insecureSkipTLSVerify)
        caBundle = try c.decodeIfPresent(String.self, forKey: .caBundle).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The key file named by `credentials` can be read.
    public func check(in context: BackendContext) throws {
        guard let credentials else { return }
        let path = context.resolve(credentials)
        if access(path, R_OK) != 0 {
            let reason = String(cString: strerror(errno))
            throw BackendOptionError(key: CodingKeys.credentials.stringValue, "credentials file \(path) cannot be read (\(reason)): fix the path "
                + "(relative to the manifest's folder), or leave credentials out to use the environment's")
        }
    }

    public var warnings: [String] { insecureSkipTLSVerify == true ? [GCSBackend.insecureTLSWarning] : [] }

    /// The CA bundle and key file the options name, and the key file of the environment.
    public func reads(in context: BackendContext) -> [BackendRead] {
        var reads: [BackendRead] = []
        if let caBundle { reads.append(BackendRead(path: context.resolve(caBundle), what: "the CA bundle", isTree: true)) }
        if let credentials { reads.append(BackendRead(path: context.resolve(credentials), what: "the credentials file", isTree: false)) }
        if let path = context.environment["GOOGLE_APPLICATION_CREDENTIALS"], !path.isEmpty {
            reads.append(BackendRead(path: URL(fileURLWithPath: path).path, what: "$GOOGLE_APPLICATION_CREDENTIALS", isTree: true))
        }
        return reads
    }
}

extension GCSBackend {
    /// `gs://BUCKET`: Cloud Storage's JSON API (or an emulator's, `STORAGE_EMULATOR_HOST`).
    static let registration = BackendRegistration(
        scheme: "gs", urlForm: .bucket, forms: ["gs://BUCKET"], copyForm: "gs://BUCKET/PATH", options: GCSOptions.self,
        capabilities: capabilities(HTTPTransports.standard, caBundle: nil), factory: { context in try GCSBackend(context) })

    /// What a GCS backend can do: its uploads run best where its transport answers (the HTTP
    /// engine's thread); objects carry MD5 and CRC32C; a resumable session's URL is continued
    /// by any process.
    static func capabilities(_ transport: any HTTPTransport, caBundle: String?) -> BackendCapabilities {
        BackendCapabilities(preferredExecutor: transport.preferredExecutor, checksums: [.md5, .crc32c], resumesAcrossProcesses: true,
                            caBundle: caBundle, copiesObjects: true)
    }

    public var capabilities: BackendCapabilities { Self.capabilities(configuration.transport, caBundle: configuration.caBundle) }

    /// A backend for a job's `gs://` storage: `credentials` over `GOOGLE_APPLICATION_CREDENTIALS`,
    /// the context's CA bundle over `caBundle` over the environment's.
    /// - Throws: `BackendOptionError` at `caBundle` or `credentials` for a file that cannot be read.
    convenience init(_ context: BackendContext) throws {
        let options = context.options(as: GCSOptions.self)
        try options.check(in: context)
        var environment = context.environment
        if let credentials = options.credentials { environment["GOOGLE_APPLICATION_CREDENTIALS"] = context.resolve(credentials) }
        let bundle = try context.caBundle(named: options.caBundle, key: GCSOptions.CodingKeys.caBundle.stringValue)
        var configuration = try Configuration.fromEnvironment(bucket: context.location.bucket, environment, caBundle: bundle)
        if let threshold = options.multipartThreshold { configuration.multipartThreshold = threshold }
        if let tokens = options.downloadTokens { configuration.setsDownloadTokens = tokens }
        if let threshold = options.parallelUploadThreshold { configuration.parallelUploadThreshold = threshold }
        switch options.parallelUploads ?? .auto {
        case .auto: configuration.parallelUploadProbe = .standard
        case .always: configuration.parallelUploadProbe = nil
        case .never: configuration.parallelUploadThreshold = nil
        }
        if let concurrency = context.concurrency { configuration.parallelUploadStreams = concurrency }
        if let insecure = options.insecureSkipTLSVerify { configuration.insecureSkipTLSVerify = insecure }
        self.init(configuration)
    }

    public func pointedAtEmulator(host: String, port: Int) -> (any StorageBackend)? {
        var configuration = configuration
        configuration.endpoint = "http://\(host):\(port)"
        configuration.downloadEndpoint = configuration.endpoint
        configuration.credentials = NoCredentials()
        return GCSBackend(configuration)
    }

    /// The warning every run prints while TLS checks are off.
    static let insecureTLSWarning = "TLS certificate checks are off (storage.insecureSkipTLSVerify): anyone on the network "
        + "path can read and change these uploads. Use it only against an emulator; for a private CA or proxy, use caBundle."
}
