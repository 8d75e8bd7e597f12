import Foundation
import HoistHTTP

/// Google Cloud Storage through its JSON API: `gs://BUCKET` URLs, and Firebase Storage buckets,
/// which are GCS buckets. Small objects go up in one multipart request, large ones through a
/// resumable session streamed in a single `PUT` and continued from the server's offset.
public final class GCSBackend: StorageBackend {
    /// How a `GCSBackend` reaches its bucket.
    public struct Configuration: Sendable {
        public var bucket: String
        /// The JSON API's base URL: `https://storage.googleapis.com`, or an emulator's.
        public var endpoint: String
        /// The base of Firebase download URLs.
        public var downloadEndpoint: String
        public var credentials: any AccessTokenProvider
        /// Objects up to this size go up in one multipart request; larger ones resumably.
        public var multipartThreshold: Int64 = 8 << 20
        /// The largest `PUT` of a resumable session (rounded down to 256 KiB); nil sends the rest at once.
        public var chunkSize: Int64?
        /// Objects of at least this size go up as parallel composite uploads (`GCSParallelSession`):
        /// parts sent at once as temporary objects, joined by `compose`. nil: one stream always.
        /// 150 MiB by default, as gcloud's `parallel_composite_upload_threshold`.
        public var parallelUploadThreshold: Int64? = 150 << 20
        /// How many parts of one parallel upload are sent at once (a job's `upload.concurrency`).
        public var parallelUploadStreams = 4
        /// How many parts a parallel upload is cut into; nil: one per stream.
        public var parallelUploadParts: Int?
        /// `parallelUploads: auto` (a manifest's default): a file from the threshold on starts as
        /// one stream, and goes parallel only when its first bytes show the stream slow
        /// (`GCSAutoSession`). nil: parallel from the threshold on, always.
        public var parallelUploadProbe: GCSParallelProbe?
        /// Set custom metadata `firebaseStorageDownloadTokens` to a fresh UUID on each upload.
        public var setsDownloadTokens = true
        /// Skip TLS certificate checks (only for a job that asks for it by name).
        public var insecureSkipTLSVerify = false
        /// A PEM file of CA certificates to trust instead of the system store: a private CA, or
        /// the CA of a proxy that re-signs TLS; or a folder of them hashed by `openssl rehash`.
        /// nil: the system store.
        public var caBundle: String?
        /// Seconds without a byte moving before a request is given up and retried.
        public var stallTimeout: Double = 60
        /// What sends the requests: the process's HTTP engine, or a test's answers.
        public var transport: any HTTPTransport = HTTPTransports.standard

        public init(bucket: String, endpoint: String = "https://storage.googleapis.com",
                    downloadEndpoint: String = "https://firebasestorage.googleapis.com:443",
                    credentials: any AccessTokenProvider = NoCredentials()) {
            self.bucket = bucket
            self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
            self.downloadEndpoint = downloadEndpoint.hasSuffix("/") ? String(downloadEndpoint.dropLast()) : downloadEndpoint
            self.credentials = credentials
        }

        /// As Google's clients read the environment: `STORAGE_EMULATOR_HOST` (`host:port` or a URL)
        /// points both the API and download URLs at an emulator, without credentials. The CA
        /// bundle is `caBundle` when given, else the one `CURL_CA_BUNDLE`, `SSL_CERT_FILE` or `SSL_CERT_DIR` names
        /// (`HTTPRequest.caBundle(fromEnvironment:)`), else the system store.
        public static func fromEnvironment(bucket: String, _ environment: [String: String] = ProcessInfo.processInfo.environment,
                                           caBundle: String? = nil, transport: any HTTPTransport = HTTPTransports.standard) throws
            -> Configuration
        {
            let bundle = caBundle ?? HTTPRequest.caBundle(fromEnvironment: environment)
            let credentials = try credentialsFromEnvironment(environment, caBundle: bundle, transport: transport)
            var configuration: Configuration
            if let host = environment["STORAGE_EMULATOR_HOST"], !host.isEmpty {
                let base = host.contains("://") ? host : "http://\(host)"
                configuration = Configuration(bucket: bucket, endpoint: base, downloadEndpoint: base, credentials: credentials)
            } else {
                configuration = Configuration(bucket: bucket, credentials: credentials)
            }
            configuration.caBundle = bundle
            configuration.transport = transport
            return configuration
        }
    }

    public let configuration: Configuration
    public var bucket: String { configuration.bucket }

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        endpointOrigin = HTTPOrigin(configuration.endpoint)
        endpointPrefix = endpointOrigin == nil ? nil : Array((configuration.endpoint + "/").utf8)
    }

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        try await startUpload(to: path, attributes: attributes, size: size, chunkSize: nil)
    }

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64, chunkSize: Int64?) async throws
        -> any UploadSession
    {
        let resource = uploadResource(path, attributes)
        if size <= configuration.multipartThreshold, size <= chunkSize ?? .max {
            return GCSMultipartSession(backend: self, resource: resource, size: size)
        }
        if chunkSize == nil, let partSize = parallelPartSize(for: size), let probe = configuration.parallelUploadProbe, probe.bytes < size {
            let location = try await startSession(to: path, resource: resource, size: size)
            return GCSAutoSession(backend: self, stream: GCSResumableSession(backend: self, id: location, path: path, size: size,
                                                                             contentType: resource.contentType!),
                                  path: path, resource: resource, size: size, partSize: partSize, probe: probe)
        }
        if chunkSize == nil, let partSize = parallelPartSize(for: size) {
            return try await GCSParallelSession.start(backend: self, path: path, resource: resource, size: size, partSize: partSize)
        }
        let location = try await startSession(to: path, resource: resource, size: size)
        return GCSResumableSession(backend: self, id: location, path: path, size: size, contentType: resource.contentType!)
    }

    /// The object's resource as an upload writes it: the attributes' writable fields, its name,
    /// a content type, and a fresh download token unless told otherwise.
    private func uploadResource(_ path: String, _ attributes: ObjectResource) -> ObjectResource {
        var resource = attributes.writable
        resource.name = path
        if resource.contentType == nil { resource.contentType = ContentType.fallback }
        if configuration.setsDownloadTokens, resource.metadata?[Self.downloadTokensKey] == nil {
            resource.metadata = (resource.metadata ?? [:]).merging([Self.downloadTokensKey: RandomID.lowercased()]) { a, _ in a }
        }
        return resource
    }

    public func resumeUpload(id: String) async throws -> any UploadSession {
        try await resume(id: id, path: nil)
    }

    /// A session URL from a journal (or any caller) is checked as a server's `Location` is
    /// (`sessionURLProblem`): one elsewhere is `objectNotFound`, so the task starts a new
    /// session. Its object must be `path` when it finishes (`verify`): a session URL does not
    /// say its object before then.
    public func resumeUpload(id: String, for path: String) async throws -> any UploadSession {
        try await resume(id: id, path: path)
    }

    /// A parallel upload's id (`GCSParallelSession.Plan`) continues with the object's metadata
    /// made again from `attributes` (a journal keeps no download token); its every part's URL is
    /// checked as a session URL, and its object must be `path`.
    public func resumeUpload(id: String, for path: String, attributes: ObjectResource) async throws -> any UploadSession {
        guard id.hasPrefix(GCSParallelSession.Plan.prefix) else { return try await resume(id: id, path: path) }
        guard let plan = GCSParallelSession.Plan(id: id) else {
            throw StorageFailure(.objectNotFound, "Upload session cannot be resumed: the parallel upload's id is not one Hoist wrote.",
                                 details: ["bucket": bucket])
        }
        guard plan.path == path else {
            throw StorageFailure(.invalidArgument, "Upload session cannot be resumed: it is another object's.", details: ["bucket": bucket])
        }
        if let problem = plan.urls.lazy.compactMap(sessionURLProblem).first {
            throw StorageFailure(.objectNotFound, "Upload session cannot be resumed: \(problem)", details: ["bucket": bucket])
        }
        return GCSParallelSession(backend: self, plan: plan, resource: uploadResource(path, attributes), started: false)
    }

    private func resume(id: String, path: String?) async throws -> any UploadSession {
        if id.hasPrefix(GCSParallelSession.Plan.prefix) {
            guard let path else {
                throw StorageFailure(.objectNotFound, "A parallel upload is resumed with its object's metadata.", details: ["bucket": bucket])
            }
            return try await resumeUpload(id: id, for: path, attributes: ObjectResource())
        }
        if let problem = sessionURLProblem(id) {
            throw StorageFailure(.objectNotFound, "Upload session cannot be resumed: \(problem)", details: ["bucket": bucket])
        }
        return GCSResumableSession(backend: self, id: id, path: path, size: nil, contentType: nil)
    }

    /// Why `url` cannot be a session URL here, or nil when it can: a session URL, a server's
    /// `Location` or a journal's row, must be http(s) on the endpoint's own scheme, host and port,
    /// with no user or password, space, backslash or control character. The session gets the
    /// file's bytes (and the token, were it sent there): they go to the host the job names, no
    /// other. (The message shows the URL's origin, not its path: session ids are credentials.)
    func sessionURLProblem(_ url: String) -> String? {
        guard let origin = HTTPOrigin(url) else {
            let scheme = url.range(of: "://").map { url[..<$0.lowerBound] }.map { String($0.prefix(12).map { $0.isLetter ? $0 : "?" }) }
            return "the session URL is not a plain http(s) URL" + (scheme.map { " (scheme \($0))" } ?? "")
                + " on the endpoint \(configuration.endpoint)."
        }
        guard let endpoint = endpointOrigin, origin.sameOrigin(endpoint) else {
            return "the session URL is on \(origin), not on the endpoint \(configuration.endpoint)."
        }
        // The bucket's upload path, as Cloud Storage and the emulators write it. (The server
        // finds a session by its upload_id: this refuses a URL that names another bucket; a
        // session of another object is caught when it finishes, `verify`.)
        let uploads = "\(endpoint.target)/upload/storage/v1/b/\(Self.encode(bucket))/o?"
        guard origin.target.hasPrefix(uploads) else {
            return "the session URL is not one of bucket \(bucket)'s uploads (\(uploads)...)."
        }
        return nil
    }

    /// The endpoint's origin: requests to it carry the credentials; session URLs must be on it.
    private let endpointOrigin: HTTPOrigin?
    /// `ENDPOINT/`: a URL that begins so has the endpoint's authority (it ends at that `/`), so
    /// its origin; most requests are told so without parsing their URL.
    private let endpointPrefix: [UInt8]?

    private static func bytes(_ text: Span<UInt8>, begin prefix: Span<UInt8>) -> Bool {
        guard text.count >= prefix.count else { return false }
        for index in prefix.indices where text[index] != prefix[index] { return false }
        return true
    }

    /// Whether `url` is on the endpoint's origin (the one the credentials' token may go to).
    func isOnEndpointOrigin(_ url: String) -> Bool {
        if let endpointPrefix, Self.bytes(url.utf8Span.span, begin: endpointPrefix.span) { return true }
        return HTTPOrigin(url)?.sameOrigin(endpointOrigin) == true
    }

    /// One bucket `GET`, with short timeouts: no credentials, an unreachable host, refused
    /// credentials or a missing bucket each fail at once with what to do. A 403 passes: an
    /// upload-only account may not read the bucket, yet its credentials work.
    public func checkAccess() async throws {
        let endpoint = configuration.endpoint
        if configuration.credentials is NoCredentials, endpoint == "https://storage.googleapis.com" {
            throw StorageFailure(
                .unauthenticated,
                "No credentials for gs://\(bucket): set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file "
                    + "(or storage.credentials in the job), or GOOGLE_OAUTH_ACCESS_TOKEN to a token; for an emulator, "
                    + "set STORAGE_EMULATOR_HOST.", details: ["bucket": bucket])
        }
        var request = HTTPRequest(method: "GET", url: "\(endpoint)/storage/v1/b/\(Self.encode(bucket))?fields=name")
        request.connectTimeout = 5
        request.stallTimeout = 8
        let response: HTTPResponse
        do {
            response = try await send(request)
        } catch let failure as StorageFailure where failure.noAnswer {
            throw HTTPBackend.unreachable(failure, service: "Cloud Storage", endpoint: endpoint, settings: "STORAGE_EMULATOR_HOST", bucket: bucket)
        }
        switch response.status {
        case 200, 403:
            return
        case 401:
            throw StorageFailure(
                .unauthenticated,
                "Cloud Storage refused the credentials (401) for gs://\(bucket): check the key file or token, and that it has not expired.",
                httpStatus: 401, responseBody: response.bodyText, details: ["bucket": bucket])
        case 404:
            throw StorageFailure(
                .bucketNotFound, "Bucket \(bucket) does not exist at \(endpoint): check storage.url (gs://BUCKET).",
                httpStatus: 404, details: ["bucket": bucket])
        default:
            throw failure(response, object: nil, bucketLevel: true)
        }
    }

    public func delete(_ path: String, generation: Int64?) async throws {
        var url = objectURL(path)
        if let generation { url += "?ifGenerationMatch=\(generation)" }
        let response = try await send(HTTPRequest(method: "DELETE", url: url))
        guard [200, 204, 404, 412].contains(response.status) else { throw failure(response, object: path, bucketLevel: false) }
    }

    /// `DELETE ?ifGenerationMatch=G`: 412 is another generation (left alone), 404 no object.
    /// The object's generation is read first too: fake-gcs-server ignores `ifGenerationMatch`
    /// on a delete (GCS itself makes the check and the delete one step).
    public func deleteObject(_ path: String, generation: Int64) async throws -> DeleteOutcome {
        do {
            guard try await metadata(of: path).generation == generation else { return .changed }
        } catch let failure as StorageFailure where failure.code == .objectNotFound {
            return .absent
        }
        let response = try await send(HTTPRequest(method: "DELETE", url: objectURL(path) + "?ifGenerationMatch=\(generation)"))
        guard let outcome = DeleteOutcome(deleteStatus: response.status) else { throw failure(response, object: path, bucketLevel: false) }
        return outcome
    }

    /// `objects.rewrite` with no body (the server copies the source's metadata, its download
    /// token included), called again with the `rewriteToken` of each answer until `done`, at most
    /// `rewriteRounds` times. The source is read first: its generation must be `generation` when
    /// given (fake-gcs-server and gcp-storage-emulator ignore `ifSourceGenerationMatch`:
    /// `CopyPreconditionTests`), and the rewrite is conditional on the generation read, whose CRC32C and MD5
    /// the copy must then have; a copy that has not is deleted (that generation).
    public func copy(from source: String, to destination: String, ifSourceGeneration generation: Int64?) async throws -> CopyOutcome {
        let stored = try await metadata(of: source)
        if let generation, stored.generation != generation { return .sourceChanged }
        guard let read = stored.generation else {
            throw StorageFailure(.unknown, "Cloud Storage described \(source) without a generation.", details: ["bucket": bucket, "object": source])
        }
        let url = objectURL(source) + "/rewriteTo/b/\(Self.encode(bucket))/o/\(Self.encode(destination))?ifSourceGenerationMatch=\(read)"
        var token: String?
        for _ in 0..<Self.rewriteRounds {
            let response = try await send(HTTPRequest(method: "POST", url: url + (token.map { "&rewriteToken=\(Self.encode($0))" } ?? "")))
            if response.status == 412 {
                guard generation == nil else { return .sourceChanged }
                throw StorageFailure(.unknown, "Object \(source) changed while it was copied.", retryable: true, httpStatus: 412,
                                     details: ["bucket": bucket, "object": source])
            }
            guard response.status == 200 else { throw failure(response, object: source, bucketLevel: false) }
            guard let answer = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
                throw StorageFailure(.unknown, "Cloud Storage answered a rewrite with something else than JSON.", httpStatus: response.status,
                                     responseBody: String(response.bodyText.prefix(500)), details: ["bucket": bucket, "object": destination])
            }
            if answer["done"] as? Bool == true, let body = answer["resource"] as? [String: Any],
               let copied = try? ObjectResource(json: JSONSerialization.data(withJSONObject: body)) {
                guard copied.bucket == bucket, copied.name == destination else {
                    throw StorageFailure(.unknown, "Cloud Storage's rewrite of \(source) described another object than \(destination).",
                                         details: ["bucket": bucket, "object": destination])
                }
                if let why = stored.copyMismatch(copied) {
                    try? await delete(destination, generation: copied.generation)
                    throw ObjectResource.copyFailure(why, bucket: bucket, source: source, destination: destination, deleted: true)
                }
                return .copied(copied)
            }
            guard let next = answer["rewriteToken"] as? String, (1...4096).contains(next.utf8.count) else {
                throw StorageFailure(.unknown, "Cloud Storage answered a rewrite of \(source) neither done nor with a token to go on.",
                                     httpStatus: response.status, details: ["bucket": bucket, "object": destination])
            }
            token = next
        }
        throw StorageFailure(.unknown, "Cloud Storage did not finish copying \(source) to \(destination) in \(Self.rewriteRounds) rewrite calls.",
                             retryable: true, details: ["bucket": bucket, "object": destination])
    }

    /// The most `objects.rewrite` calls one copy makes: Cloud Storage copies within a location
    /// and storage class in one, and some GiB a call otherwise.
    static let rewriteRounds = 1_000

    /// `objects.list` with `prefix`, 500 names a page (`fields` keeps each answer small where
    /// the server honours it; the engine bounds it anyway). Names and generations are checked
    /// as they are read: an item that is not an object's is refused.
    public func list(prefix: String, page: String?) async throws -> ObjectListing {
        var url = "\(configuration.endpoint)/storage/v1/b/\(Self.encode(bucket))/o?prefix=\(Self.encode(prefix))&maxResults=500"
            + "&fields=\(Self.encode("items(name,generation,size),nextPageToken"))"
        if let page { url += "&pageToken=\(Self.encode(page))" }
        let response = try await send(HTTPRequest(method: "GET", url: url))
        guard response.status == 200 else { throw failure(response, object: nil, bucketLevel: true) }
        guard let answer = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
            throw StorageFailure(.unknown, "Cloud Storage answered a listing with something else than JSON.", httpStatus: response.status,
                                 responseBody: String(response.bodyText.prefix(500)), details: ["bucket": bucket])
        }
        var objects: [ListedObject] = []
        for item in answer["items"] as? [Any] ?? [] {
            guard let item = item as? [String: Any], let name = item["name"] as? String, name.hasPrefix(prefix) else {
                throw StorageFailure(.unknown, "Cloud Storage listed an object outside \(prefix) or without a name.", details: ["bucket": bucket])
            }
            let generation = (item["generation"] as? String).flatMap { Int64($0) } ?? (item["generation"] as? NSNumber)?.int64Value
            let size = (item["size"] as? String).flatMap { Int64($0) } ?? (item["size"] as? NSNumber)?.int64Value
            objects.append(ListedObject(path: name, generation: generation, size: size))
        }
        let next = answer["nextPageToken"] as? String
        return ObjectListing(objects: objects, next: next.flatMap { $0.isEmpty || $0.count > 4096 ? nil : $0 })
    }

    public func metadata(of path: String) async throws -> ObjectResource {
        let response = try await send(HTTPRequest(method: "GET", url: objectURL(path)))
        guard response.status == 200 else { throw failure(response, object: path, bucketLevel: false) }
        return try decodeResource(response)
    }

    public func downloadURL(for path: String, stored: ObjectResource) async throws -> URL {
        guard let token = stored.metadata?[Self.downloadTokensKey]?.split(separator: ",").first else {
            return try await downloadURL(for: path)
        }
        return try firebaseURL(path, token: String(token))
    }

    private func firebaseURL(_ path: String, token: String) throws -> URL {
        let link = "\(configuration.downloadEndpoint)/v0/b/\(Self.encodeForDownload(bucket))/o/"
            + "\(Self.encodeForDownload(path))?alt=media&token=\(token)"
        guard let url = URL(string: link) else { throw StorageFailure(.internalError, "Bad download URL \(link).") }
        return url
    }

    public func downloadURL(for path: String) async throws -> URL {
        var resource = try await metadata(of: path)
        var token = resource.metadata?[Self.downloadTokensKey]?.split(separator: ",").first.map(String.init)
        if token == nil {
            // An object uploaded without a token (by another tool): give it one, as Firebase does.
            let fresh = UUID().uuidString.lowercased()
            var request = HTTPRequest(method: "PATCH", url: objectURL(path), headers: [("Content-Type", "application/json")])
            request.body = [.data(try JSONSerialization.data(withJSONObject: ["metadata": [Self.downloadTokensKey: fresh]]))]
            let response = try await send(request)
            guard response.status == 200 else { throw failure(response, object: path, bucketLevel: false) }
            resource = try decodeResource(response)
            token = fresh
        }
        return try firebaseURL(path, token: token!)
    }

    /// The custom metadata key that holds Firebase download tokens.
    public static let downloadTokensKey = ObjectResource.downloadTokensKey

    // MARK: - Requests

    func objectURL(_ path: String) -> String {
        "\(configuration.endpoint)/storage/v1/b/\(Self.encode(bucket))/o/\(Self.encode(path))"
    }

    /// Sends a request with the credentials' token; transport errors become `StorageFailure`s
    /// (a cancelled transfer the `cancelled` error).
    func send(_ request: HTTPRequest, hooks: TransferHooks = TransferHooks()) async throws -> HTTPResponse {
        var request = request
        // The token goes to the endpoint's own origin only (every request here is to it; a
        // session URL elsewhere is refused before it is used).
        if isOnEndpointOrigin(request.url), let token = try await configuration.credentials.accessToken() {
            request.headers.append(("Authorization", "Bearer \(token)"))
        }
        request.insecureSkipTLSVerify = configuration.insecureSkipTLSVerify
        request.caBundle = configuration.caBundle
        // The shorter of the request's (the access check's 8 s) and the configuration's.
        request.stallTimeout = min(request.stallTimeout, configuration.stallTimeout)
        return try await HTTPBackend.perform(request, on: configuration.transport, hooks: hooks, service: "Cloud Storage", bucket: bucket)
    }

    func decodeResource(_ response: HTTPResponse) throws -> ObjectResource {
        do {
            return try ObjectResource(json: response.body)
        } catch {
            throw StorageFailure(.unknown, "Invalid data returned from the server: \(printable(response.bodyText, limit: outsideTextLimit))",
                                 httpStatus: response.status, responseBody: response.bodyText)
        }
    }

    /// The storage error for a server's answer: 401 unauthenticated, 402 quotaExceeded,
    /// 403 unauthorized, 404 bucketNotFound (bucket-level calls) or objectNotFound; 408, 429 and
    /// 5xx are retryable, with the server's `Retry-After`.
    func failure(_ response: HTTPResponse, object: String?, bucketLevel: Bool) -> StorageFailure {
        struct GCSError: Decodable {
            struct Detail: Decodable { let message: String? }
            let error: Detail?
        }
        // The server's words: one line, bounded (a message Hoist prints must not forge its lines).
        let serverMessage = (try? JSONDecoder().decode(GCSError.self, from: response.body))?.error?.message
            .map { printable($0, limit: outsideTextLimit) }
        let status = response.status
        let code: StorageErrorCode
        let message: String
        switch status {
        case 401:
            code = .unauthenticated
            message = "User is not authenticated, please authenticate and try again."
        case 402:
            code = .quotaExceeded
            message = "Quota for bucket \(bucket) exceeded."
        case 403:
            code = .unauthorized
            message = "User does not have permission to access gs://\(bucket)/\(object ?? "")."
        case 404 where bucketLevel:
            code = .bucketNotFound
            message = "Bucket \(bucket) does not exist."
        case 404:
            code = .objectNotFound
            message = "Object \(object ?? "") does not exist."
        default:   // 408, 429 and 5xx among them: retryable, below
            code = .unknown
            message = "Cloud Storage answered \(status)" + (serverMessage.map { ": \($0)" } ?? ".")
        }
        var details = ["bucket": bucket]
        if let object { details["object"] = object }
        let retryable = status == 408 || status == 429 || status >= 500
        return StorageFailure(
            code, message, retryable: retryable,
            retryAfter: retryable ? response.header("Retry-After").flatMap(Self.parseRetryAfter) : nil,
            httpStatus: status, responseBody: response.bodyText, details: details)
    }

    /// `Retry-After` as seconds or an HTTP date.
    static func parseRetryAfter(_ value: String) -> TimeInterval? {
        if let seconds = TimeInterval(value.trimmingCharacters(in: .whitespaces)) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters (so `/` is `%2F`), as
    /// object names are written in JSON API and download URLs.
    public static func encode(_ text: String) -> String {
        percentEncode(text, keeping: unreserved)
    }

    /// The unreserved characters, by byte: A-Z a-z 0-9 - . _ ~
    private static let unreserved: [Bool] = (0..<256).map { byte in
        let scalar = Unicode.Scalar(UInt8(byte))
        return scalar.isASCII && (("A"..."Z").contains(scalar) || ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar)
            || "-._~".unicodeScalars.contains(scalar))
    }

    /// Percent-encodes as FirebaseStorage writes download URLs: the unreserved characters and
    /// `!$'()*,=:@` stay as they are (`/`, `&`, `+`, `;` and space are escaped).
    static func encodeForDownload(_ text: String) -> String {
        percentEncode(text, keeping: firebaseAllowed)
    }

    private static let firebaseAllowed: [Bool] = (0..<256).map { byte in
        unreserved[byte] || "!$'()*,=:@".utf8.contains(UInt8(byte))
    }

    /// `text`'s UTF-8 with every byte not in `keep` written `%XX` (uppercase hex), as Foundation's
    /// `addingPercentEncoding(withAllowedCharacters:)` does for an ASCII set, without its
    /// NSString bridging (once per request, it showed in profiles of small uploads).
    static func percentEncode(_ text: String, keeping keep: [Bool]) -> String {
        var text = text
        return text.withUTF8 { bytes in
            if bytes.allSatisfy({ keep[Int($0)] }) { return String(decoding: bytes, as: UTF8.self) }
            let hex = Array("0123456789ABCDEF".utf8)
            var out = [UInt8]()
            out.reserveCapacity(bytes.count * 3)
            for byte in bytes {
                if keep[Int(byte)] {
                    out.append(byte)
                } else {
                    out.append(UInt8(ascii: "%"))
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                }
            }
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// Checks the stored object against the whole local source: its size and its CRC32C must
    /// equal the source's (MD5 is not compared: GCS gives no MD5 for composite objects and
    /// recommends CRC32C, and hashing MD5 took a CPU core's share from large uploads). Bytes this
    /// process never sent (a session resumed after a restart, or one the server finished on a
    /// status query) are read back from the source. On a mismatch, deletes the object (this
    /// generation only) and throws `nonMatchingChecksum`, which the task answers by uploading
    /// again from zero.
    ///
    /// The object must also be the one asked for: this bucket, and `path` when known (a session
    /// from a journal's row may be another object's: whoever can write to the journal could
    /// name one). Another object is never taken
    /// as the upload: when this process's bytes made it (`madeHere`), that generation is deleted
    /// (the file's bytes do not stay under a name the manifest does not give them); one that was
    /// finished before is left alone (it is not ours to delete). Either way the task uploads again
    /// from zero, to its own name (`nonMatchingChecksum`).
    func verify(_ resource: ObjectResource, against frontier: ChecksumFrontier, source: ByteSource, path: String?,
                madeHere: Bool = true) async throws -> ObjectResource
    {
        let name = resource.name ?? ""
        if resource.bucket != bucket || path.map({ $0 != name }) ?? name.isEmpty {
            if madeHere, resource.bucket == bucket, !name.isEmpty { try? await delete(name, generation: resource.generation) }
            throw StorageFailure(
                .nonMatchingChecksum,
                "The upload session finished gs://\(resource.bucket ?? "?")/\(name), not gs://\(bucket)/\(path ?? "?")"
                    + (madeHere ? "; that object was deleted" : "") + ". Uploading again under its own name.",
                details: ["bucket": bucket, "object": path ?? "", "storedBucket": resource.bucket ?? "", "storedObject": name])
        }
        try frontier.catchUp(to: source.size, from: source)
        return try await verify(resource, crc32c: frontier.crc32c, size: source.size, path: name)
    }

    /// Checks a stored object's size and CRC32C against what was sent (`crc32c`, base64): on a
    /// mismatch, deletes that generation and throws `nonMatchingChecksum`.
    func verify(_ resource: ObjectResource, crc32c sent: String, size: Int64, path name: String) async throws -> ObjectResource {
        if resource.size == size, resource.crc32c == sent, resource.bucket == bucket, resource.name == name { return resource }
        try? await delete(resource.name ?? name, generation: resource.generation)
        throw StorageFailure(
            .nonMatchingChecksum,
            "Uploaded object \(name) has \(resource.size.map(String.init) ?? "no") bytes, crc32c \(resource.crc32c ?? "-") "
                + "on the server, but the local file has \(size) bytes, crc32c \(sent). The object was deleted; retry the upload.",
            details: ["bucket": bucket, "object": name, "serverCRC32C": resource.crc32c ?? "", "localCRC32C": sent])
    }
}
