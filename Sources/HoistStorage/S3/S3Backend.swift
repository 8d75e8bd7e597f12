import Crypto
import Foundation
import HoistHTTP

/// Amazon S3 and the servers that speak its API (MinIO, Cloudflare R2, Backblaze B2, Ceph, GCS's
/// XML API with HMAC keys): `s3://BUCKET[/PREFIX]` URLs. Requests are signed with Signature V4
/// (`SigV4`). Objects up to `multipartThreshold` go up in one `PutObject` with `Content-MD5`;
/// larger ones as a multipart upload whose parts go up in parallel (`S3MultipartSession`), which
/// a later process resumes from `ListParts`.
public final class S3Backend: StorageBackend {
    public let configuration: Configuration
    public var bucket: String { configuration.bucket }
    private let endpointOrigin: HTTPOrigin?
    let credentialSource: S3CredentialSource

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        endpointOrigin = HTTPOrigin(configuration.endpoint)
        credentialSource = S3CredentialSource(configuration)
    }

    /// The object key for a reference's path: the URL's prefix, then the path.
    func key(_ path: String) -> String { configuration.prefix + path }

    /// The reference path of a key (the prefix taken off).
    func path(ofKey key: String) -> String {
        key.hasPrefix(configuration.prefix) ? String(key.dropFirst(configuration.prefix.count)) : key
    }

    // MARK: - Uploads

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        try await startUpload(to: path, attributes: attributes, size: size, chunkSize: nil)
    }

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64, chunkSize: Int64?) async throws
        -> any UploadSession
    {
        let resource = uploadAttributes(attributes, path: path)
        let headers = try S3Headers.objectHeaders(resource)
        if size <= configuration.multipartThreshold, size <= chunkSize ?? .max {
            return S3PutSession(backend: self, resource: resource, headers: headers, size: size)
        }
        let partSize = S3MultipartSession.partSize(for: size, configured: configuration.partSize, chunkSize: chunkSize)
        // CRC32C on every part, and the whole object's on Complete, for the server to check
        // (`FULL_OBJECT`: AWS since 2025; servers that do not know it ignore both headers).
        let checksummed = configuration.sendsCRC32C
        let checksums: [(name: String, value: String)] =
            checksummed ? [("x-amz-checksum-algorithm", "CRC32C"), ("x-amz-checksum-type", "FULL_OBJECT")] : []
        let response = try await send("POST", key: key(path), query: [("uploads", "")], headers: headers + checksums)
        guard response.status == 200 else { throw failure(response, object: path, bucketLevel: true) }
        let xml = try parse(response)
        guard let uploadID = xml.first("*/UploadId"), S3MultipartSession.isValidUploadID(uploadID) else {
            throw StorageFailure(.unknown, "S3 answered CreateMultipartUpload without an upload id Hoist accepts.",
                                 httpStatus: response.status, details: ["bucket": bucket, "object": path])
        }
        let state = S3MultipartSession.Plan(key: key(path), uploadID: uploadID, size: size, partSize: partSize, checksummed: checksummed)
        return S3MultipartSession(backend: self, plan: state, path: path, attributes: resource, fresh: true)
    }

    /// The fields an upload sets on its object, named `path`, with a content type.
    private func uploadAttributes(_ attributes: ObjectResource, path: String) -> ObjectResource {
        var resource = attributes.writable
        resource.name = path
        if resource.contentType == nil { resource.contentType = ContentType.fallback }
        return resource
    }

    public func resumeUpload(id: String) async throws -> any UploadSession {
        guard let plan = S3MultipartSession.Plan(id: id) else {
            throw StorageFailure(.objectNotFound, "Upload session cannot be resumed: it is not an S3 multipart upload's id.",
                                 details: ["bucket": bucket])
        }
        return S3MultipartSession(backend: self, plan: plan, path: path(ofKey: plan.key), attributes: nil, fresh: false)
    }

    /// A session id from a journal names its key: one of another object (or outside this URL's
    /// prefix) is refused, as `StorageBackend` asks.
    public func resumeUpload(id: String, for path: String) async throws -> any UploadSession {
        try await resumed(id: id, path: path, attributes: nil)
    }

    /// The same, with the fields the upload was started with: the object's description when it
    /// is not read back (`Configuration.readsBackMultipartObjects`).
    public func resumeUpload(id: String, for path: String, attributes: ObjectResource) async throws -> any UploadSession {
        try await resumed(id: id, path: path, attributes: attributes)
    }

    private func resumed(id: String, path: String, attributes: ObjectResource?) async throws -> any UploadSession {
        guard let plan = S3MultipartSession.Plan(id: id) else { return try await resumeUpload(id: id) }
        guard plan.key == key(path) else {
            throw StorageFailure(.invalidArgument, "The upload session is another object's, not s3://\(bucket)/\(key(path)).",
                                 details: ["bucket": bucket, "object": path])
        }
        return S3MultipartSession(backend: self, plan: plan, path: path, attributes: attributes.map { uploadAttributes($0, path: path) },
                                  fresh: false)
    }

    // MARK: - Objects

    public func metadata(of path: String) async throws -> ObjectResource {
        try await head(path).resource
    }

    /// `HEAD`: the object's description, its ETag as the server gives it, and whether that ETag
    /// is S3's own (not an SSE-KMS or SSE-C object's: `S3Headers.etagIsMD5`).
    func head(_ path: String) async throws -> (resource: ObjectResource, etag: S3ETag?, plainETag: Bool) {
        let response = try await send("HEAD", key: key(path), headers: [("x-amz-checksum-mode", "ENABLED")])
        guard response.status == 200 else { throw failure(response, object: path, bucketLevel: false) }
        let etag = response.header("etag").flatMap(S3ETag.init)
        return (try S3Headers.resource(response, bucket: bucket, name: path, given: nil, etag: etag), etag, S3Headers.etagIsMD5(response))
    }

    /// S3 has no generations: a `generation` is the hash of the object's ETag (`S3Headers`), so
    /// the object is deleted only while it still holds the bytes that ETag names. (Read, then
    /// deleted: a writer in between is not seen. S3's conditional `DeleteObject` is not used,
    /// as S3-compatible servers do not all have it.)
    public func delete(_ path: String, generation: Int64?) async throws {
        if let generation {
            guard let stored = try? await metadata(of: path), stored.generation == generation else { return }
        }
        let response = try await send("DELETE", key: key(path))
        guard [200, 204, 404].contains(response.status) else { throw failure(response, object: path, bucketLevel: false) }
    }

    /// `HEAD` for the ETag, whose hash the generation must be, then `DELETE` with `If-Match`
    /// on that ETag: a server that honours it (AWS since 2024, moto) refuses (412) to delete an
    /// object replaced in between; one that ignores it (`rclone serve s3`) deletes what is
    /// there then, so the window is the time between the two requests
    /// (`S3ConditionalDeleteTests`).
    public func deleteObject(_ path: String, generation: Int64) async throws -> DeleteOutcome {
        let head = try await send("HEAD", key: key(path))
        if head.status == 404 { return .absent }
        guard head.status == 200 else { throw failure(head, object: path, bucketLevel: false) }
        guard let header = head.header("etag"), let etag = S3ETag(header), etag.generation == generation else { return .changed }
        let response = try await send("DELETE", key: key(path), headers: [("If-Match", "\"\(etag.value)\"")])
        guard let outcome = DeleteOutcome(deleteStatus: response.status) else { throw failure(response, object: path, bucketLevel: false) }
        return outcome
    }

    /// `HEAD` of the source (its generation must be `generation` when given), then `CopyObject`
    /// (`x-amz-copy-source`, the bucket and key percent-encoded; the metadata copied, as by
    /// default) conditional on the ETag read (`x-amz-copy-source-if-match`); then a `HEAD` of the
    /// copy, whose CRC32C or MD5 must be the source's: the ETag of a one-part object's copy is
    /// the MD5 the server computed of the copy's bytes. (No `x-amz-checksum-algorithm` asks for
    /// a CRC32C computed anew: the servers tested keep the source's, or none.) An answer of 200 whose body is an `<Error>` (S3 may fail a
    /// copy after it began answering) is a failure. A copy that fails its check is left in place,
    /// as a failed upload's check leaves it: an S3 key has no generation to delete by. Sources
    /// with neither MD5 nor CRC32C (a multipart upload's, on most servers) and sources
    /// over 5 GiB are refused (`CopyObject`'s limit; `UploadPartCopy` is not implemented): the
    /// caller uploads instead.
    public func copy(from source: String, to destination: String, ifSourceGeneration generation: Int64?) async throws -> CopyOutcome {
        let (stored, etag, _) = try await head(source)
        guard let etag else {
            throw StorageFailure(.unknown, "S3 described s3://\(bucket)/\(key(source)) without an ETag Hoist reads.",
                                 details: ["bucket": bucket, "object": source])
        }
        if let generation, etag.generation != generation { return .sourceChanged }
        guard let size = stored.size, size <= Self.largestCopy else {
            throw StorageFailure(.invalidArgument, "s3://\(bucket)/\(key(source)) is larger than 5 GiB, the most S3's CopyObject copies: "
                                    + "upload the file instead.", details: ["bucket": bucket, "object": source])
        }
        // A multipart upload's object (its ETag no MD5) with no CRC32C has nothing a copy could be
        // checked against (AWS and moto give the copy the MD5 of its bytes, radosgw the source's
        // ETag): refused before anything is written.
        guard stored.md5Hash != nil || stored.crc32c != nil else {
            throw StorageFailure(.invalidArgument, "s3://\(bucket)/\(key(source)) carries no MD5 or CRC32C (its ETag \(etag.value) is a "
                                    + "multipart upload's), so a copy could not be verified: upload the file instead.",
                                 details: ["bucket": bucket, "object": source])
        }
        let response = try await send("PUT", key: key(destination), headers: [
            ("x-amz-copy-source", SigV4.encodePath("/\(bucket)/\(key(source))")),
            ("x-amz-copy-source-if-match", "\"\(etag.value)\""),
        ])
        if response.status == 412 {
            guard generation == nil else { return .sourceChanged }
            throw StorageFailure(.unknown, "Object \(source) changed while it was copied.", retryable: true, httpStatus: 412,
                                 details: ["bucket": bucket, "object": source])
        }
        guard response.status == 200 else { throw failure(response, object: source, bucketLevel: false) }
        let xml = try parse(response)
        guard xml.first("Error/Code") == nil, xml.first("CopyObjectResult/ETag").flatMap(S3ETag.init) != nil else {
            throw failure(response, object: source, bucketLevel: false)
        }
        let copied = try await head(destination).resource
        if let why = stored.copyMismatch(copied) {
            throw ObjectResource.copyFailure(why, bucket: bucket, source: source, destination: destination, deleted: false)
        }
        return .copied(copied)
    }

    /// The largest object one `CopyObject` copies.
    static let largestCopy: Int64 = 5 << 30

    /// `ListObjectsV2` under the URL's prefix and `prefix`, 500 keys a page; keys are read back
    /// as paths below the URL's prefix, and one outside it is refused.
    public func list(prefix: String, page: String?) async throws -> ObjectListing {
        var query: [(name: String, value: String)] = [("list-type", "2"), ("max-keys", "500"), ("prefix", key(prefix))]
        if let page { query.append(("continuation-token", page)) }
        let response = try await send("GET", key: nil, query: query)
        guard response.status == 200 else { throw failure(response, object: nil, bucketLevel: true) }
        let xml = try parse(response)
        var objects: [ListedObject] = []
        for record in xml.records("*/Contents") {
            guard let key = record["Key"], key.hasPrefix(self.key(prefix)) else {
                throw StorageFailure(.unknown, "S3 listed a key outside \(self.key(prefix)) or without a name.", details: ["bucket": bucket])
            }
            objects.append(ListedObject(path: path(ofKey: key), generation: record["ETag"].flatMap(S3ETag.init)?.generation,
                                        size: record["Size"].flatMap { Int64($0) }))
        }
        let truncated = xml.first("*/IsTruncated") == "true"
        let next = truncated ? xml.first("*/NextContinuationToken").flatMap { $0.isEmpty || $0.count > 4096 ? nil : $0 } : nil
        return ObjectListing(objects: objects, next: next)
    }

    public func downloadURL(for path: String) async throws -> URL {
        _ = try await metadata(of: path)
        return try presignedURL(path, credentials: try await credentialSource.credentials())
    }

    public func downloadURL(for path: String, stored: ObjectResource) async throws -> URL {
        try presignedURL(path, credentials: try await credentialSource.credentials())
    }

    /// A presigned `GET` of the object, valid `presignExpiry` seconds; without credentials, the
    /// plain URL (a public bucket's).
    func presignedURL(_ path: String, credentials: S3Credentials?, date: Date = Date()) throws -> URL {
        let (url, hostHeader, canonicalPath) = location(key: key(path))
        var link = url
        if let credentials {
            let signer = SigV4(credentials: credentials, region: configuration.region)
            let request = SigV4.Request(method: "GET", path: canonicalPath, headers: [("host", hostHeader)],
                                        payloadHash: SigV4.unsignedPayload)
            link += "?" + signer.presignedQuery(for: request, date: date, expires: min(configuration.presignExpiry, 604_800))
        }
        guard let result = URL(string: link) else { throw StorageFailure(.internalError, "Bad download URL \(link).") }
        return result
    }

    // MARK: - Requests

    /// The URL of `key` (nil: the bucket), the `Host` header curl sends for it, and the path signed.
    func location(key: String?) -> (url: String, host: String, path: String) {
        let origin = endpointOrigin
        let scheme = origin?.scheme ?? "https"
        let defaultPort = scheme == "https" ? 443 : 80
        let port = origin.map { $0.port == defaultPort ? "" : ":\($0.port)" } ?? ""
        let host = origin?.host ?? "s3.amazonaws.com"
        let base = origin.map { $0.target == "/" ? "" : $0.target } ?? ""
        let virtualHost = configuration.pathStyle ? host : "\(bucket).\(host)"
        var path = base + (configuration.pathStyle ? "/\(bucket)" : "")
        if let key { path += "/" + key } else if !configuration.pathStyle { path += "/" }
        let encoded = SigV4.encodePath(path)
        return ("\(scheme)://\(virtualHost)\(port)\(encoded)", "\(virtualHost)\(port)", path)
    }

    /// Signs and sends one request to the bucket (`key` nil) or an object; transport errors
    /// become `StorageFailure`s (a cancelled transfer the `cancelled` error).
    func send(_ method: String, key: String?, query: [(name: String, value: String)] = [],
              headers: [(name: String, value: String)] = [], body: [HTTPRequest.BodyPart] = [],
              hooks: TransferHooks = TransferHooks(), quick: Bool = false, ownConnection: Bool = false) async throws -> HTTPResponse {
        let (url, host, path) = location(key: key)
        // `?uploads`, not `?uploads=`: the signature's canonical form has the `=`, the URL need not.
        let queryText = SigV4.canonicalQuery(query).split(separator: "&").map { $0.hasSuffix("=") ? String($0.dropLast()) : String($0) }
            .joined(separator: "&")
        var request = HTTPRequest(method: method, url: queryText.isEmpty ? url : "\(url)?\(queryText)", headers: headers, body: body)
        if let credentials = try await credentialSource.credentials() {
            let signer = SigV4(credentials: credentials, region: configuration.region)
            let signed = SigV4.Request(method: method, path: path, query: query, headers: headers + [("host", host)],
                                       payloadHash: SigV4.unsignedPayload)
            request.headers += signer.authorizationHeaders(for: signed)
        }
        request.insecureSkipTLSVerify = configuration.insecureSkipTLSVerify
        request.caBundle = configuration.caBundle
        request.stallTimeout = min(quick ? 8 : request.stallTimeout, configuration.stallTimeout)
        if quick { request.connectTimeout = 5 }
        request.ownConnection = ownConnection
        return try await HTTPBackend.perform(request, on: configuration.transport, hooks: hooks,
                                             service: "S3 at \(configuration.endpoint)", bucket: bucket)
    }

    /// An answer's XML, or a failure naming what was wrong with it.
    func parse(_ response: HTTPResponse) throws -> S3XML {
        do {
            return try S3XML(response.body)
        } catch {
            throw StorageFailure(.unknown, "S3 answered with XML Hoist does not read (\(error)).",
                                 httpStatus: response.status, responseBody: String(response.bodyText.prefix(500)), details: ["bucket": bucket])
        }
    }

    /// The storage error for a server's answer (`S3Errors.failure`).
    func failure(_ response: HTTPResponse, object: String?, bucketLevel: Bool) -> StorageFailure {
        S3Errors.failure(response, bucket: bucket, object: object, key: object.map(key), bucketLevel: bucketLevel, region: configuration.region)
    }
}
