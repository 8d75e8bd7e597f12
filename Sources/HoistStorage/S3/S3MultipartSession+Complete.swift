import Crypto
import Foundation
import HoistHTTP

extension S3MultipartSession {
    /// `CompleteMultipartUpload` with every part's ETag (and CRC32C, and the whole object's for a
    /// `FULL_OBJECT` upload, which S3 checks), then the checks that make it `.finished`: the
    /// object's ETag must be the MD5 of the parts' MD5s with their count (unless the server says
    /// it is an SSE-KMS or SSE-C object's, which is no MD5), a whole-object CRC32C the server
    /// reports must be the file's, and, where the object is read back (`readsBackMultipartObjects`,
    /// an answer without an ETag, or an encrypted object's without a CRC32C), its size the
    /// source's. On a mismatch `nonMatchingChecksum` is thrown and nothing is deleted.
    func complete(_ source: ByteSource, parts: [Int: DonePart], path: String, frontier: ChecksumFrontier) async throws
        -> ObjectResource
    {
        // The whole object's CRC32C: sent for the server to check, and compared with any it reports.
        try frontier.catchUp(to: source.size, from: source)
        let crc32c = frontier.crc32c
        var body = "<CompleteMultipartUpload>"
        for number in 1...plan.partCount {
            guard let part = parts[number] else {
                throw StorageFailure(.unknown, "Part \(number) of \(path) is missing; sending it again.", retryable: true,
                                     details: ["bucket": backend.bucket, "object": path])
            }
            body += "<Part><PartNumber>\(number)</PartNumber><ETag>\"\(part.etag)\"</ETag>"
                + (plan.checksummed ? "<ChecksumCRC32C>\(part.sums.crc32c)</ChecksumCRC32C>" : "") + "</Part>"
        }
        body += "</CompleteMultipartUpload>"
        var headers: [(name: String, value: String)] = [("Content-Type", "application/xml")]
        if plan.checksummed { headers += [("x-amz-checksum-crc32c", crc32c), ("x-amz-checksum-type", "FULL_OBJECT")] }
        let response = try await backend.send("POST", key: plan.key, query: [("uploadId", plan.uploadID)],
                                              headers: headers, body: [.data(Data(body.utf8))])
        // S3 may answer 200 and put an <Error> in the body (a failure found while it was combining parts).
        let xml = response.status == 200 ? try backend.parse(response) : nil
        guard response.status == 200, let xml, xml.first("Error/Code") == nil else {
            var failure = backend.failure(response, object: path, bucketLevel: false)
            if response.status == 200 { failure.retryable = true }
            throw failure
        }
        var expected = Insecure.MD5()
        for number in 1...plan.partCount { expected.update(data: parts[number]!.sums.md5) }
        let wanted = "\(SigV4.hex(expected.finalize()))-\(plan.partCount)"
        let answered = xml.first("*/ETag").flatMap(S3ETag.init)
        let encrypted = !S3Headers.etagIsMD5(response)
        let answeredCRC32C = S3Headers.objectCRC32C(xml.first("*/ChecksumCRC32C"), type: xml.first("*/ChecksumType"))
        // An answer without an ETag (Ceph's radosgw answers every Complete with `<ETag></ETag>`)
        // decides nothing: the object is read (`HEAD`) and its ETag and size are the check. An
        // encrypted object's ETag checks nothing: its size is read, unless S3 checked the
        // whole object's CRC32C and said so.
        let readBack = backend.configuration.readsBackMultipartObjects || answered == nil || (encrypted && answeredCRC32C == nil)
        let read = readBack ? try await backend.head(path) : nil
        var stored = read?.resource ?? described(answered, size: source.size)
        // The ETag that is a check (nil: none is, an encrypted object's).
        let etagSaid: String? = answered.map { encrypted ? nil : $0.value } ?? read.flatMap { $0.plainETag ? $0.etag?.value ?? "" : nil }
        let crcsSaid = [answeredCRC32C, read?.resource.crc32c].compactMap { $0 }
        if etagSaid.map({ $0 != wanted }) == true || stored.size != source.size || crcsSaid.contains(where: { $0 != crc32c }) {
            // Left in place: an S3 key has no generation, so the object there may be an
            // earlier good version, and deleting it would lose the only copy; the file fails,
            // and is sent again.
            let size = read.map { "\($0.resource.size.map(String.init) ?? "no") bytes, " } ?? ""
            let etag = etagSaid.map { $0.isEmpty ? "-" : $0 } ?? answered?.value ?? "-"
            let crc = crcsSaid.first { $0 != crc32c }.map { ", CRC32C \($0)" } ?? ""
            throw StorageFailure(
                .nonMatchingChecksum,
                "Uploaded object \(path) has \(size)ETag \(etag)\(crc) on the server, but the local file has \(source.size) bytes, "
                    + "parts making ETag \(wanted), CRC32C \(crc32c). "
                    + "The object was left as it is (it may be an earlier version); the upload is to be retried.",
                details: ["bucket": backend.bucket, "object": path, "serverETag": etag, "localETag": wanted])
        }
        // The parts, each checked by the server, make the object (its ETag, or its CRC32C):
        // its bytes are the source's, so the source's CRC32C is the object's.
        if stored.crc32c == nil { stored.crc32c = crc32c }
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
