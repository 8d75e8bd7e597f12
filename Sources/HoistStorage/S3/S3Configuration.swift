import Foundation
import HoistHTTP

extension S3Backend {
    /// How an `S3Backend` reaches its bucket: every option in one value, so a manifest's
    /// `storage:` keys (endpoint, region, pathStyle, credentials, caBundle) map onto its fields.
    public struct Configuration: Sendable {
        public var bucket: String
        /// Prepended to every object name (`s3://BUCKET/PREFIX`): no leading `/`, ends in `/`
        /// unless empty.
        public var prefix: String
        /// `https://s3.REGION.amazonaws.com` by default; MinIO's, R2's, or `https://storage.googleapis.com`
        /// (GCS's XML API with HMAC keys).
        public var endpoint: String
        public var region: String
        /// Requests to `ENDPOINT/BUCKET/KEY` instead of `BUCKET.ENDPOINT/KEY`; the default for an
        /// endpoint of your own (most S3-compatible servers want it), not for AWS's.
        public var pathStyle: Bool
        /// nil (and no `webIdentity`): requests go unsigned (a public bucket); `checkAccess` names
        /// the ways to set them.
        public var credentials: S3Credentials?
        /// Temporary credentials from a web identity token, used when `credentials` is nil.
        public var webIdentity: S3WebIdentity?
        /// The profile and file the credentials came from, for messages (nil: the environment).
        public var credentialsProfile: String?
        public var credentialsFile: String?
        /// A PEM file (or hashed folder) of CA certificates to trust instead of the system store.
        public var caBundle: String?
        public var insecureSkipTLSVerify = false
        /// Objects up to this size go up in one `PutObject`; larger ones in parts.
        public var multipartThreshold: Int64 = 16 << 20
        /// The size of each part but the last (at least 5 MiB, S3's smallest).
        public var partSize: Int64 = 8 << 20
        /// Parts of one file sent at once.
        public var partConcurrency = 4
        /// Seconds without a byte moving before a request is given up and retried.
        public var stallTimeout: Double = 60
        /// How long a presigned download URL stays valid, in seconds (at most 7 days, S3's limit).
        public var presignExpiry = 7 * 24 * 3600
        /// Send `x-amz-checksum-crc32c` with each `PutObject` and each part for the server to check
        /// and keep, and a multipart object's whole CRC32C on Complete (`FULL_OBJECT`).
        public var sendsCRC32C = true
        /// Read a multipart object back (`HEAD`) after `CompleteMultipartUpload`: its size must be
        /// the file's, and the ETag later reads report is the one recorded (`rclone serve s3`
        /// answers Complete with the parts' ETag and reads with the object's MD5). Off, the
        /// parts' MD5s and Complete's ETag are the check, as a `PutObject`'s answer is; a job that
        /// moves or mirrors turns it on (`BackendContext.readsBackUploads`).
        public var readsBackMultipartObjects = false
        /// Requests go unsigned, whatever credentials the environment holds: a bucket that takes
        /// them (`anonymous: true`). Without it, finding no credentials stops the run at its check.
        public var anonymous = false
        /// Where requests go (the STS exchange's too): the HTTP engine, or what a test puts there.
        public var transport: any HTTPTransport = HTTPTransports.standard

        public static let minimumPartSize: Int64 = 5 << 20
        /// S3's most parts per upload.
        public static let maximumParts: Int64 = 10_000

        public init(bucket: String, prefix: String = "", endpoint: String? = nil, region: String = "us-east-1",
                    pathStyle: Bool? = nil, credentials: S3Credentials? = nil) {
            self.bucket = bucket
            let trimmed = prefix.split(separator: "/").joined(separator: "/")
            self.prefix = trimmed.isEmpty ? "" : trimmed + "/"
            self.region = region
            let custom = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
            self.endpoint = custom ?? "https://s3.\(region).amazonaws.com"
            self.pathStyle = pathStyle ?? (custom != nil || bucket.contains("."))
            if let custom, Self.cannotCarryABucket(custom) { self.pathStyle = true }
            self.credentials = credentials
        }

        /// Whether `endpoint`'s host is an IP address or `localhost`: virtual-host addressing
        /// (`BUCKET.HOST`) makes a name no DNS can serve there, so requests use path style
        /// whatever `pathStyle` says (as rclone does for such servers).
        public static func cannotCarryABucket(_ endpoint: String) -> Bool {
            guard let host = URLComponents(string: endpoint)?.host?.lowercased() else { return false }
            if host == "localhost" || host.hasSuffix(".localhost") || host.contains(":") || host.hasPrefix("[") { return true }
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) }
        }

        /// As the AWS CLI reads its environment, each explicit argument (a manifest's key) first:
        /// credentials from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN` unless a
        /// profile is named, else the profile (`profile`, `AWS_PROFILE`, `default`) of
        /// `credentialsFile` (`AWS_SHARED_CREDENTIALS_FILE`, `~/.aws/credentials`) or of
        /// `~/.aws/config` (`AWS_CONFIG_FILE`), else a web identity (`AWS_WEB_IDENTITY_TOKEN_FILE`
        /// and `AWS_ROLE_ARN`, `S3WebIdentity`); the region from `AWS_REGION`, `AWS_DEFAULT_REGION`,
        /// the profile's `region`, else `us-east-1`; the endpoint from `AWS_ENDPOINT_URL_S3`,
        /// `AWS_ENDPOINT_URL`, the profile's `endpoint_url`, else AWS's. The CA bundle as for GCS
        /// (`HTTPRequest.caBundle(fromEnvironment:)`). Every value is checked (`S3Values`).
        /// - Throws: `StorageFailure`, its `key` the option (`endpoint`, `region`, `credentials`
        ///   for `profile` and `credentialsFile`) when the value given here is what was refused.
        public static func fromEnvironment(
            bucket: String, prefix: String = "", _ environment: [String: String] = ProcessInfo.processInfo.environment,
            endpoint: String? = nil, region: String? = nil, pathStyle: Bool? = nil, profile: String? = nil,
            credentialsFile: String? = nil, caBundle: String? = nil
        ) throws -> Configuration {
            func env(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
            try S3Values.checkBucket(bucket)
            let home = env("HOME") ?? NSHomeDirectory()
            let profileName = profile ?? env("AWS_PROFILE") ?? "default"
            let configFile = env("AWS_CONFIG_FILE") ?? "\(home)/.aws/config"
            let config = try AWSSharedFiles.section(profileName, inFile: configFile, isConfig: true)
            let file = credentialsFile ?? env("AWS_SHARED_CREDENTIALS_FILE") ?? "\(home)/.aws/credentials"
            var credentials: S3Credentials?
            var source: (profile: String?, file: String?) = (nil, nil)
            // The SDKs' order: keys in the environment, a web identity in the environment, then the files.
            let named = profile != nil || credentialsFile != nil
            let webIdentityFirst = !named && env("AWS_WEB_IDENTITY_TOKEN_FILE") != nil && env("AWS_ROLE_ARN") != nil
            if !named, let key = env("AWS_ACCESS_KEY_ID"), let secret = env("AWS_SECRET_ACCESS_KEY") {
                credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN"))
            } else if !webIdentityFirst {
                let keys = try naming(credentialsFile == nil ? nil : "credentials") {
                    try AWSSharedFiles.section(profileName, inFile: file, isConfig: false)
                }
                let found = keys["aws_access_key_id"] != nil ? keys : config
                if let key = found["aws_access_key_id"], let secret = found["aws_secret_access_key"] {
                    credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: found["aws_session_token"])
                    source = (profileName, found == keys ? file : configFile)
                } else if named {
                    var failure = StorageFailure(.unauthenticated, "No credentials for profile \(profileName) in \(file) or \(configFile): "
                                                     + "give it aws_access_key_id and aws_secret_access_key.")
                    failure.key = "credentials"
                    throw failure
                }
            }
            if let credentials { try S3Values.checkCredentials(credentials) }
            let chosenRegion = region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ?? config["region"] ?? "us-east-1"
            try naming(region == nil ? nil : "region") { try S3Values.checkRegion(chosenRegion) }
            let webIdentity = credentials == nil && !named ? try S3WebIdentity.fromEnvironment(env, region: chosenRegion) : nil
            let chosenEndpoint = endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL") ?? config["endpoint_url"]
            if let chosenEndpoint { try naming(endpoint == nil ? nil : "endpoint") { try S3Values.checkEndpoint(chosenEndpoint) } }
            var configuration = Configuration(bucket: bucket, prefix: prefix, endpoint: chosenEndpoint, region: chosenRegion,
                                              pathStyle: pathStyle, credentials: credentials)
            (configuration.credentialsProfile, configuration.credentialsFile) = source
            configuration.webIdentity = webIdentity
            configuration.caBundle = caBundle ?? HTTPRequest.caBundle(fromEnvironment: environment)
            return configuration
        }

        /// `body`'s value; a `StorageFailure` it throws names `key` (when not nil) as the option refused.
        private static func naming<T>(_ key: String?, _ body: () throws -> T) throws -> T {
            do {
                return try body()
            } catch var failure as StorageFailure where key != nil {
                failure.key = key
                throw failure
            }
        }
    }
}

/// Checks of values read from the environment, files and a manifest before they reach a URL,
/// a header or a signature: allow-lists, bounded lengths, one sentence naming the value.
enum S3Values {
    static func checkBucket(_ bucket: String) throws {
        // S3's rules, widened to the legacy names (capitals, `_`) other servers still take.
        guard (3...63).contains(bucket.count), bucket.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._".contains($0)) }),
              bucket.first!.isLetter || bucket.first!.isNumber
        else {
            throw StorageFailure(.invalidArgument, "'\(printable(bucket, limit: 60))' is not an S3 bucket name: 3 to 63 letters, digits, "
                                    + "dots and hyphens, starting with a letter or digit (s3://BUCKET[/PREFIX]).")
        }
    }

    static func checkRegion(_ region: String) throws {
        guard (1...32).contains(region.count), region.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }) else {
            throw StorageFailure(.invalidArgument, "'\(printable(region, limit: 60))' is not an AWS region (like us-east-1): check AWS_REGION, "
                                    + "AWS_DEFAULT_REGION, the profile's region or storage.region.")
        }
    }

    static func checkEndpoint(_ endpoint: String) throws {
        guard let origin = HTTPOrigin(endpoint), !endpoint.contains("@"), !endpoint.contains("?"), !endpoint.contains("#"),
              endpoint.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\\" })
        else {
            throw StorageFailure(.invalidArgument, "'\(printable(endpoint, limit: 60))' is not an S3 endpoint: give an http(s) URL without "
                                    + "user, query or fragment (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3 or storage.endpoint).")
        }
        _ = origin
    }

    static func checkCredentials(_ credentials: S3Credentials) throws {
        guard (1...128).contains(credentials.accessKeyID.count),
              credentials.accessKeyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
        else {
            throw StorageFailure(.invalidArgument, "The AWS access key id is not one (letters and digits): check AWS_ACCESS_KEY_ID or the profile.")
        }
        func plain(_ text: String) -> Bool { text.unicodeScalars.allSatisfy { (0x21..<0x7F).contains($0.value) } }
        guard (1...256).contains(credentials.secretAccessKey.count), plain(credentials.secretAccessKey) else {
            throw StorageFailure(.invalidArgument, "The AWS secret access key holds characters no key has: check AWS_SECRET_ACCESS_KEY or the profile.")
        }
        if let token = credentials.sessionToken, !(token.count <= 8192 && plain(token)) {
            throw StorageFailure(.invalidArgument, "The AWS session token is longer than 8 KiB or holds characters no token has: check AWS_SESSION_TOKEN.")
        }
    }
}
