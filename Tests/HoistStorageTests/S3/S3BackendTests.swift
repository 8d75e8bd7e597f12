import Crypto
import Foundation
import HoistHTTP
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// What S3 has that the conformance suite does not ask: multipart uploads (parts in parallel,
/// the multipart ETag), resume across processes from `ListParts`, abort, presigned URLs and the
/// access check's sentences; on moto's server, `rclone serve s3` and Ceph's radosgw alike.
@Suite struct S3BackendTests {
    /// A storage whose multipart threshold and part size are S3's smallest (5 MiB).
    private func smallParts(_ server: S3TestServer, bucket: String, port: Int? = nil, concurrency: Int = 4) throws -> Storage {
        try s3Storage(server, bucket: bucket, port: port) { configuration in
            configuration.multipartThreshold = 5 << 20
            configuration.partSize = 5 << 20
            configuration.partConcurrency = concurrency
        }
    }

    @Test(arguments: S3TestServer.plain)
    func multipartUploadByteForByte(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let storage = try smallParts(server, bucket: bucket)
        let data = patternData(17 << 20 + 7)   // 4 parts, the last 2 MiB + 7
        let metadata = StorageMetadata()
        metadata.contentType = "video/mp4"
        metadata.customMetadata = ["owner": "ada"]
        let (_, recorder) = EventRecorder.upload(.data(data), to: storage.reference(withPath: "big/movie.mp4"), metadata: metadata)
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.size == Int64(data.count))
        #expect(last.metadata?.contentType == "video/mp4")
        #expect(last.metadata?.customMetadata == ["owner": "ada"])
        #expect(try await server.storedBytes(bucket: bucket, key: "big/movie.mp4") == data)
        let head = try await server.request("HEAD", "/\(bucket)/big/movie.mp4")
        // moto's and radosgw's ETag is AWS's (the MD5 of the parts' MD5s, "-4"); rclone's the MD5 of the whole.
        let etag = head.header("ETag") ?? "no ETag"
        #expect(etag.hasSuffix("-4\"") || etag == "\"\(Insecure.MD5.hash(data: data).map { String(format: "%02x", $0) }.joined())\"", "\(etag)")
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted() && progress.last == Int64(data.count))
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    /// Complete's answer decides the check where it carries an ETag (moto, rclone: no read
    /// after it); Ceph's radosgw answers every Complete with an empty `<ETag></ETag>`, so there
    /// the object is read (`HEAD`) and its ETag and size are the check: the upload
    /// succeeds, recorded with the ETag later reads report.
    @Test(arguments: S3TestServer.plain)
    func aCompleteWithoutAnETagIsCheckedByReadingTheObject(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let storage = try smallParts(server, bucket: bucket, port: proxy.port)
        let data = patternData(11 << 20 + 5)   // 3 parts
        let stored = try await storage.reference(withPath: "c/complete.bin").putDataAsync(data)
        #expect(try await server.storedBytes(bucket: bucket, key: "c/complete.bin") == data)
        let methods = proxy.requests.compactMap { $0["method"] as? String }
        let heads = methods.filter { $0 == "HEAD" }.count
        #expect(heads == (server == .ceph ? 1 : 0), "\(methods)")
        #expect(methods.last == (server == .ceph ? "HEAD" : "POST"), "\(methods)")
        // rclone's reads give the object's MD5, not Complete's ETag (a job that mirrors reads it back).
        let etag = try #require(try await server.request("HEAD", "/\(bucket)/c/complete.bin").header("ETag"))
        #expect((stored.generation == S3ETag(etag)?.generation) == (server != .rclone), "recorded \(stored.generation), reads give \(etag)")
    }

    /// A bucket with default SSE-KMS (played by the fault proxy: every ETag answered is no MD5,
    /// and says `x-amz-server-side-encryption: aws:kms`) failed every upload: the ETags were
    /// compared with the MD5s. They are now checked through what the server verified
    /// (`Content-MD5`, `x-amz-checksum-crc32c`), and a multipart object's size through a `HEAD`;
    /// the object's MD5 is the file's, never read from such an ETag; nothing is deleted.
    @Test(arguments: S3TestServer.plain)
    func anSSEKMSBucketsETagsAreCheckedThroughWhatTheServerVerified(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), ["--sse-kms"])
        let storage = try smallParts(server, bucket: bucket, port: proxy.port)
        let small = patternData(70_001, seed: 3)
        let large = patternData(11 << 20 + 5, seed: 4)   // 3 parts
        let storedSmall = try await storage.reference(withPath: "kms/small.bin").putDataAsync(small)
        let storedLarge = try await storage.reference(withPath: "kms/large.bin").putDataAsync(large)
        #expect(try await server.storedBytes(bucket: bucket, key: "kms/small.bin") == small)
        #expect(try await server.storedBytes(bucket: bucket, key: "kms/large.bin") == large)
        #expect(storedSmall.md5Hash == Data(Insecure.MD5.hash(data: small)).base64EncodedString())
        #expect(storedSmall.resource.crc32c == crc32cBase64(small) && storedLarge.resource.crc32c == crc32cBase64(large))
        #expect(storedLarge.size == Int64(large.count) && storedLarge.md5Hash == nil)
        let methods = proxy.requests.map { "\($0["method"] as? String ?? "") \((($0["target"] as? String) ?? "").components(separatedBy: "?")[0])" }
        #expect(methods.last == "HEAD /\(bucket)/kms/large.bin", "\(methods)")
        #expect(!methods.contains { $0.hasPrefix("DELETE") }, "\(methods)")
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    /// S3 checks the checksums it is given (AWS: every one): the upload is created
    /// with `x-amz-checksum-algorithm: CRC32C` and `x-amz-checksum-type: FULL_OBJECT`, each part
    /// goes with its CRC32C, and Complete with the whole file's, as seen at the proxy; moto,
    /// `rclone serve s3` and radosgw take them all (none checks them).
    @Test(arguments: S3TestServer.plain)
    func partsAndCompleteCarryTheirCRC32C(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let storage = try smallParts(server, bucket: bucket, port: proxy.port)
        let data = patternData(11 << 20 + 5, seed: 5)   // 3 parts
        _ = try await storage.reference(withPath: "crc/large.bin").putDataAsync(data)
        #expect(try await server.storedBytes(bucket: bucket, key: "crc/large.bin") == data)
        let requests = proxy.requests
        let create = try #require(requests.first { ($0["method"] as? String) == "POST" && (($0["target"] as? String) ?? "").contains("uploads") })
        #expect(create["checksumAlgorithm"] as? String == "CRC32C" && create["checksumType"] as? String == "FULL_OBJECT")
        var parts: [Int: String] = [:]
        for request in requests where (isPart(request)) {
            let target = request["target"] as? String ?? ""
            let number = Int(target.components(separatedBy: "partNumber=")[1].prefix { $0.isNumber }) ?? 0
            parts[number] = request["checksumCRC32C"] as? String
        }
        #expect(parts == [1: crc32cBase64(data.prefix(5 << 20)), 2: crc32cBase64(data.dropFirst(5 << 20).prefix(5 << 20)),
                          3: crc32cBase64(data.dropFirst(10 << 20))])
        let complete = try #require(requests.last { ($0["method"] as? String) == "POST" })
        #expect(complete["checksumCRC32C"] as? String == crc32cBase64(data) && complete["checksumType"] as? String == "FULL_OBJECT")
    }

    private func isPart(_ request: [String: Any]) -> Bool {
        (request["method"] as? String) == "PUT" && ((request["target"] as? String) ?? "").contains("partNumber=")
    }

    /// AWS answers a `FULL_OBJECT` upload's Complete with the object's CRC32C (played by the
    /// fault proxy): the file's, the upload is done; another, it fails with
    /// `nonMatchingChecksum` naming it, and the object is left as it is (no `DELETE`).
    @Test(arguments: S3TestServer.plain)
    func aFullObjectCRC32CInCompletesAnswerIsCompared(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let data = patternData(11 << 20 + 5, seed: 6)   // 3 parts
        let right = try FaultProxy(upstreamPort: try server.port(), ["--complete-checksum", "right"])
        let stored = try await smallParts(server, bucket: bucket, port: right.port).reference(withPath: "full/right.bin").putDataAsync(data)
        #expect(stored.resource.crc32c == crc32cBase64(data))
        let wrong = try FaultProxy(upstreamPort: try server.port(), ["--complete-checksum", "wrong"])
        let storage = try smallParts(server, bucket: bucket, port: wrong.port)
        // The completion handler's NSError keeps Hoist's message (the async StorageError cannot).
        let error = try #require(await putDataError(storage.reference(withPath: "full/wrong.bin"), data))
        #expect(error.code == StorageErrorCode.nonMatchingChecksum.rawValue && error.localizedDescription.contains("CRC32C")
                    && error.localizedDescription.contains("left as it is"), "\(error)")
        // No object deleted (an upload the retries abandon is aborted: `DELETE ?uploadId=`).
        let deletes = wrong.requests.filter { ($0["method"] as? String) == "DELETE" }.map { $0["target"] as? String ?? "" }
        #expect(deletes.allSatisfy { $0.contains("uploadId=") }, "\(deletes)")
        #expect(try await server.storedBytes(bucket: bucket, key: "full/wrong.bin") == data)
    }

    /// The parts of one file go up at once (`partConcurrency`, 4): at the proxy, which closes
    /// every connection after its answer, four part `PUT`s were in flight together.
    @Test(arguments: S3TestServer.plain)
    func thePartsOfOneFileGoInParallel(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let storage = try smallParts(server, bucket: bucket, port: proxy.port)
        // Slow enough that a part is still going when the next is hashed (rclone takes a part
        // on this machine faster than a debug build's MD5 of the next).
        storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 20 << 20)
        let data = patternData(22 << 20)   // 5 parts
        _ = try await storage.reference(withPath: "parallel.bin").putDataAsync(data)
        #expect(try await server.storedBytes(bucket: bucket, key: "parallel.bin") == data)
        #expect(proxy.mostInFlight("PUT") == 4, "at most \(proxy.mostInFlight("PUT")) parts in flight")
    }

    /// A part answered 503 and a part whose connection is reset are each sent again on their
    /// own, while the others go on: every part once, plus the two (counted at the proxy).
    @Test(arguments: S3TestServer.plain)
    func aFailedPartIsRetriedAlone(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), ["--fail", "503:1:PUT", "--reset", "1:PUT"])
        let storage = try smallParts(server, bucket: bucket, port: proxy.port)
        let data = patternData(17 << 20 + 7)   // 4 parts
        _ = try await storage.reference(withPath: "retried.bin").putDataAsync(data)
        #expect(try await server.storedBytes(bucket: bucket, key: "retried.bin") == data)
        let parts = proxy.requests.filter { ($0["method"] as? String) == "PUT" }
        #expect(parts.count == 4 + 2, "\(parts.map { $0["target"] ?? "" })")
        #expect(proxy.log.contains { $0["event"] as? String == "reset" })
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    /// A run killed after some parts (its session id kept, as a journal keeps it) is resumed by
    /// another backend (another process): `ListParts` finds the parts, and only the missing ones
    /// are sent (counted at a proxy).
    @Test(arguments: S3TestServer.plain)
    func resumeSendsOnlyTheMissingParts(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let data = patternData(20 << 20 + 11)   // 5 parts
        // One part at a time, so the parts before the cut are whole.
        let first = try smallParts(server, bucket: bucket, concurrency: 1).backend
        let session = try await first.startUpload(to: "r/resumed.bin", attributes: ObjectResource(), size: Int64(data.count))
        let control = TransferControl()
        do {
            _ = try await session.send(from: ByteSource(data: data), at: 0, control: control) { sent in
                if sent >= 11 << 20 { control.cancel() }
            }
            Issue.record("not interrupted")
        } catch {
            #expect(StorageErrorCode(of: error) == .cancelled, "\(error)")
        }

        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let second = try smallParts(server, bucket: bucket, port: proxy.port).backend
        let resumed = try await second.resumeUpload(id: session.id, for: "r/resumed.bin")
        let offset = try await resumed.confirmedOffset()
        #expect(offset >= 10 << 20 && offset % (5 << 20) == 0, "confirmed \(offset)")
        let outcome = try await resumed.send(from: ByteSource(data: data), at: offset, control: TransferControl()) { _ in }
        guard case .finished(let resource) = outcome else { Issue.record("not finished: \(outcome)"); return }
        #expect(resource.size == Int64(data.count))
        #expect(resource.crc32c == crc32cBase64(data))
        #expect(try await server.storedBytes(bucket: bucket, key: "r/resumed.bin") == data)
        let partsSent = proxy.requests.filter { ($0["method"] as? String) == "PUT" && (($0["target"] as? String) ?? "").contains("partNumber=") }
        #expect(partsSent.count == 5 - Int(offset / (5 << 20)), "\(partsSent.map { $0["target"] ?? "" })")
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    /// A part the server holds that is not the local file's (the file changed between runs):
    /// the object would mix two files, so the upload is aborted with `nonMatchingChecksum` (the
    /// task then starts again from zero), leaving no object and no upload.
    @Test(arguments: S3TestServer.plain)
    func aHeldPartWithOtherBytesAbortsTheUpload(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let old = patternData(12 << 20, seed: 1)
        var new = old
        new[1000] ^= 0xFF   // part 1 differs, parts 2 and 3 do not
        let backend = try smallParts(server, bucket: bucket, concurrency: 1).backend
        let session = try await backend.startUpload(to: "changed.bin", attributes: ObjectResource(), size: Int64(old.count))
        let control = TransferControl()
        _ = try? await session.send(from: ByteSource(data: old), at: 0, control: control) { sent in
            if sent >= 6 << 20 { control.cancel() }
        }
        let resumed = try await backend.resumeUpload(id: session.id, for: "changed.bin")
        let offset = try await resumed.confirmedOffset()
        #expect(offset >= 5 << 20, "part 1 is held: \(offset)")
        await #expect { _ = try await resumed.send(from: ByteSource(data: new), at: offset, control: TransferControl()) { _ in } }
            throws: { StorageErrorCode(of: $0) == .nonMatchingChecksum }
        #expect(try await server.storedBytes(bucket: bucket, key: "changed.bin") == nil)
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    @Test(arguments: S3TestServer.plain)
    func cancelAbortsTheMultipartUpload(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let storage = try smallParts(server, bucket: bucket)
        storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 32 << 20)
        let task = storage.reference(withPath: "gone.bin").putData(patternData(24 << 20))
        let once = Mutex(false)
        let recorder = EventRecorder(task) { snapshot in
            if (snapshot.progress?.completedUnitCount ?? 0) >= 6 << 20, once.withLock({ let first = !$0; $0 = true; return first }) {
                task.cancel()
            }
        }
        let last = await recorder.finished()
        #expect(errorCode(last) == .cancelled)
        #expect(try await server.storedBytes(bucket: bucket, key: "gone.bin") == nil)
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    /// Uploads a killed run left are aborted by a later one: those older than the age asked,
    /// under the URL's prefix, that the journal's sessions name: another upload
    /// under the same prefix (another application's) and one under another prefix are left.
    /// (On rclone: moto says every upload began in 2010.)
    @Test func leftUploadsAreAbortedByALaterRun() async throws {
        let server = S3TestServer.rclone
        let bucket = try await server.makeBucket()
        let mine = try s3Storage(server, bucket: bucket) { $0.prefix = "jobs/a/" }.backend as! S3Backend
        let other = try s3Storage(server, bucket: bucket) { $0.prefix = "jobs/b/" }.backend as! S3Backend
        let left = try await mine.startUpload(to: "left.bin", attributes: ObjectResource(), size: 40 << 20)
        let stranger = try await mine.startUpload(to: "stranger.bin", attributes: ObjectResource(), size: 40 << 20)
        let theirs = try await other.startUpload(to: "theirs.bin", attributes: ObjectResource(), size: 40 << 20)
        let journal: Set = [left.id, theirs.id, "put:x", "s3mpu1:garbage"]
        #expect(try await mine.abortUploads(olderThan: 3600, startedBy: journal) == [])   // too young
        #expect(try await mine.abortUploads(olderThan: 0, startedBy: journal, now: Date().addingTimeInterval(5)) == ["jobs/a/left.bin"])
        let pending = try await server.pendingUploads(bucket: bucket)
        // The stranger under the same prefix, and the other prefix's (named, but not under this URL).
        #expect(Set(pending) == Set([stranger.id, theirs.id].map { S3MultipartSession.Plan(id: $0)!.uploadID }), "\(pending)")
        #expect(try await mine.abortUploads(olderThan: 0, startedBy: [], now: Date().addingTimeInterval(5)) == [])
    }

    /// A key with dot segments, as a listing may hand one to a mirror (`site/../victim.txt`),
    /// reaches the server byte for byte: curl would fold it into `victim.txt`, and the
    /// `DELETE` would land there (`CURLOPT_PATH_AS_IS`). On moto's server, which
    /// takes paths as they come.
    @Test func aKeyWithDotSegmentsIsNotFoldedIntoAnother() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let storage = try s3Storage(server, bucket: bucket)
        let victim = try await storage.reference(withPath: "victim.txt").putDataAsync(Data("victim".utf8))
        _ = try await storage.reference(withPath: "site/a").putDataAsync(Data("a".utf8))
        let backend = storage.backend
        #expect(try await backend.deleteObject("site/../victim.txt", generation: victim.generation) == .absent)
        try await backend.delete("site/../victim.txt", generation: nil)
        #expect(try await server.storedBytes(bucket: bucket, key: "victim.txt") == Data("victim".utf8))
        #expect(try await server.storedBytes(bucket: bucket, key: "site/a") == Data("a".utf8))
    }

    /// The presigned URL downloads the object with no other credentials (rclone and radosgw
    /// check its signature; moto does not check signatures, so it proves the URL's form there).
    @Test(arguments: S3TestServer.plain)
    func presignedURLDownloadsTheObject(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let storage = try s3Storage(server, bucket: bucket)
        let data = patternData(3000)
        let ref = storage.reference(withPath: "dir/a b+c.txt")
        _ = try await ref.putDataAsync(data)
        let url = try await ref.downloadURL()
        #expect(url.absoluteString.contains("X-Amz-Signature="))
        var request = HTTPRequest(method: "GET", url: url.absoluteString)
        request.maxResponseBytes = nil
        let response = try await CurlEngine.shared.perform(request)
        #expect(response.status == 200 && response.body == data, "HTTP \(response.status) \(response.bodyText.prefix(300))")
        if server != .moto {
            // A signature over another object's path is refused.
            let forged = url.absoluteString.replacingOccurrences(of: "/dir/", with: "/other/")
            #expect(try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: forged)).status == 403)
        }
    }

    // MARK: - One pass

    /// Each byte of an object sent in one `PutObject` is read from its file once: its
    /// MD5 and CRC32C are taken from the buffer that is then sent, where they were taken in a read
    /// of their own before the send read the file again. What the process read is the kernel's
    /// count (`rchar` in `/proc/self/io`: `read`/`pread` calls; curl's socket `recv`s are not in
    /// it), over an upload of `S3PutSession.bufferLimit` bytes, the largest sent this way.
    @Test(arguments: S3TestServer.plain)
    func aSmallObjectsFileIsReadOnce(_ server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let storage = try s3Storage(server, bucket: bucket)
        let folder = try TemporaryDirectory()
        let data = patternData(1 << 20, seed: 5)
        let file = try folder.write("once.bin", data)
        let before = try bytesReadByThisProcess()
        let stored = try await storage.reference(withPath: "once/once.bin").putFileAsync(from: file)
        let read = try bytesReadByThisProcess() - before
        #expect(read >= data.count && read < data.count + data.count / 4, "\(read) bytes read for \(data.count)")
        #expect(stored.size == Int64(data.count))
        #expect(try await server.storedBytes(bucket: bucket, key: "once/once.bin") == data)
    }

    /// The bytes this process has read through `read(2)` and its kin (`rchar`).
    private func bytesReadByThisProcess() throws -> Int {
        let io = try String(contentsOfFile: "/proc/self/io", encoding: .utf8)
        let line = try #require(io.split(separator: "\n").first { $0.hasPrefix("rchar:") })
        return try #require(Int(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces)))
    }

    // MARK: - TLS

    /// Over TLS with a private CA: trusted when its bundle is named, refused with a sentence
    /// naming how to trust it when not.
    @Test func tlsWithAPrivateCA() async throws {
        let server = S3TestServer.rcloneTLS
        let bucket = try await server.makeBucket()
        let data = patternData(20 << 20 + 1)   // multipart
        _ = try await smallParts(server, bucket: bucket).reference(withPath: "tls.bin").putDataAsync(data)
        #expect(try await server.storedBytes(bucket: bucket, key: "tls.bin") == data)
        let untrusted = try s3Storage(server, bucket: bucket) { $0.caBundle = nil }
        let error = try await accessError(untrusted)
        #expect(error.message.hasPrefix("The TLS certificate of https://127.0.0.1:\(try server.port()) is not trusted by the "
            + "system's CA store") && error.message.contains("storage.caBundle"), "\(error)")
    }

    // MARK: - Web identity

    /// `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN` (as on EKS): the token is exchanged at
    /// moto's STS (behind a proxy that counts the exchanges) for temporary keys, which are
    /// kept until `refreshBefore` seconds before they expire.
    @Test func webIdentityCredentialsFromSTSAreKeptThenRefreshed() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let folder = try TemporaryDirectory()
        let tokenFile = try folder.write("token", Data("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJob2lzdCJ9.c2ln\n".utf8))
        let sts = try FaultProxy(upstreamPort: try server.port(), [])
        var configuration = try S3Backend.Configuration.fromEnvironment(bucket: bucket, [
            "HOME": folder.path, "AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile.path, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/hoist",
            "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:\(sts.port)", "AWS_ENDPOINT_URL_S3": try server.endpoint(),
        ])
        #expect(configuration.credentials == nil && configuration.webIdentity?.roleARN == "arn:aws:iam::123456789012:role/hoist")
        let backend = S3Backend(configuration)
        let storage = Storage(url: "s3://\(bucket)", backend: backend)
        for index in 0..<3 { _ = try await storage.reference(withPath: "w\(index)").putDataAsync(Data("x".utf8)) }
        let credentials = try #require(try await backend.credentialSource.credentials())
        #expect(credentials.accessKeyID.hasPrefix("ASIA") && credentials.sessionToken?.isEmpty == false)
        func exchanges() -> Int { sts.requests.filter { $0["method"] as? String == "POST" }.count }
        #expect(exchanges() == 1)   // one exchange for every request so far
        // Keys that expire within the margin are taken again before each use.
        configuration.webIdentity?.refreshBefore = 10 * 24 * 3600
        let eager = S3Backend(configuration)
        _ = try await eager.metadata(of: "w0")
        _ = try await eager.metadata(of: "w1")
        #expect(exchanges() == 3)
        // A token file gone: one sentence naming it.
        try FileManager.default.removeItem(at: tokenFile)
        await #expect { _ = try await eager.metadata(of: "w0") } throws: { error in
            (error as? StorageFailure)?.message.contains("Cannot read the web identity token file \(tokenFile.path)") == true
        }
    }

    /// Every request of an S3 backend goes through the transport of its configuration (the STS
    /// exchange, the access check, a `PutObject`, a multipart upload and a read), so a test or
    /// an embedder that puts its own there sees them all: here one that forwards to the HTTP
    /// engine and writes down each request, on moto's S3 and STS.
    @Test func everyRequestGoesThroughTheConfiguredTransport() async throws {
        final class Recording: HTTPTransport {
            let seen = Mutex<[String]>([])
            func perform(_ request: HTTPRequest, hooks: TransferHooks) async throws -> HTTPResponse {
                seen.withLock { $0.append("\(request.method) \(request.url)") }
                return try await HTTPTransports.standard.perform(request, hooks: hooks)
            }
        }
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let folder = try TemporaryDirectory()
        let tokenFile = try folder.write("token", Data("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJob2lzdCJ9.c2ln\n".utf8))
        var configuration = try S3Backend.Configuration.fromEnvironment(bucket: bucket, [
            "HOME": folder.path, "AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile.path, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/hoist",
            "AWS_ENDPOINT_URL_STS": try server.endpoint(), "AWS_ENDPOINT_URL_S3": try server.endpoint(),
        ])
        (configuration.multipartThreshold, configuration.partSize) = (5 << 20, 5 << 20)
        let transport = Recording()
        configuration.transport = transport
        let storage = Storage(url: "s3://\(bucket)", backend: S3Backend(configuration))
        try await storage.backend.checkAccess()
        let small = patternData(1_000), large = patternData((6 << 20) + 3)
        _ = try await storage.reference(withPath: "small.bin").putDataAsync(small)
        _ = try await storage.reference(withPath: "large.bin").putDataAsync(large)
        #expect(try await storage.reference(withPath: "large.bin").getMetadata().size == Int64(large.count))
        #expect(try await server.storedBytes(bucket: bucket, key: "small.bin") == small)
        #expect(try await server.storedBytes(bucket: bucket, key: "large.bin") == large)
        let seen = transport.seen.withLock { $0 }
        let object = "\(try server.endpoint())/\(bucket)/"
        #expect(seen.first == "POST \(try server.endpoint())/", "the STS exchange: \(seen)")
        #expect(seen.contains("GET \(object.dropLast())?list-type=2&max-keys=1"), "the access check: \(seen)")
        #expect(seen.contains("PUT \(object)small.bin"), "\(seen)")
        #expect(seen.contains("POST \(object)large.bin?uploads"), "\(seen)")
        #expect(seen.filter { $0.hasPrefix("PUT \(object)large.bin?") }.count == 2, "two parts: \(seen)")
        #expect(seen.contains { $0.hasPrefix("HEAD \(object)large.bin") }, "\(seen)")
    }

    // MARK: - The access check

    @Test func checkAccessNamesAWrongSecret() async throws {
        let bucket = try await S3TestServer.rclone.makeBucket()
        let storage = try s3Storage(.rclone, bucket: bucket) { $0.credentials?.secretAccessKey = "not-the-secret" }
        let error = try await accessError(storage)
        #expect(error.code == .unauthenticated && error.message.contains("refused the credentials"), "\(error)")
    }

    @Test(arguments: S3TestServer.plain)
    func checkAccessNamesAMissingBucket(_ server: S3TestServer) async throws {
        let storage = try s3Storage(server, bucket: "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())")
        let error = try await accessError(storage)
        #expect(error.code == .bucketNotFound && error.message.contains("does not exist at http://127.0.0.1"), "\(error)")
    }

    @Test func checkAccessNamesAnUnreachableEndpoint() async throws {
        let port = try freePort()
        let storage = try s3Storage(.moto, bucket: "some-bucket", port: port)
        let error = try await accessError(storage)
        #expect(error.message.hasPrefix("Cannot reach S3 at http://127.0.0.1:\(port)"), "\(error)")
    }

    @Test(arguments: S3TestServer.plain)
    func checkAccessPassesWithTheRightKey(_ server: S3TestServer) async throws {
        let storage = try s3Storage(server, bucket: try await server.makeBucket())
        try await storage.backend.checkAccess()
    }

    private func accessError(_ storage: Storage) async throws -> StorageFailure {
        do {
            try await storage.backend.checkAccess()
        } catch let failure as StorageFailure {
            return failure
        }
        throw TestServerError("checkAccess passed")
    }
}
