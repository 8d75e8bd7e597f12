import Foundation
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// What FirebaseStorage's own tests expect of references, NSObject behaviour, metadata reads and
/// task management, checked against a local bucket (and fake-gcs-server where a server matters).
@Suite struct ParityTests {
    /// A local bucket whose name is `bucket`, as in the SDK's tests.
    func bucketNamedBucket() throws -> (TemporaryDirectory, Storage) {
        let directory = try TemporaryDirectory()
        return (directory, Storage.storage(url: "file://" + directory.url.appendingPathComponent("bucket").path))
    }

    @Test func referenceForURLChecksSchemeAndBucket() throws {
        let (_, storage) = try bucketNamedBucket()
        #expect(try storage.reference(for: #require(URL(string: "gs://bucket/path/to/object"))).root().description == "gs://bucket/")
        #expect(storage.reference(forURL: "gs://bucket//path/////to////object////").description == "gs://bucket/path/to/object")
        #expect(storage.reference(forURL: "gs://bucket/").parent() == nil)
        let https = try storage.reference(for: #require(URL(string:
            "https://firebasestorage.googleapis.com:443/v0/b/bucket/o/images%2Fstars%20x.jpg?alt=media&token=abc")))
        #expect(https.fullPath == "images/stars x.jpg")

        #expect { try storage.reference(for: #require(URL(string: "gs://bcket/"))) } throws: { error in
            guard case StorageError.bucketMismatch(let message) = error else { return false }
            return message == "Provided bucket: `bcket` does not match the Storage bucket of the current instance: `bucket`"
                && "\(error)" == "bucketMismatch(message: \"\(message)\")"
        }
        #expect { try storage.reference(for: #require(URL(string: "htttp://bucket/"))) } throws: { error in
            guard case StorageError.pathError(let message) = error else { return false }
            return message == "Internal error: URL scheme must be one of gs://, http://, or https://"
        }
        #expect { try storage.reference(for: #require(URL(string: "https://example.com/x/y"))) } throws: { error in
            guard case StorageError.pathError(let message) = error else { return false }
            return message.hasPrefix("Internal error: URL must be in the form of http[s]://<host>/v0/b/<bucket>/o/")
        }
    }

    @Test func copiesAreEqualButNotIdentical() throws {
        let (_, storage) = try bucketNamedBucket()
        let queue = DispatchQueue(label: "parity.copy")
        storage.callbackQueue = queue
        let storageCopy = try #require(storage.copy() as? Storage)
        #expect(storageCopy !== storage)
        #expect(storageCopy == storage)
        #expect(storageCopy.hash == storage.hash)
        #expect(storageCopy.callbackQueue === queue)
        let (_, other) = try bucketNamedBucket()
        #expect(other != storage)   // another directory, also named `bucket`
        #expect(!storage.isEqual("gs://bucket"))

        let ref = storage.reference(withPath: "a/b")
        let refCopy = try #require(ref.copy() as? StorageReference)
        #expect(refCopy !== ref)
        #expect(refCopy == ref)
        #expect(refCopy.hash == ref.hash)
        #expect(ref.child("c") != ref)
        #expect(storageCopy.reference(withPath: "a/b") == ref)   // equal storages, same path
        #expect(other.reference(withPath: "a/b") != ref)
        #expect(Set([ref, refCopy, storage.reference().child("a").child("b")]).count == 1)

        let metadata = StorageMetadata(dictionary: ["bucket": "bucket", "name": "path/to/file", "md5Hash": "d41d8cd98f00b204e9800998ecf8427e"])
        let metadataCopy = try #require(metadata.copy() as? StorageMetadata)
        #expect(metadataCopy !== metadata)
        #expect(metadataCopy == metadata)
        #expect(metadataCopy.hash == metadata.hash)
        #expect(metadata != StorageMetadata())
        #expect(StorageMetadata(dictionary: ["md5Hash": "1"]) != StorageMetadata(dictionary: ["md5Hash": "2"]))
        metadataCopy.contentType = "text/plain"   // a copy is independent
        #expect(metadata.contentType == nil)
        #expect(metadataCopy != metadata)
    }

    @Test func metadataTimesRoundTripToTheMillisecond() {
        for millis in 0..<1000 {
            let text = String(format: "2016-03-01T20:16:01.%03dZ", millis)
            let metadata = StorageMetadata(dictionary: ["updated": text, "timeCreated": "1992-08-07T17:22:53.108Z"])
            #expect(metadata.dictionaryRepresentation()["updated"] as? String == text)
            #expect(metadata.dictionaryRepresentation()["timeCreated"] as? String == "1992-08-07T17:22:53.108Z")
        }
        // Rounded, not truncated: .6729 is .673, .9996 the next second.
        #expect(RFC3339.string(Date(timeIntervalSince1970: 1_456_863_361.6729)) == "2016-03-01T20:16:01.673Z")
        #expect(RFC3339.string(Date(timeIntervalSince1970: 1_456_863_361.9996)) == "2016-03-01T20:16:02.000Z")
    }

    @Test func getMetadataInEveryFormOnALocalBucket() async throws {
        let bucket = try LocalBucketFixture()
        let missing = try await checkGetMetadata(bucket.storage)
        #expect(missing["ResponseErrorCode"] == nil)   // no server
    }

    @Test func getMetadataInEveryFormOnGCS() async throws {
        let storage = gcsStorage(bucket: try await FakeGCS.makeBucket(), port: try FakeGCS.port())
        let missing = try await checkGetMetadata(storage)
        #expect(missing["ResponseErrorCode"] as? Int == 404)
        #expect(missing["ResponseErrorDomain"] as? String == "com.google.HTTPStatus")
    }

    /// Uploads, reads the metadata back in the three forms, then asks for a missing object;
    /// returns that failure's `serverError`.
    func checkGetMetadata(_ storage: Storage) async throws -> [String: Any] {
        let ref = storage.reference(withPath: "docs/a.txt")
        let metadata = StorageMetadata()
        metadata.contentType = "text/plain"
        metadata.customMetadata = ["k": "v"]
        let stored = try await ref.putDataAsync(Data("hello".utf8), metadata: metadata)

        let viaAsync = try await ref.getMetadata()
        let viaCompletion: StorageMetadata? = await withCheckedContinuation { continuation in
            ref.getMetadata { metadata, error in
                #expect(error == nil)
                continuation.resume(returning: metadata)
            }
        }
        let viaResult: Result<StorageMetadata, any Error> = await withCheckedContinuation { continuation in
            ref.getMetadata { (result: Result<StorageMetadata, any Error>) in continuation.resume(returning: result) }
        }
        for read in [viaAsync, try #require(viaCompletion), try viaResult.get()] {
            #expect(read.size == 5)
            #expect(read.contentType == "text/plain")
            #expect(read.customMetadata?["k"] == "v")
            #expect(read.path == "docs/a.txt")
            #expect(read.name == "a.txt")
            #expect(read.md5Hash == "XUFAKrxLKna5cZ2REBfFkg==")
            #expect(read.generation == stored.generation)
        }

        let missing: Result<StorageMetadata, any Error> = await withCheckedContinuation { continuation in
            storage.reference(withPath: "ghost").getMetadata { (result: Result<StorageMetadata, any Error>) in
                continuation.resume(returning: result)
            }
        }
        guard case .failure(StorageError.objectNotFound(let object, let serverError)) = missing else {
            Issue.record("expected objectNotFound, got \(missing)")
            return [:]
        }
        #expect(object == "ghost")
        return serverError
    }

    @Test func tasksAreStorageTaskManagement() async throws {
        let bucket = try LocalBucketFixture()
        let task = bucket.storage.reference(withPath: "m.bin").putData(patternData(32 << 20))
        let recorder = EventRecorder(task)
        // As code written for FirebaseStorage calls them: optional requirements, with `?()`.
        let managed: any StorageTaskManagement = task
        managed.pause?()
        managed.enqueue()   // already started: nothing happens
        managed.resume?()
        managed.cancel?()
        let last = await recorder.finished()
        #expect(errorCode(last) == .cancelled)
        let statuses = folded(recorder.statuses)
        // (A first progress event may come before the pause on a loaded machine.)
        #expect(Array(statuses.filter { $0 != .progress }.prefix(3)) == [.resume, .pause, .resume], "\(statuses)")
        #expect(statuses.filter { $0 == .resume }.count == 2)   // enqueue() did not start it again
        #expect(statuses.last == .failure)
        #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: bucket.bucketPath).appendingPathComponent("m.bin").path))
    }

    @Test func callbackQueueAndRetrySettingsAreKept() throws {
        let (_, storage) = try bucketNamedBucket()
        #expect(storage.maxUploadRetryTime == 600)
        #expect(storage.maxDownloadRetryTime == 600)
        #expect(storage.maxOperationRetryTime == 120)
        #expect(storage.uploadChunkSizeBytes == .max)
        #expect(storage.effectiveChunkSize == nil)
        storage.uploadChunkSizeBytes = 1
        #expect(storage.effectiveChunkSize == 256 << 10)
        storage.uploadChunkSizeBytes = (600 << 10)
        #expect(storage.effectiveChunkSize == 512 << 10)
        storage.maxUploadRetryTime = 7
        #expect(storage.uploadRetryPolicy.budget == 7)
    }
}

/// Collects progress events and cancels a task from a handler.
final class ProgressProbe: Sendable {
    private let counts = Mutex<[Int64]>([])
    var events: [Int64] { counts.withLock { $0 } }
    func record(_ snapshot: StorageTaskSnapshot) {
        counts.withLock { $0.append(snapshot.progress?.completedUnitCount ?? -1) }
        // One Progress per snapshot (made when first asked for), whoever asks, however often.
        #expect(snapshot.progress === snapshot.progress)
        #expect(snapshot.progress?.totalUnitCount == Int64(ParityBehaviourTests.size))
    }
}

/// Chunk sizes, cancel from the last progress event, and server errors, on both backends.
@Suite struct ParityBehaviourTests {
    static let size = 1 << 20

    /// A 1 MiB upload with the smallest chunks (256 KiB) reports progress at least once per
    /// chunk, and not much more often (FirebaseStorage's own test allows 4 to 6 events).
    func checkChunkedProgress(_ storage: Storage) async throws -> StorageMetadata {
        storage.uploadChunkSizeBytes = 1
        // A local upload of 1 MiB can end before the observer below is added: hold the first chunk back.
        storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 4 << 20)
        let data = patternData(Self.size)
        let task = storage.reference(withPath: "chunked.bin").putData(data)
        let probe = ProgressProbe()
        task.observe(.progress) { probe.record($0) }
        let last = await EventRecorder(task).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        let events = probe.events
        #expect(events.count >= 4 && events.count <= 6, "\(events)")   // as FirebaseStorage: about one per chunk
        #expect(events.last == Int64(Self.size))
        // Every 256 KiB boundary was reached by an event of its own.
        let chunk: Int64 = 256 << 10
        for boundary in stride(from: chunk, through: Int64(Self.size), by: Int(chunk)) {
            let inChunk = events.contains { $0 > boundary - chunk && $0 <= boundary }
            #expect(inChunk, "\(boundary): \(events)")
        }
        return try #require(last.metadata)
    }

    @Test func chunkSizeOnALocalBucket() async throws {
        let bucket = try LocalBucketFixture()
        let metadata = try await checkChunkedProgress(bucket.storage)
        #expect(metadata.size == Int64(Self.size))
        #expect(try bucket.storedBytes("chunked.bin") == patternData(Self.size))
    }

    @Test func chunkSizeOnGCSSendsChunks() async throws {
        let name = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = gcsStorage(bucket: name, port: proxy.port)
        _ = try await checkChunkedProgress(storage)
        #expect(try await FakeGCS.download(bucket: name, object: "chunked.bin") == patternData(Self.size))
        let puts = proxy.requests.filter { $0["method"] as? String == "PUT" }
        #expect(puts.count == 4, "\(proxy.requests)")
    }

    /// Slowed to 2 MiB/s, curl reports many small steps within a chunk: still about one event per chunk.
    @Test func chunkSizeOnASlowGCSLink() async throws {
        let name = try await FakeGCS.makeBucket()
        let storage = gcsStorage(bucket: name, port: try FakeGCS.port())
        storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 2 << 20)
        _ = try await checkChunkedProgress(storage)
        #expect(try await FakeGCS.download(bucket: name, object: "chunked.bin") == patternData(Self.size))
    }

    /// Cancels from the handler of the last progress event, after a while (a handler that does
    /// some work first): the task fails with `cancelled`.
    func cancelOnLastProgress(_ storage: Storage, object: String) async -> StorageTaskSnapshot {
        let task = storage.reference(withPath: object).putData(patternData(Self.size))
        task.observe(.progress) { snapshot in
            if snapshot.progress?.completedUnitCount == Int64(Self.size) {
                Thread.sleep(forTimeInterval: 0.3)
                task.cancel()
            }
        }
        return await EventRecorder(task).finished()
    }

    @Test func cancelFromTheLastProgressHandlerOnALocalBucket() async throws {
        let bucket = try LocalBucketFixture()
        // A local upload of 1 MiB can end before the handler below is observed: the limiter
        // holds the first piece a quarter of a second.
        bucket.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 4 << 20)
        let last = await cancelOnLastProgress(bucket.storage, object: "c.bin")
        #expect(last.status == .failure)
        #expect(errorCode(last) == .cancelled)
        #expect((last.error as NSError?)?.localizedDescription == "User cancelled the upload/download.")
        #expect(bucket.allFiles().isEmpty, "\(bucket.allFiles())")

        // The SDK's own case: cancel on the first progress event of a 1 MiB upload.
        let task = bucket.storage.reference(withPath: "first.bin").putData(Data(count: Self.size))
        task.observe(.progress) { _ in task.cancel() }
        #expect(errorCode(await EventRecorder(task).finished()) == .cancelled)
        #expect(bucket.allFiles().isEmpty)
    }

    @Test func cancelFromTheLastProgressHandlerOnGCS() async throws {
        let name = try await FakeGCS.makeBucket()
        let last = await cancelOnLastProgress(gcsStorage(bucket: name, port: try FakeGCS.port()), object: "c.bin")
        #expect(last.status == .failure)
        #expect(errorCode(last) == .cancelled)
    }

    @Test func cancelAfterSuccessChangesNothing() async throws {
        let bucket = try LocalBucketFixture()
        let task = bucket.storage.reference(withPath: "done.txt").putData(Data("done".utf8))
        let last = await EventRecorder(task).finished()
        task.cancel()
        #expect(last.status == .success)
        #expect(task.snapshot.status == .success)
        #expect(try bucket.storedBytes("done.txt") == Data("done".utf8))
    }

    @Test func serverErrorsCarryTheSDKsResponseKeys() async throws {
        let name = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "403:2"])
        let storage = gcsStorage(bucket: name, port: proxy.port)
        let ref = storage.reference(withPath: "secret")
        let error: (any Error)? = await withCheckedContinuation { continuation in
            ref.putData(Data("x".utf8)) { _, error in continuation.resume(returning: error) }
        }
        let nsError = try #require(error as? NSError)
        #expect(nsError.code == StorageErrorCode.unauthorized.rawValue)
        #expect(nsError.userInfo["ResponseErrorCode"] as? Int == 403)
        #expect(nsError.userInfo["ResponseErrorDomain"] as? String == "com.google.HTTPStatus")
        #expect(nsError.userInfo["ResponseCode"] as? Int == 403)   // Hoist's key, kept
        let body = try #require(nsError.userInfo["ResponseBody"] as? String)
        #expect(!body.isEmpty)
        #expect(nsError.userInfo["data"] as? Data == Data(body.utf8))
        let underlying = try #require(nsError.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(underlying.domain == "com.google.HTTPStatus")
        #expect(underlying.code == 403)
        #expect(nsError.userInfo["bucket"] as? String == name)
        #expect(nsError.userInfo["object"] as? String == "secret")

        do {
            _ = try await ref.putDataAsync(Data("x".utf8))
            Issue.record("no error")
        } catch let error as StorageError {
            guard case .unauthorized(let bucket, let object, let serverError) = error else { Issue.record("\(error)"); return }
            #expect(bucket == name)
            #expect(object == "secret")
            #expect(serverError["ResponseErrorCode"] as? Int == 403)
            #expect(serverError["ResponseErrorDomain"] as? String == "com.google.HTTPStatus")
        }
    }

    @Test func getMetadataRetriesTransientFailuresWithinTheOperationRetryTime() async throws {
        let name = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "503:2:GET"])
        let storage = gcsStorage(bucket: name, port: proxy.port)
        let ref = storage.reference(withPath: "flaky.txt")
        _ = try await ref.putDataAsync(Data("flaky".utf8))
        #expect(try await ref.getMetadata().size == 5)
        #expect(proxy.requests.filter { $0["method"] as? String == "GET" }.count == 3)   // two 503s, then the answer
        #expect(try await ref.downloadURL().absoluteString.contains("/o/flaky.txt?alt=media&token="))
    }

    @Test func getMetadataStopsRetryingAtTheOperationRetryTime() async throws {
        let name = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "503:1000:GET"])
        let storage = gcsStorage(bucket: name, port: proxy.port)
        storage.maxOperationRetryTime = 1
        let started = Date()
        let error: (any Error)? = await withCheckedContinuation { continuation in
            storage.reference(withPath: "never").getMetadata { _, error in continuation.resume(returning: error) }
        }
        let nsError = try #require(error as? NSError)
        #expect(nsError.code == StorageErrorCode.retryLimitExceeded.rawValue)
        #expect(nsError.userInfo["ResponseErrorCode"] as? Int == 503)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(proxy.requests.count > 2)
    }

    @Test func downloadURLsHaveTheSDKsForm() async throws {
        let backend = GCSBackend(GCSBackend.Configuration(bucket: "bucket"))
        let url = try await backend.downloadURL(
            for: "path/to/object", stored: ObjectResource(metadata: [GCSBackend.downloadTokensKey: "12345,ignored"]))
        #expect(url.absoluteString == "https://firebasestorage.googleapis.com:443/v0/b/bucket/o/path%2Fto%2Fobject?alt=media&token=12345")
        // FirebaseStorage leaves `!$'()*,=:@` as they are, and escapes `&`, `+`, `;`, `/` and space.
        let special = try await backend.downloadURL(
            for: "ios/public/-._~!$'()*,=:@&+; x", stored: ObjectResource(metadata: [GCSBackend.downloadTokensKey: "t"]))
        #expect(special.absoluteString
            == "https://firebasestorage.googleapis.com:443/v0/b/bucket/o/ios%2Fpublic%2F-._~!$'()*,=:@%26%2B%3B%20x?alt=media&token=t")
        let storage = Storage(url: "gs://bucket", backend: backend)
        #expect(try storage.reference(for: special).fullPath == "ios/public/-._~!$'()*,=:@&+; x")
    }

    @Test func useEmulatorPointsAGSStorageAtTheServer() async throws {
        let name = try await FakeGCS.makeBucket()
        let port = try FakeGCS.port()
        let storage = Storage(url: "gs://\(name)", backend: GCSBackend(GCSBackend.Configuration(bucket: name)))
        storage.useEmulator(withHost: "127.0.0.1", port: port)
        let ref = storage.reference(withPath: "emulated.txt")
        let metadata = try await ref.putDataAsync(Data("emulated".utf8))
        #expect(metadata.size == 8)
        #expect(try await FakeGCS.download(bucket: name, object: "emulated.txt") == Data("emulated".utf8))
        let url = try await ref.downloadURL()
        #expect(url.absoluteString.hasPrefix("http://127.0.0.1:\(port)/v0/b/\(name)/o/emulated.txt?alt=media&token="))
        #expect(try await ref.getMetadata().size == 8)
    }
}
