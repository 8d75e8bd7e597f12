import Crypto
import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// An S3 server's answers are hostile input: each test is named after what a lying server
/// tries, against Tests/servers/hostilehttp.py answering from a script (no real server lies
/// this way on purpose).
@Suite struct S3HostileServerTests {
    private func backend(_ server: HostileHTTPServer, readsBack: Bool = false) -> S3Backend {
        var configuration = S3Backend.Configuration(bucket: "bkt", endpoint: server.url, region: "us-east-1", pathStyle: true,
                                                    credentials: S3TestServer.credentials)
        configuration.multipartThreshold = 5 << 20
        configuration.partSize = 5 << 20
        configuration.partConcurrency = 1
        configuration.readsBackMultipartObjects = readsBack
        return S3Backend(configuration)
    }

    /// A `raw` script line: an answer with `headers` and `body`, then close.
    private func raw(_ status: Int, _ headers: [String] = [], body: String = "", length: Int? = nil) -> String {
        "raw HTTP/1.1 \(status) X\\r\\n" + headers.map { "\($0)\\r\\n" }.joined()
            + "Content-Length: \(length ?? body.utf8.count)\\r\\nConnection: close\\r\\n\\r\\n" + body
    }

    private func hex(_ data: Data) -> String { Insecure.MD5.hash(data: data).map { String(format: "%02x", $0) }.joined() }

    /// radosgw without `rgw dns name`, asked with virtual-host addressing, answers the pre-flight
    /// listing with the list of all buckets (status 200), which was taken for the bucket's: the
    /// PUTs then went to a bucket named after the host. Only a `ListBucketResult` naming the
    /// bucket passes; anything else says what came back and names `pathStyle`.
    @Test func aPreflightAnsweredWithTheListOfAllBucketsIsRefused() async throws {
        let all = "<?xml version=\"1.0\"?><ListAllMyBucketsResult><Owner><ID>o</ID></Owner><Buckets><Bucket><Name>bkt</Name>"
            + "</Bucket></Buckets></ListAllMyBucketsResult>"
        let other = "<?xml version=\"1.0\"?><ListBucketResult><Name>someone-else</Name><KeyCount>0</KeyCount></ListBucketResult>"
        for (body, said) in [(all, "ListAllMyBucketsResult"), (other, "the listing of bucket someone-else"), ("", "an empty answer")] {
            let server = try HostileHTTPServer(.script([raw(200, ["Content-Type: application/xml"], body: body)]))
            await #expect(throws: (any Error).self, "\(said)") { try await backend(server).checkAccess() }
            do { try await backend(server).checkAccess() } catch {
                #expect("\(error)".contains(said) && "\(error)".contains("pathStyle"), "\(error)")
            }
        }
        let mine = "<?xml version=\"1.0\"?><ListBucketResult><Name>bkt</Name><KeyCount>0</KeyCount></ListBucketResult>"
        let server = try HostileHTTPServer(.script([raw(200, ["Content-Type: application/xml"], body: mine)]))
        try await backend(server).checkAccess()
    }

    /// A failure names the object's whole key, the URL's prefix included: a refused PUT under
    /// `s3://bkt/website/nocreds` said `s3://bkt/a.txt`, a key that does not exist.
    @Test func aFailureNamesTheWholeKey() async throws {
        let server = try HostileHTTPServer(.script([raw(403, ["Content-Type: application/xml"],
                                                       body: "<Error><Code>AccessDenied</Code><Message>no</Message></Error>")]))
        var configuration = S3Backend.Configuration(bucket: "bkt", prefix: "website/nocreds", endpoint: server.url, region: "us-east-1",
                                                    pathStyle: true, credentials: S3TestServer.credentials)
        configuration.partConcurrency = 1
        let data = Data("hello".utf8)
        let session = try await S3Backend(configuration).startUpload(to: "a.txt", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            "\($0)".contains("s3://bkt/website/nocreds/a.txt")
        }
    }

    /// The object a multipart upload made has an ETag that is not the MD5 of the parts' MD5s:
    /// it is not the file, so the upload fails with `nonMatchingChecksum`; but nothing is
    /// deleted, as an S3 key has no generation and the object there may be an earlier good
    /// version, the only copy: no request after Complete.
    @Test func aMultipartETagThatIsNotThePartsFailsAndDeletesNothing() async throws {
        let data = patternData(6 << 20 + 5)
        let lie = String(repeating: "f", count: 32) + "-2"
        let server = try HostileHTTPServer(.script(multipartScript(data, composite: lie) + [
            raw(200, ["ETag: \"\(lie)\""], length: data.count), raw(200, ["ETag: \"\(lie)\""], length: data.count), raw(204),
        ]))
        let session = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            StorageErrorCode(of: $0) == .nonMatchingChecksum && "\($0)".contains("left as it is")
        }
        #expect(methods(server) == ["POST /bkt/obj", "PUT /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj"])
    }

    /// `CompleteMultipartUpload` answers the right ETag (the MD5 of the parts' MD5s) but the
    /// object it made is a byte short. Read back (a job that moves or mirrors), the `HEAD` says
    /// so: the assembly lost bytes the parts' ETags cannot show, so the upload fails with
    /// `nonMatchingChecksum`, and the object is left in place (no `DELETE`: it may be an
    /// earlier good version).
    @Test func aRightMultipartETagOnAShortObjectReadBackFailsAndDeletesNothing() async throws {
        let data = patternData(6 << 20 + 5)
        let composite = compositeETag(of: data)
        let server = try HostileHTTPServer(.script(multipartScript(data, composite: composite) + [
            raw(200, ["ETag: \"\(composite)\""], length: data.count - 1), raw(200, ["ETag: \"\(composite)\""], length: data.count - 1),
            raw(204),
        ]))
        let session = try await backend(server, readsBack: true).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            StorageErrorCode(of: $0) == .nonMatchingChecksum && "\($0)".contains("has \(data.count - 1) bytes")
                && "\($0)".contains("left as it is")
        }
        #expect(methods(server) == ["POST /bkt/obj", "PUT /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj", "HEAD /bkt/obj"])
    }

    /// Ceph's radosgw answers every `CompleteMultipartUpload` with an empty `<ETag></ETag>`: a
    /// missing value decides nothing, so the object is read (`HEAD`), and the upload is
    /// finished when the `HEAD` shows the parts' ETag and the file's size (nothing deleted,
    /// nothing sent again).
    @Test func anEmptyCompleteETagIsReadAgainFromAHead() async throws {
        let data = patternData(6 << 20 + 5)
        let composite = compositeETag(of: data)
        let server = try HostileHTTPServer(.script(Array(multipartScript(data, composite: composite).dropLast()) + [
            raw(200, body: "<CompleteMultipartUploadResult><ETag></ETag></CompleteMultipartUploadResult>"),
            raw(200, ["ETag: \"\(composite)\""], length: data.count), raw(204),
        ]))
        let session = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        let outcome = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in }
        guard case .finished(let stored) = outcome else { Issue.record("not finished: \(outcome)"); return }
        #expect(methods(server) == ["POST /bkt/obj", "PUT /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj", "HEAD /bkt/obj"])
        #expect(stored.size == Int64(data.count) && stored.generation == S3ETag("\"\(composite)\"")?.generation)
    }

    /// The same empty ETag, and a `HEAD` showing another object (an ETag that is not the parts'):
    /// the upload fails with `nonMatchingChecksum`, and nothing is deleted.
    @Test func anEmptyCompleteETagAndAHeadOfAnotherObjectFailsAndDeletesNothing() async throws {
        let data = patternData(6 << 20 + 5)
        let other = String(repeating: "e", count: 32) + "-2"
        let server = try HostileHTTPServer(.script(Array(multipartScript(data, composite: other).dropLast()) + [
            raw(200, body: "<CompleteMultipartUploadResult><ETag></ETag></CompleteMultipartUploadResult>"),
            raw(200, ["ETag: \"\(other)\""], length: data.count), raw(200, ["ETag: \"\(other)\""], length: data.count), raw(204),
        ]))
        let session = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            StorageErrorCode(of: $0) == .nonMatchingChecksum && "\($0)".contains(other)
        }
        #expect(methods(server) == ["POST /bkt/obj", "PUT /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj", "HEAD /bkt/obj"])
    }

    /// A `PutObject` answered with an ETag that is an MD5, but not the file's: the upload fails
    /// with `nonMatchingChecksum` and the object is left in place (no request after the `PUT`).
    @Test func aPutETagThatIsNotTheFilesFailsAndDeletesNothing() async throws {
        let data = patternData(1000)
        let server = try HostileHTTPServer(.script([
            raw(200, ["ETag: \"\(String(repeating: "a", count: 32))\""]), raw(200, ["ETag: \"\(String(repeating: "a", count: 32))\""]), raw(204),
        ]))
        let session = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            StorageErrorCode(of: $0) == .nonMatchingChecksum && "\($0)".contains("left as it is")
        }
        #expect(methods(server) == ["PUT /bkt/obj"])
    }

    /// An SSE-KMS answer to a `PutObject` (an ETag that is no MD5, and says so) is checked by
    /// what the server verified: here it returns a CRC32C that is not the file's, so the
    /// upload fails with `nonMatchingChecksum`, and nothing is deleted (no request after the `PUT`).
    @Test func anSSEKMSPutWithAnotherCRC32CFailsAndDeletesNothing() async throws {
        let data = patternData(1000)
        let kms = ["ETag: \"\(String(repeating: "c", count: 32))\"", "x-amz-server-side-encryption: aws:kms", "x-amz-checksum-crc32c: AAAAAA=="]
        let server = try HostileHTTPServer(.script([raw(200, kms), raw(200, kms), raw(204)]))
        let session = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            StorageErrorCode(of: $0) == .nonMatchingChecksum && "\($0)".contains("CRC32C AAAAAA==") && "\($0)".contains("left as it is")
        }
        #expect(methods(server) == ["PUT /bkt/obj"])
    }

    /// An SSE-KMS Complete (its ETag no MD5 of MD5s, and no CRC32C of the object): the object's
    /// size is read (`HEAD`), and a byte short fails with `nonMatchingChecksum`, nothing deleted.
    @Test func anSSEKMSCompleteIsCheckedBySizeFromAHead() async throws {
        let data = patternData(6 << 20 + 5)
        let kms = String(repeating: "d", count: 32) + "-2"
        let server = try HostileHTTPServer(.script(Array(multipartScript(data, composite: kms).dropLast()) + [
            raw(200, ["x-amz-server-side-encryption: aws:kms"],
                body: "<CompleteMultipartUploadResult><ETag>&quot;\(kms)&quot;</ETag></CompleteMultipartUploadResult>"),
            raw(200, ["ETag: \"\(kms)\"", "x-amz-server-side-encryption: aws:kms"], length: data.count - 1), raw(204),
        ]))
        let session = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: Int64(data.count))
        await #expect { _ = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in } } throws: {
            StorageErrorCode(of: $0) == .nonMatchingChecksum && "\($0)".contains("has \(data.count - 1) bytes")
        }
        #expect(methods(server) == ["POST /bkt/obj", "PUT /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj", "HEAD /bkt/obj"])
    }

    /// An SSE-KMS upload resumed by a later process: `ListParts` gives ETags that are no MD5s,
    /// with each part's CRC32C (an upload created with checksums): a part whose CRC32C is the
    /// local bytes' is kept (not sent again) and named in Complete by the ETag the server gave it.
    @Test func aResumedSSEKMSUploadKeepsPartsByTheirCRC32C() async throws {
        let data = patternData(6 << 20 + 5)
        let first = String(repeating: "a", count: 32), second = String(repeating: "b", count: 32)
        let kms = String(repeating: "d", count: 32) + "-2"
        let sse = "x-amz-server-side-encryption: aws:kms"
        let listing = "<ListPartsResult><Part><PartNumber>1</PartNumber><Size>\(5 << 20)</Size><ETag>&quot;\(first)&quot;</ETag>"
            + "<ChecksumCRC32C>\(crc32cBase64(data.prefix(5 << 20)))</ChecksumCRC32C></Part><IsTruncated>false</IsTruncated></ListPartsResult>"
        let server = try HostileHTTPServer(.script([
            raw(200, body: listing), raw(200, ["ETag: \"\(second)\"", sse]),
            raw(200, [sse], body: "<CompleteMultipartUploadResult><ETag>&quot;\(kms)&quot;</ETag></CompleteMultipartUploadResult>"),
            raw(200, ["ETag: \"\(kms)\"", sse], length: data.count), raw(204),
        ]))
        let plan = S3MultipartSession.Plan(key: "obj", uploadID: "u-1", size: Int64(data.count), partSize: 5 << 20)
        let session = try await backend(server).resumeUpload(id: plan.id, for: "obj")
        #expect(try await session.confirmedOffset() == 5 << 20)
        let outcome = try await session.send(from: ByteSource(data: data), at: 5 << 20, control: TransferControl()) { _ in }
        guard case .finished(let stored) = outcome else { Issue.record("not finished: \(outcome)"); return }
        #expect(methods(server) == ["GET /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj", "HEAD /bkt/obj"])
        #expect(stored.size == Int64(data.count) && stored.crc32c == crc32cBase64(data))
    }

    /// Not read back (the default, and every job that neither moves nor mirrors): the parts' MD5s and
    /// Complete's ETag are the check, as a `PutObject`'s answer is, so the upload ends at
    /// `CompleteMultipartUpload` with no request after it (a `HEAD` there costs `rclone serve s3`
    /// an MD5 of the whole object: docs/scale.md, "The large file: where the time goes"). The
    /// object is described by what was sent: the file's size, the fields given, Complete's ETag
    /// as its generation.
    @Test func aMultipartUploadNotReadBackEndsAtComplete() async throws {
        let data = patternData(6 << 20 + 5)
        let composite = compositeETag(of: data)
        let server = try HostileHTTPServer(.script(multipartScript(data, composite: composite)))
        var attributes = ObjectResource()
        attributes.contentType = "application/x-tar"
        attributes.metadata = ["owner": "ops"]
        let session = try await backend(server).startUpload(to: "obj", attributes: attributes, size: Int64(data.count))
        let outcome = try await session.send(from: ByteSource(data: data), at: 0, control: TransferControl()) { _ in }
        guard case .finished(let stored) = outcome else { Issue.record("not finished: \(outcome)"); return }
        #expect(methods(server) == ["POST /bkt/obj", "PUT /bkt/obj", "PUT /bkt/obj", "POST /bkt/obj"])
        #expect(stored.size == Int64(data.count) && stored.name == "obj" && stored.bucket == "bkt")
        #expect(stored.contentType == "application/x-tar" && stored.metadata == ["owner": "ops"])
        #expect(stored.generation == S3ETag("\"\(composite)\"")?.generation && stored.generation != nil)
        var sums = Checksums()
        sums.update(data)
        #expect(stored.crc32c == sums.crc32cBase64())
    }

    /// The ETag S3 gives an object of two parts (5 MiB, then the rest): the MD5 of their MD5s, "-2".
    private func compositeETag(of data: Data) -> String {
        let first = Insecure.MD5.hash(data: data.prefix(5 << 20)), second = Insecure.MD5.hash(data: data.dropFirst(5 << 20))
        return hex(Data(first) + Data(second)) + "-2"
    }

    /// A two-part upload's answers up to Complete's, which answers `composite`. The tests that
    /// assert no `DELETE` answer a read-and-delete (`HEAD`, `HEAD`, `DELETE`) after it, so a
    /// delete the code tried would reach the server and show in `methods`.
    private func multipartScript(_ data: Data, composite: String) -> [String] {
        [raw(200, body: "<InitiateMultipartUploadResult><UploadId>u-1</UploadId></InitiateMultipartUploadResult>"),
         raw(200, ["ETag: \"\(hex(data.prefix(5 << 20)))\""]), raw(200, ["ETag: \"\(hex(data.dropFirst(5 << 20)))\""]),
         raw(200, body: "<CompleteMultipartUploadResult><ETag>&quot;\(composite)&quot;</ETag></CompleteMultipartUploadResult>")]
    }

    /// Each request's method and path, without its query.
    private func methods(_ server: HostileHTTPServer) -> [String] {
        server.requests.map { "\($0["method"] ?? "") \($0["target"] ?? "")".components(separatedBy: "?").first ?? "" }
    }

    /// An upload id Hoist would put in URLs and journals (a space, a line break, a path) or XML
    /// with a DTD or entities: the upload fails there, and no byte of the file is sent.
    @Test(arguments: [
        "<InitiateMultipartUploadResult><UploadId>a b</UploadId></InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>a&#13;&#10;Host: evil</UploadId></InitiateMultipartUploadResult>",
        "<InitiateMultipartUploadResult><UploadId>../../x?y</UploadId></InitiateMultipartUploadResult>",
        "<!DOCTYPE r [<!ENTITY e SYSTEM 'file:///etc/passwd'>]><InitiateMultipartUploadResult><UploadId>&e;</UploadId></InitiateMultipartUploadResult>",
        String(repeating: "<a>", count: 100) + String(repeating: "</a>", count: 100),
    ])
    func aHostileUploadIDStopsBeforeAnyByte(_ body: String) async throws {
        let server = try HostileHTTPServer(.script([raw(200, body: body), raw(200, ["ETag: \"x\""])]))
        await #expect(throws: StorageFailure.self) {
            _ = try await backend(server).startUpload(to: "obj", attributes: ObjectResource(), size: 6 << 20)
        }
        #expect(server.requests.count == 1)
    }

    /// `ListParts` claiming parts of other sizes, numbers outside the upload or ETags that are not
    /// MD5s keeps none of them (they are sent again); a listing that says it goes on for ever
    /// ends within the upload's pages.
    @Test func lyingPartListsKeepNothing() async throws {
        let parts = [("1", "4", "\"0123456789abcdef0123456789abcdef\""), ("99", "5242880", "\"0123456789abcdef0123456789abcdef\""),
                     ("2", "1048581", "\"not-an-md5\""), ("-1", "5242880", "\"0123456789abcdef0123456789abcdef\"")]
        let listing = "<ListPartsResult>" + parts.map { "<Part><PartNumber>\($0.0)</PartNumber><Size>\($0.1)</Size><ETag>\($0.2)</ETag></Part>" }
            .joined() + "<IsTruncated>true</IsTruncated><NextPartNumberMarker>0</NextPartNumberMarker></ListPartsResult>"
        let server = try HostileHTTPServer(.script([raw(200, body: listing)]))
        let plan = S3MultipartSession.Plan(key: "obj", uploadID: "u-1", size: 6 << 20 + 5, partSize: 5 << 20)
        let session = try await backend(server).resumeUpload(id: plan.id, for: "obj")
        #expect(try await session.confirmedOffset() == 0)
        #expect(server.requests.count == 1)
    }
}
