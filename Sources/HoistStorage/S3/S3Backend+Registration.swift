import Foundation
import HoistHTTP

/// The `storage:` keys of an `s3://` job, beside `url` (docs/manifest.md, "storage"). What is
/// not set comes from the AWS environment, as the AWS tools read it (`S3Backend.Configuration`).
public struct S3Options: BackendOptions {
    /// The server: `https://s3.REGION.amazonaws.com` by default; R2, MinIO, GCS's XML API...
    public var endpoint: String?
    public var region: String?
    /// `https://ENDPOINT/BUCKET/KEY` rather than `https://BUCKET.ENDPOINT/KEY` (MinIO and most
    /// servers that are not AWS).
    public var pathStyle: Bool?
    /// A profile of `~/.aws/credentials` and `~/.aws/config` by name, or a credentials file by
    /// path (a value with a `/`, relative to the manifest's folder).
    public var credentials: String?
    /// A PEM file of CA certificates to trust instead of the system store (relative to the
    /// manifest's folder).
    public var caBundle: String?
    /// Objects up to this many bytes go up in one PutObject; larger ones in parts.
    public var multipartThreshold: Int64?
    /// A multipart upload's parts, from 5 MiB (S3's smallest) to 5 GiB; 8 MiB by default (more
    /// when a file would need over 10,000 parts).
    public var partSize: Int64?
    /// Unsigned requests, for a bucket that takes them; never chosen by finding no credentials.
    public var anonymous: Bool?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case endpoint, region, pathStyle, credentials, caBundle, multipartThreshold, partSize, anonymous
    }

    public static var keys: [String] { CodingKeys.allCases.map(\.stringValue) }

    public init() {}

    /// `pathStyle: false` with an endpoint that cannot carry a bucket in its host name is overridden: said.
    public var warnings: [String] {
        guard pathStyle == false, let endpoint, S3Backend.Configuration.cannotCarryABucket(endpoint) else { return [] }
        return ["pathStyle: false is overridden for \(endpoint): an IP address or localhost cannot carry the bucket in its host name, "
            + "so requests name the bucket in the path"]
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        endpoint = try c.decodeIfPresent(String.self, forKey: .endpoint).flatMap { $0.isEmpty ? nil : $0 }
        region = try c.decodeIfPresent(String.self, forKey: .region).flatMap { $0.isEmpty ? nil : $0 }
        pathStyle = try c.decodeIfPresent(Bool.self, forKey: .pathStyle)
        credentials = try c.decodeIfPresent(String.self, forKey: .credentials).flatMap { $0.isEmpty ? nil : $0 }
        caBundle = try c.decodeIfPresent(String.self, forKey: .caBundle).flatMap { $0.isEmpty ? nil : $0 }
        multipartThreshold = try c.decodeIfPresent(ByteSize.self, forKey: .multipartThreshold)?.bytes
        if let multipartThreshold, multipartThreshold < 5 << 20 {
            throw DecodingError.dataCorruptedError(forKey: .multipartThreshold, in: c,
                debugDescription: "multipartThreshold \(multipartThreshold) B is below S3's smallest part, 5 MiB")
        }
        anonymous = try c.decodeIfPresent(Bool.self, forKey: .anonymous)
        partSize = try c.decodeIfPresent(ByteSize.self, forKey: .partSize)?.bytes
        if let partSize, !(S3Backend.Configuration.minimumPartSize...(5 << 30)).contains(partSize) {
            throw DecodingError.dataCorruptedError(forKey: .partSize, in: c,
                debugDescription: "partSize \(partSize) B is outside S3's part sizes, 5 MiB to 5 GiB")
        }
    }

    /// A credentials file given by path, or nil for a profile name.
    func credentialsFile(in context: BackendContext) -> String? {
        credentials.flatMap { $0.contains("/") ? context.resolve($0) : nil }
    }

    /// The options as a configuration is made with them: each one a backend would refuse is
    /// refused at `hoist validate`, named at its key.
    public func check(in context: BackendContext) throws {
        _ = try S3Backend(context)
    }

    public func reads(in context: BackendContext) -> [BackendRead] {
        var reads: [BackendRead] = []
        if let caBundle { reads.append(BackendRead(path: context.resolve(caBundle), what: "the CA bundle", isTree: true)) }
        if let file = credentialsFile(in: context) { reads.append(BackendRead(path: file, what: "the credentials file", isTree: false)) }
        let home = context.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        reads.append(BackendRead(path: home + "/.aws", what: "the AWS configuration folder", isTree: true))
        for name in ["AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE"] {
            if let path = context.environment[name], !path.isEmpty { reads.append(BackendRead(path: path, what: "$\(name)", isTree: false)) }
        }
        // The CA bundle S3 trusts when the options name none (as the AWS CLI does).
        if let path = context.environment["AWS_CA_BUNDLE"], !path.isEmpty { reads.append(BackendRead(path: path, what: "$AWS_CA_BUNDLE", isTree: true)) }
        return reads
    }
}

extension S3Backend {
    /// `s3://BUCKET[/PREFIX]`: Amazon S3 and the servers that speak its API.
    static let registration = BackendRegistration(
        scheme: "s3", urlForm: .bucketAndPrefix, forms: ["s3://BUCKET[/PREFIX]"], copyForm: "s3://BUCKET/PATH", options: S3Options.self,
        capabilities: capabilities) { context in try S3Backend(context) }

    /// Its requests go through the HTTP engine, whose thread is the executor to prefer; PutObject
    /// is checked by MD5 and CRC32C (a multipart object by its parts' MD5s and ETag); a
    /// multipart upload's id lets another process list its parts and send the rest.
    static var capabilities: BackendCapabilities { capabilities(HTTPTransports.standard) }

    static func capabilities(_ transport: any HTTPTransport) -> BackendCapabilities {
        BackendCapabilities(preferredExecutor: transport.preferredExecutor, checksums: [.md5, .crc32c],
                            resumesAcrossProcesses: true, leavesStaleUploads: true, copiesObjects: true)
    }

    public var capabilities: BackendCapabilities {
        var capabilities = Self.capabilities(configuration.transport)
        capabilities.caBundle = configuration.caBundle
        return capabilities
    }

    /// A backend for a job's `s3://` storage: the manifest's options over the environment's.
    /// - Throws: `BackendOptionError` at the key whose value is refused; `StorageFailure` for the
    ///   environment's.
    convenience init(_ context: BackendContext) throws {
        let options = context.options(as: S3Options.self)
        let bundle = try context.caBundle(named: options.caBundle, key: S3Options.CodingKeys.caBundle.stringValue)
        let file = options.credentialsFile(in: context)
        let profile = file == nil ? options.credentials : nil
        var configuration: Configuration
        do {
            configuration = try Configuration.fromEnvironment(
                bucket: context.location.bucket, prefix: context.location.path, context.environment, endpoint: options.endpoint,
                region: options.region, pathStyle: options.pathStyle, profile: profile, credentialsFile: file,
                caBundle: bundle ?? context.environment["AWS_CA_BUNDLE"].flatMap { $0.isEmpty ? nil : $0 })
        } catch let failure as StorageFailure {
            // Name the manifest's key when one of its values is what was refused.
            guard let key = failure.key else { throw failure }
            throw BackendOptionError(key: key, failure.message)
        }
        if let threshold = options.multipartThreshold { configuration.multipartThreshold = threshold }
        if let partSize = options.partSize { configuration.partSize = partSize }
        configuration.anonymous = options.anonymous ?? false
        // A large file's parts go up in the job's slots (`upload.concurrency`), as GCS's parallel uploads do.
        if let concurrency = context.concurrency { configuration.partConcurrency = max(1, concurrency) }
        configuration.readsBackMultipartObjects = context.readsBackUploads
        self.init(configuration)
    }
}
