import Crypto
import Foundation
import HoistHTTP

extension S3MultipartSession {
    /// `CompleteMultipartUpload` with every part's ETag, then the checks that make it `.finished`:
    /// the object's ETag must be the MD5 of the parts' MD5s with their count, and, where the
    /// object is read back (`readsBackMultipartObjects`, or an answer without an ETag), its size
    /// the source's. On a mismatch `nonMatchingChecksum` is thrown and nothing is deleted.
    func complete(_ source: ByteSource, digests: [Int: [UInt8]], path: String, frontier: ChecksumFrontier) async throws
        -> ObjectResource
    {
        var body = "<CompleteMultipartUpload>"
        for number in 1...plan.partCount {
            guard let digest = digests[number] else {
                throw StorageFailure(.unknown, "Part \(number) of \(path) is missing; sending it again.", retryable: true,
                                     details: ["bucket": backend.bucket, "object": path])
            }
            body += "<Part><PartNumber>\(number)</PartNumber><ETag>\"\(SigV4.hex(digest))\"</ETag></Part>"
        }
        body += "</CompleteMultipartUpload>"
        let response = try await backend.send("POST", key: plan.key, query: [("uploadId", plan.uploadID)],
                                              headers: [("Content-Type", "application/xml")], body: [.data(Data(body.utf8))])
        // S3 may answer 200 and put an <Error> in the body (a failure found while it was combining parts).
        let xml = response.status == 200 ? try backend.parse(response) : nil
        guard response.status == 200, xml?.first("Error/Code") == nil else {
            var failure = backend.failure(response, object: path, bucketLevel: false)
            if response.status == 200 { failure.retryable = true }
            throw failure
        }
        var expected = Insecure.MD5()
        for number in 1...plan.partCount { expected.update(data: digests[number]!) }
        let wanted = "\(SigV4.hex(expected.finalize()))-\(plan.partCount)"
        let answered = xml?.first("*/ETag").flatMap(S3ETag.init)
        // An answer without an ETag (Ceph's radosgw answers every Complete with `<ETag></ETag>`)
        // decides nothing: the object is read (`HEAD`) and its ETag and size are the check.
        let readBack = backend.configuration.readsBackMultipartObjects || answered == nil
        let read = readBack ? try await backend.head(path) : nil
        var stored = read?.resource ?? described(answered, size: source.size)
        let storedETag = (answered ?? read?.etag)?.value ?? ""
        if storedETag != wanted || stored.size != source.size {
            // Left in place: an S3 key has no generation, so the object there may be an
            // earlier good version, and deleting it would lose the only copy; the file fails,
            // and is sent again.
            let size = read.map { "\($0.resource.size.map(String.init) ?? "no") bytes, " } ?? ""
            throw StorageFailure(
                .nonMatchingChecksum,
                "Uploaded object \(path) has \(size)ETag \(storedETag.isEmpty ? "-" : storedETag) "
                    + "on the server, but the local file has \(source.size) bytes, parts making ETag \(wanted). "
                    + "The object was left as it is (it may be an earlier version); the upload is to be retried.",
                details: ["bucket": backend.bucket, "object": path, "serverETag": storedETag, "localETag": wanted])
        }
        // The parts' MD5s, each checked by the server, make the object's ETag: its bytes are the
        // source's, so the source's CRC32C is the object's.
        try frontier.catchUp(to: source.size, from: source)
        if stored.crc32c == nil { stored.crc32c = frontier.crc32c }
        return stored
    }

    /// The object as the upload made it, without reading it back: the fields it was given, the
    /// source's size, and Complete's ETag as its generation (a multipart ETag is no MD5).
    private func described(_ etag: S3ETag?, size: Int64) -> ObjectResource {
        var resource = attributes ?? ObjectResource()
        resource.bucket = backend.bucket
        resource.name = path
        resource.size = size
        resource.generation = etag?.generation
        resource.metageneration = etag == nil ? nil : 1
        return resource
    }
}
