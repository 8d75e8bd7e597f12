import Foundation
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// What every backend must do, checked the same way on each (`ConformanceBackend.all`): the
/// bytes and metadata the server holds, checksums, event order and error codes. Tests that need
/// a capability run on the backends whose descriptor has it.
@Suite struct BackendConformanceTests {
    // MARK: - Objects and metadata

    @Test(arguments: ConformanceBackend.all)
    func everyMetadataFieldRoundTrips(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let data = patternData(100_000)
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-test"
        metadata.cacheControl = "public, max-age=60"
        metadata.contentDisposition = "attachment; filename=\"r.bin\""
        metadata.contentEncoding = "identity"
        metadata.contentLanguage = "de"
        metadata.customMetadata = ["owner": "ada", "emoji": "🚀"]
        let ref = target.storage.reference(withPath: target.object("dir/r.bin"))
        let stored = try await ref.putDataAsync(data, metadata: metadata)
        let fetched = try await ref.getMetadata()

        // The bytes are compared in the other tests: gcp-storage-emulator cannot serve an object whose
        // custom metadata is not Latin-1 (it sends it as headers); the server's checksums say enough here.
        for object in [stored, fetched] {
            #expect(object.bucket == target.backend.bucket)
            #expect(object.path == target.object("dir/r.bin"))
            #expect(object.name == "r.bin")
            #expect(object.size == 100_000)
            #expect(object.md5Hash == md5Base64(data))
            #expect(object.generation > 0)
            #expect(object.contentType == "application/x-test")
            #expect(object.cacheControl == "public, max-age=60")
            #expect(object.contentDisposition == "attachment; filename=\"r.bin\"")
            #expect(object.contentEncoding == "identity")
            #expect(object.contentLanguage == "de")
            // Firebase download tokens are the backend's to add (GCS does); the user's keys are kept as they were.
            let custom = (object.customMetadata ?? [:]).filter { $0.key != GCSBackend.downloadTokensKey }
            #expect(custom == ["owner": "ada", "emoji": "🚀"])
        }
        #expect(fetched.generation == stored.generation)
        let resource = try await target.backend.metadata(of: target.object("dir/r.bin"))
        #expect(resource.crc32c == backend.reportedCRC32C(of: data))
    }

    @Test(arguments: ConformanceBackend.all)
    func contentTypesAreGuessedFromTheExtension(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let directory = try TemporaryDirectory()
        let photo = try directory.write("photo.JPG", Data("jpg".utf8))
        let plain = try directory.write("noext", Data("x".utf8))
        let storage = target.storage
        func put(_ file: URL, as name: String, _ metadata: StorageMetadata? = nil) async throws -> String? {
            _ = try await storage.reference(withPath: target.object(name)).putFileAsync(from: file, metadata: metadata)
            // What the server holds, not what the task said.
            return try await storage.reference(withPath: target.object(name)).getMetadata().contentType
        }
        #expect(try await put(photo, as: "images/photo.jpg") == "image/jpeg")
        // A file without an extension takes the object's; with neither, application/octet-stream.
        #expect(try await put(plain, as: "a/page.html") == "text/html")
        #expect(try await put(plain, as: "a/blob") == "application/octet-stream")
        // A type the caller gives wins over the guess.
        let metadata = StorageMetadata()
        metadata.contentType = "text/plain"
        #expect(try await put(photo, as: "b/photo.jpg", metadata) == "text/plain")
        // putData guesses nothing.
        _ = try await storage.reference(withPath: target.object("b/x.png")).putDataAsync(Data([1]))
        #expect(try await storage.reference(withPath: target.object("b/x.png")).getMetadata().contentType
            == "application/octet-stream")
    }

    @Test(arguments: ConformanceBackend.all)
    func emptyObject(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        // Recorded from before the task starts: the one progress event of an empty object is its first.
        let (_, recorder) = EventRecorder.upload(.data(Data()), to: target.storage.reference(withPath: target.object("empty")))
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.size == 0)
        #expect(last.metadata?.md5Hash == "1B2M2Y8AsgTpgAmY7PhCfg==")
        #expect(recorder.events.filter { $0.status == .progress } == [.init(status: .progress, completed: 0, total: 0)])
        #expect(try await target.storedBytes("empty") == Data())
        #expect(try await target.backend.metadata(of: target.object("empty")).crc32c == backend.reportedCRC32C(of: Data()))
    }

    /// Over 8 MiB: GCS's resumable session, the local bucket's resumable session file.
    @Test(arguments: ConformanceBackend.all)
    func largeObjectByteForByte(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let directory = try TemporaryDirectory()
        let data = patternData(9 << 20 + 3)
        let file = try directory.write("movie.mp4", data)
        let (_, recorder) = EventRecorder.upload(.file(file), to: target.storage.reference(withPath: target.object("videos/movie.mp4")))
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.size == Int64(data.count))
        #expect(last.metadata?.md5Hash == md5Base64(data))
        #expect(last.metadata?.contentType == "video/mp4")
        #expect(try await target.storedBytes("videos/movie.mp4") == data)
        #expect(try await target.backend.metadata(of: target.object("videos/movie.mp4")).crc32c == backend.reportedCRC32C(of: data))
        #expect(folded(recorder.statuses) == [.resume, .progress, .success])
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted() && progress.last == Int64(data.count))
        #expect(target.leftovers == [])
    }

    // MARK: - Sessions

    /// A session interrupted after some bytes (as a killed process leaves it) is reopened by its
    /// id as a new session object, which sends from the offset the server confirms.
    @Test(arguments: ConformanceBackend.all.filter(\.resumesFromConfirmedOffset))
    func resumeFromTheConfirmedOffset(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let data = patternData(9 << 20 + 5)
        let name = target.object("resumed.bin")
        let first = try await target.backend.startUpload(to: name, attributes: ObjectResource(), size: Int64(data.count))
        try await sendPart(of: data, to: first, atLeast: 2 << 20)

        let session = try await target.backend.resumeUpload(id: first.id)
        let offset = try await session.confirmedOffset()
        #expect(offset >= 1 << 20 && offset < Int64(data.count), "the server holds \(offset) bytes")
        #expect(try await target.storedBytes("resumed.bin") == nil)   // nothing visible yet
        let reported = Mutex<[Int64]>([])
        let outcome = try await session.send(from: ByteSource(data: data), at: offset, control: TransferControl()) { sent in
            reported.withLock { $0.append(sent) }
        }
        guard case .finished(let resource) = outcome else { Issue.record("not finished: \(outcome)"); return }
        #expect(resource.size == Int64(data.count))
        #expect(resource.md5Hash == md5Base64(data))
        #expect(resource.crc32c == crc32cBase64(data))
        #expect(try await target.storedBytes("resumed.bin") == data)
        // Progress counted from the server's offset, not from zero.
        let progress = reported.withLock { $0 }
        #expect(progress.first.map { $0 >= offset } == true && progress.last == Int64(data.count))
        #expect(target.leftovers == [])
    }

    /// The same, but the local file changed between the runs: the object would mix two files,
    /// so the backend refuses it with `nonMatchingChecksum` and leaves nothing.
    @Test(arguments: ConformanceBackend.all.filter(\.resumesFromConfirmedOffset))
    func resumeWithOtherBytesFailsWithNonMatchingChecksum(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let old = patternData(9 << 20, seed: 1)
        let new = patternData(9 << 20, seed: 2)
        let name = target.object("changed.bin")
        let first = try await target.backend.startUpload(to: name, attributes: ObjectResource(), size: Int64(old.count))
        try await sendPart(of: old, to: first, atLeast: 2 << 20)

        let session = try await target.backend.resumeUpload(id: first.id)
        let offset = try await session.confirmedOffset()
        await #expect { _ = try await session.send(from: ByteSource(data: new), at: offset, control: TransferControl()) { _ in } }
            throws: { StorageErrorCode(of: $0) == .nonMatchingChecksum }
        #expect(try await target.storedBytes("changed.bin") == nil)
        await #expect { _ = try await target.backend.metadata(of: name) } throws: { StorageErrorCode(of: $0) == .objectNotFound }
        #expect(target.leftovers == [])
    }

    /// An abandoned session leaves nothing: no object, and (where the server ends sessions) no
    /// session to resume.
    @Test(arguments: ConformanceBackend.all)
    func abandonLeavesNothing(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let data = patternData(9 << 20)
        let name = target.object("abandoned.bin")
        let session = try await target.backend.startUpload(to: name, attributes: ObjectResource(), size: Int64(data.count))
        try await sendPart(of: data, to: session, atLeast: 1 << 20)
        await session.abandon()
        await #expect { _ = try await target.backend.metadata(of: name) } throws: { StorageErrorCode(of: $0) == .objectNotFound }
        if backend.abandonEndsSession {
            await #expect { _ = try await target.backend.resumeUpload(id: session.id).confirmedOffset() } throws: {
                StorageErrorCode(of: $0) == .objectNotFound
            }
        }
        #expect(try await target.storedBytes("abandoned.bin") == nil)
        #expect(target.leftovers == [])
    }

    @Test(arguments: ConformanceBackend.all)
    func pauseStopsTheTransferAndResumeFinishesIt(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        // Slowed to about half a second, so the pause lands well before the end.
        target.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 64 << 20)
        let data = patternData(32 << 20)
        let task = target.storage.reference(withPath: target.object("paused.bin")).putData(data)
        let pausedOnce = Mutex(false)
        let recorder = EventRecorder(task) { _ in
            if pausedOnce.withLock({ let first = !$0; $0 = true; return first }) { task.pause() }
        }
        let deadline = Date().addingTimeInterval(10)
        while !recorder.statuses.contains(.pause), Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        try #require(recorder.statuses.contains(.pause), "no pause event: \(folded(recorder.statuses))")
        try await Task.sleep(for: .milliseconds(200))
        let held = recorder.events.count
        let completed = task.snapshot.progress?.completedUnitCount ?? -1
        try await Task.sleep(for: .milliseconds(400))
        // Really stopped: no event, no byte.
        #expect(recorder.events.count == held)
        #expect(task.snapshot.progress?.completedUnitCount == completed)
        #expect(completed < Int64(data.count))
        #expect(task.snapshot.status == .pause)

        task.resume()
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(folded(recorder.statuses) == [.resume, .progress, .pause, .resume, .progress, .success])
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted() && progress.last == Int64(data.count))
        #expect(try await target.storedBytes("paused.bin") == data)
    }

    @Test(arguments: ConformanceBackend.all)
    func cancelLeavesNoObject(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        target.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 64 << 20)
        let ref = target.storage.reference(withPath: target.object("cancelled.bin"))
        let task = ref.putData(patternData(32 << 20))
        let cancelledOnce = Mutex(false)
        let recorder = EventRecorder(task) { _ in
            if cancelledOnce.withLock({ let first = !$0; $0 = true; return first }) { task.cancel() }
        }
        let last = await recorder.finished()
        #expect(last.status == .failure)
        #expect(errorCode(last) == .cancelled)
        #expect(!recorder.statuses.contains(.success))
        #expect(try await target.storedBytes("cancelled.bin") == nil)
        await #expect { _ = try await ref.getMetadata() } throws: { StorageErrorCode(of: $0) == .objectNotFound }
        #expect(target.leftovers == [])
    }

    /// A file that changes while it is read never replaces the stored object (a cron job over
    /// files still being written): the backend stops before the last bytes, the task fails
    /// (`invalidArgument`, "nothing was stored") and the object keeps its earlier bytes. One
    /// request (4 MiB; on S3 also 1 MiB, sent from the buffer it was hashed in) and a resumable
    /// session (12 MiB).
    @Test(arguments: ConformanceBackend.all.flatMap { backend in
        ((backend.name.hasPrefix("s3-") ? [1 << 20] : []) + [4 << 20, 12 << 20]).map { (backend, $0) }
    })
    func changedWhileReadLeavesTheStoredObject(_ backend: ConformanceBackend, size: Int) async throws {
        let target = try await backend.makeTarget([])
        let ref = target.storage.reference(withPath: target.object("kept.bin"))
        _ = try await ref.putDataAsync(Data("version 1".utf8))
        let folder = try TemporaryDirectory()
        let file = try folder.write("kept.bin", patternData(size))
        // Time to change it: the limiter's burst (a tenth of a second's bytes) goes at once, the rest at its pace.
        target.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: Int64(min(8 << 20, size * 2)))
        let task = ref.putFile(from: file)
        let changed = Mutex(false)
        let recorder = EventRecorder(task) { snapshot in
            guard snapshot.status == .progress, changed.withLock({ let first = !$0; $0 = true; return first }) else { return }
            guard let handle = try? FileHandle(forWritingTo: file) else { return }
            try? handle.seek(toOffset: 1000)
            handle.write(Data("changed".utf8))
            try? handle.close()
        }
        let last = await recorder.finished()
        #expect(changed.withLock { $0 })
        #expect(last.status == .failure)
        #expect(errorCode(last) == .invalidArgument)
        let message = (last.error as NSError?)?.localizedDescription ?? ""
        #expect(message.contains("changed while it was uploaded") && message.contains("nothing was stored"), "\(message)")
        // (gcp-storage-emulator stores a multipart body that stops short; Cloud Storage does not.)
        guard backend.refusesShortBodies || size > 8 << 20 else { return }
        let stored = try await target.storedBytes("kept.bin")
        #expect(stored == Data("version 1".utf8), "\(stored.map { "\($0.count) bytes" } ?? "no object")")
    }

    // MARK: - Verification

    /// Bytes flipped on the wire every time: verification deletes each bad object, the task
    /// uploads again from zero twice, then fails with `nonMatchingChecksum`, leaving nothing. On
    /// S3, whose keys have no generation, a bad object a server stored (moto checks no
    /// `Content-MD5`) is never deleted (it may be an earlier good version): the last one is
    /// left, and the file fails.
    @Test(arguments: ConformanceBackend.all.filter(\.speaksHTTP).flatMap { backend in
        [(backend, 100_000, backend.oneRequestMethod), (backend, 9 << 20, "PUT")]
    })
    func corruptedEveryTimeFailsWithNonMatchingChecksum(_ backend: ConformanceBackend, size: Int, method: String) async throws {
        let target = try await backend.makeTarget(["--corrupt-at", "\(size / 2 + 200):\(method):100"])
        // The completion handler's NSError keeps Hoist's message (the async StorageError cannot).
        let error = try #require(await putDataError(target.storage.reference(withPath: target.object("corrupt.bin")),
                                                    patternData(size)))
        let said = backend.refusesDamagedBodies ? "nothing was stored"
            : backend.deletesWhatFailsItsCheck ? "The object was deleted" : "The object was left as it is"
        #expect(error.code == StorageErrorCode.nonMatchingChecksum.rawValue && error.localizedDescription.contains(said), "\(error)")
        let stored = try await target.storedBytes("corrupt.bin")
        if backend.refusesDamagedBodies || backend.deletesWhatFailsItsCheck {
            #expect(stored == nil)
        } else {
            #expect(stored?.count == size && stored != patternData(size), "\(stored.map { "\($0.count) bytes" } ?? "no object")")
        }
        let sends = try #require(target.proxy).requests.filter {
            $0["method"] as? String == method && ($0["length"] as? Int ?? 0) >= size
        }
        #expect(sends.count == 1 + StorageUploadTask.checksumRestarts)
    }

    // MARK: - Error codes

    @Test(arguments: ConformanceBackend.all)
    func errorCodes(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let ghost = target.object("ghost")
        await #expect { _ = try await target.storage.reference(withPath: ghost).getMetadata() } throws: { error in
            StorageErrorCode(of: error) == .objectNotFound && (error as NSError).localizedDescription == "Object \(ghost) does not exist."
        }
        await #expect { _ = try await target.storage.reference(withPath: ghost).downloadURL() } throws: {
            StorageErrorCode(of: $0) == .objectNotFound
        }
        await #expect { _ = try await target.backend.resumeUpload(id: "no-such-session").confirmedOffset() } throws: {
            StorageErrorCode(of: $0) == .objectNotFound
        }
        // Deleting what is not there is no error.
        try await target.backend.delete(ghost, generation: nil)

        let missing = try await backend.missingBucket()
        for size in [10, 9 << 20] {   // one request, and a session
            let error = try #require(await putDataError(missing.reference(withPath: "x"), patternData(size)))
            #expect(StorageErrorCode(of: error) == .bucketNotFound, "\(error)")
        }
        await #expect { _ = try await missing.reference(withPath: "x").getMetadata() } throws: {
            StorageErrorCode(of: $0) == .objectNotFound
        }
    }

    // MARK: - Helpers

    /// Sends `data` into `session` until the backend reported at least `bytes` sent, then stops
    /// the transfer as a killed process would (the session is not abandoned).
    private func sendPart(of data: Data, to session: any UploadSession, atLeast bytes: Int64) async throws {
        let control = TransferControl()
        do {
            _ = try await session.send(from: ByteSource(data: data), at: 0, control: control) { sent in
                if sent >= bytes { control.cancel() }
            }
            Issue.record("the send was not interrupted")
        } catch {
            #expect(StorageErrorCode(of: error) == .cancelled, "\(error)")
        }
    }
}

/// Base64 CRC32C of `data`, as GCS's `crc32c`.
func crc32cBase64(_ data: Data) -> String {
    var checksums = Checksums()
    checksums.update(data)
    return checksums.crc32cBase64()
}
