import Foundation
import HoistHTTP

/// A small object sent in one `PutObject` with `Content-MD5` (and `x-amz-checksum-crc32c`), which
/// the server checks against what arrives (`BadDigest` otherwise: nothing stored). There is
/// nothing on the server until the request completes, so nothing to resume or abandon.
///
/// The headers go before the body, so the checksums are known before a byte is sent. Up to
/// `bufferLimit` bytes, the source is read once, into one buffer that is hashed and then sent
/// (each byte read and hashed once); a larger one is hashed in a read of its own, then read again
/// as it is sent, and the server's check of `Content-MD5` is what ties the two reads together.
struct S3PutSession: UploadSession {
    /// The largest object read whole into memory and sent from there: 1 MiB, the piece
    /// `S3Checksums` reads at a time anyway. A transfer holds at most one such buffer, until its
    /// request ends: `upload.concurrency` MiB in all, at most.
    static let bufferLimit: Int64 = 1 << 20

    let backend: S3Backend
    let resource: ObjectResource
    let headers: [(name: String, value: String)]
    let size: Int64
    let id = "put:" + RandomID.lowercased()

    func confirmedOffset() async throws -> Int64 { 0 }

    func send(
        from source: ByteSource, at offset: Int64, control: TransferControl, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> SendOutcome {
        let path = resource.name ?? ""
        let (sums, body) = try Self.hashedBody(of: source)
        var headers = self.headers
        headers.append(("Content-MD5", Data(sums.md5).base64EncodedString()))
        if backend.configuration.sendsCRC32C {
            // The algorithm named too, as AWS's SDKs do: some servers (moto) keep the checksum only then.
            headers += [("x-amz-checksum-crc32c", sums.crc32c), ("x-amz-sdk-checksum-algorithm", "CRC32C")]
        }
        let size = source.size
        let hooks = TransferHooks(
            onUploadProgress: { sent in progress(min(size, max(0, sent))) }, control: control,
            beforeEnd: { source.unchangedOrWhy() })
        let response = try await backend.send("PUT", key: backend.key(path), headers: headers,
                                              body: body, hooks: hooks)
        guard response.status == 200 else { throw backend.failure(response, object: path, bucketLevel: true) }
        var expected = resource
        expected.size = size
        expected.crc32c = sums.crc32c
        expected.md5Hash = Data(sums.md5).base64EncodedString()
        // The ETag parsed once: the object's description and the check below both read it.
        let etag = response.header("ETag").flatMap(S3ETag.init)
        let stored = try S3Headers.resource(response, bucket: backend.bucket, name: path, given: expected, etag: etag)
        // The server hashed what arrived: an ETag that is an MD5 must be the source's, and a
        // CRC32C it returns must be ours (it would have refused a mismatch; this checks it did).
        // An SSE-KMS or SSE-C answer's ETag is no MD5 (`etagIsMD5`): the `Content-MD5` and CRC32C
        // the server checked before its 200 are then the evidence, with a CRC32C it returns.
        // A mismatch leaves the object in place: an S3 key has no generation, so what is there
        // may be an earlier good version, the only copy; the file fails, to be sent again.
        let md5Differs = S3Headers.etagIsMD5(response) && etag?.parts == nil && etag?.digest.map { $0 != sums.md5 } == true
        if md5Differs || stored.crc32c != sums.crc32c {
            let said = md5Differs ? "MD5 \(etag!.value)" : "CRC32C \(stored.crc32c ?? "-")"
            let ours = md5Differs ? SigV4.hex(sums.md5) : sums.crc32c
            throw StorageFailure(
                .nonMatchingChecksum,
                "Uploaded object \(path) has \(said) on the server, but the local file's is "
                    + "\(ours). The object was left as it is (it may be an earlier version); the upload is to be retried.",
                details: ["bucket": backend.bucket, "object": path])
        }
        return .finished(stored)
    }

    func abandon() async {}

    /// The source's MD5 and CRC32C, and the body that sends those bytes: the buffer they were
    /// taken from, up to `bufferLimit`; above it, the file read again as it is sent.
    private static func hashedBody(of source: ByteSource) throws -> (S3Checksums, [HTTPRequest.BodyPart]) {
        guard source.size > bufferLimit else {
            let (sums, bytes) = try S3Checksums.buffered(source)
            return (sums, bytes.isEmpty ? [] : [.data(bytes, contentOffset: 0)])
        }
        return (try S3Checksums.of(source, from: 0, length: source.size), [source.bodyPart(from: 0)])
    }
}

/// The MD5 (for `Content-MD5` and ETags) and CRC32C (base64, S3's `x-amz-checksum-crc32c`) of a
/// range of a source, read in 1 MiB pieces.
struct S3Checksums: Sendable, Equatable {
    var md5: [UInt8]
    var crc32c: String

    static func of(_ source: ByteSource, from offset: Int64, length: Int64) throws -> S3Checksums {
        var sums = Checksums()
        try read(source, from: offset, length: length) { piece, _ in sums.update(piece) }
        return S3Checksums(md5: sums.md5Digest(), crc32c: sums.crc32cBase64())
    }

    /// The checksums of a whole source and its bytes, read once (in one piece up to 1 MiB; a
    /// source in memory gives its own bytes, not a copy).
    static func buffered(_ source: ByteSource) throws -> (S3Checksums, Data) {
        var sums = Checksums()
        var bytes = Data()
        try read(source, from: 0, length: source.size) { piece, _ in
            sums.update(piece)
            if bytes.isEmpty { bytes = piece } else { bytes.append(piece) }
        }
        return (S3Checksums(md5: sums.md5Digest(), crc32c: sums.crc32cBase64()), bytes)
    }

    /// A part's MD5 and CRC32C, its bytes counted into `frontier` too (the object's CRC32C,
    /// when the part is next in order).
    static func part(of source: ByteSource, from offset: Int64, length: Int64, frontier: ChecksumFrontier) throws -> S3Checksums {
        var sums = Checksums()
        try read(source, from: offset, length: length) { piece, position in
            piece.withUnsafeBytes { bytes in
                sums.update(bytes)
                frontier.add(bytes, at: position)
            }
        }
        return S3Checksums(md5: sums.md5Digest(), crc32c: sums.crc32cBase64())
    }

    /// Feeds `length` bytes of `source` from `offset` to `body`, 1 MiB at a time, with each
    /// piece's place in the object.
    private static func read(_ source: ByteSource, from offset: Int64, length: Int64, _ body: (Data, Int64) -> Void) throws {
        let reader = try source.reader(from: offset)
        var position = offset
        let end = offset + length
        while position < end {
            let piece = try reader.read(upTo: Int(min(Int64(1 << 20), end - position)))
            guard !piece.isEmpty else {
                throw StorageFailure(.invalidArgument, "\(source.filePath ?? "The source") ended at \(position) bytes of \(source.size); nothing was stored.")
            }
            body(piece, position)
            position += Int64(piece.count)
        }
    }
}
