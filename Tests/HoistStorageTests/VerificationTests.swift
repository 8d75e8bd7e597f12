import Foundation
import HoistHTTP
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// "Done" means the stored object equals the whole local file: every path to success compares
/// size and checksums with the file, and a mismatch is repaired by uploading again from zero.
@Suite struct VerificationTests {
    /// fake-gcs-server finalizes a truncated object when asked for a session's status: the
    /// object it answers with must be refused, deleted, and the file sent again whole.
    @Test func truncatedObjectFromAStatusQueryIsUploadedAgain() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let cutAt = 3 << 20
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--cut-after", "\(cutAt):1:PUT"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let directory = try TemporaryDirectory()
        let data = patternData(8 << 20 + 5)
        let file = try directory.write("cut.bin", data)
        let stored = try await storage.reference(withPath: "cut.bin").putFileAsync(from: file)
        #expect(stored.size == Int64(data.count))
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: bucket, object: "cut.bin") == data)
        // The status query finalized a short object; it was deleted and a new session sent everything.
        let methods = proxy.requests.compactMap { $0["method"] as? String }
        #expect(methods.filter { $0 == "POST" }.count == 2, "\(methods)")
        #expect(methods.contains("DELETE"))
    }

    /// A session resumed from an earlier process whose server already finished it with other
    /// bytes (here: the session's object is complete but the local file changed since).
    @Test func resumedSessionFinishedWithOtherBytesIsReplaced() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let storage = gcsStorage(bucket: bucket, port: try FakeGCS.port()) { $0.multipartThreshold = 1 << 20 }
        let backend = try #require(storage.backend as? GCSBackend)
        let old = patternData(2 << 20, seed: 1)
        // An earlier "process" sent the old version completely but never journaled it.
        let session = try await backend.startUpload(to: "r.bin", attributes: ObjectResource(), size: Int64(old.count))
        _ = try await session.send(from: ByteSource(data: old), at: 0, control: TransferControl(limiter: nil)) { _ in }

        let directory = try TemporaryDirectory()
        let new = patternData(2 << 20, seed: 2)
        let file = try directory.write("r.bin", new)
        let task = storage.reference(withPath: "r.bin").putFile(from: file, metadata: nil, resumingSession: session.id)
        let last = await EventRecorder(task).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.md5Hash == md5Base64(new))
        #expect(try await FakeGCS.download(bucket: bucket, object: "r.bin") == new)
    }

    /// A process finished a session and died before it could record it; gcp-storage-emulator
    /// then forgets the session (404 on its status query). The next process resuming it finds
    /// the object stored with the file's bytes and metadata and does not send it again (a
    /// second worker would otherwise store it twice); with other bytes it uploads anew.
    @Test func aFinishedSessionTheServerForgotIsNotSentAgain() async throws {
        let proxy = try FaultProxy(upstreamPort: try StorageEmulator.port(), [])
        let storage = gcsStorage(bucket: StorageEmulator.bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let name = "forgotten-\(UUID().uuidString.prefix(8)).bin"
        let directory = try TemporaryDirectory()
        let data = patternData(3 << 20, seed: 3)
        let file = try directory.write("f.bin", data)
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-test"
        metadata.customMetadata = ["k": "v"]
        let first = storage.reference(withPath: name).putFile(from: file, metadata: metadata)
        let done = await EventRecorder(first).finished()
        #expect(done.status == .success)
        let session = try #require(first.sessionID)
        let generation = try #require(done.metadata?.generation)

        let again = storage.reference(withPath: name).putFile(from: file, metadata: metadata, resumingSession: session)
        let last = await EventRecorder(again).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.generation == generation)
        #expect(last.metadata?.md5Hash == md5Base64(data))
        let starts = proxy.requests.filter { $0["method"] as? String == "POST" && ($0["target"] as? String ?? "").contains("uploadType=resumable") }
        #expect(starts.count == 1, "the finished file was sent again")

        // Other bytes (or other metadata) under that session: uploaded anew.
        let changed = patternData(3 << 20, seed: 4)
        try changed.write(to: file)
        let replaced = await EventRecorder(storage.reference(withPath: name).putFile(from: file, metadata: metadata,
                                                                                     resumingSession: session)).finished()
        #expect(replaced.status == .success)
        #expect(replaced.metadata?.md5Hash == md5Base64(changed))
        #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: name, port: try StorageEmulator.port()) == changed)
    }

    /// A small file (one request, no session) that a worker that died may have stored:
    /// `unlessStored` takes the stored object when it holds the file's bytes and metadata, and
    /// uploads otherwise.
    @Test func aSmallFileAlreadyStoredIsNotSentAgainUnlessStored() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        let directory = try TemporaryDirectory()
        let data = patternData(50_000, seed: 5)
        let file = try directory.write("s.bin", data)
        let first = try await storage.reference(withPath: "s.bin").putFileAsync(from: file)
        let posts = { proxy.requests.filter { $0["method"] as? String == "POST" }.count }
        #expect(posts() == 1)
        let again = await EventRecorder(storage.reference(withPath: "s.bin").putFile(from: file, metadata: nil, resumingSession: nil,
                                                                                      unlessStored: true)).finished()
        #expect(again.status == .success)
        #expect(again.metadata?.generation == first.generation)
        #expect(posts() == 1, "the stored file was sent again")
        try patternData(50_000, seed: 6).write(to: file)
        let changed = await EventRecorder(storage.reference(withPath: "s.bin").putFile(from: file, metadata: nil, resumingSession: nil,
                                                                                        unlessStored: true)).finished()
        #expect(changed.status == .success && changed.metadata?.generation != first.generation)
        #expect(try await FakeGCS.download(bucket: bucket, object: "s.bin") == patternData(50_000, seed: 6))
    }

    /// A file that may be stored already is read and hashed (for the object's MD5) off the
    /// caller's executor: a job's uploads run on the HTTP engine's thread, and a large file
    /// hashed there held up every transfer (4.2 s without an event, for 2 GiB). While a 128 MiB
    /// file is hashed for a task running on the engine, a request through the engine is answered.
    @Test func aStoredFileIsHashedOffTheEnginesThread() async throws {
        let bucket = try LocalBucketFixture()
        let directory = try TemporaryDirectory()
        let size = 128 << 20
        let file = directory.url.appendingPathComponent("big.bin")
        #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
        let handle = try FileHandle(forWritingTo: file)
        for seed in 0..<128 { try handle.write(contentsOf: patternData(1 << 20, seed: UInt8(seed))) }
        try handle.close()
        _ = try await bucket.storage.reference(withPath: "big.bin").putFileAsync(from: file)
        let small = try directory.write("small.txt", Data("small".utf8))
        let clock = ContinuousClock()
        let hashed = Task {
            await withTaskExecutorPreference(CurlEngine.shared) {
                let started = clock.now
                let stored = await UploadDriver.finishedEarlier(try! ByteSource(filePath: file.path), ObjectResource(),
                                                                     at: "big.bin", backend: bucket.storage.backend)
                return (stored, clock.now - started)
            }
        }
        try await Task.sleep(for: .milliseconds(20))
        let asked = clock.now
        var request = HTTPRequest(method: "GET", url: small.absoluteString)
        request.allowedProtocols = "file"
        let answer = try await CurlEngine.shared.perform(request)
        let waited = clock.now - asked
        let (stored, hashing) = await hashed.value
        #expect(answer.bodyText == "small")
        #expect(stored?.size == Int64(size), "the stored object was not recognized")
        // The request waited for nothing while the file was hashed.
        #expect(hashing > .milliseconds(100), "hashing took \(hashing): too quick to tell")
        #expect(waited < hashing / 2, "the request waited \(waited) while the file was hashed in \(hashing)")
    }

    /// One bit flipped on the wire, in a multipart upload and in a resumable one: the CRC32C
    /// alone (MD5 is not compared) catches it, the object is deleted and sent again from zero.
    @Test(arguments: [(100_000, "POST"), (5 << 20, "PUT")])
    func corruptedTransferIsSentAgainFromZero(size: Int, method: String) async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--corrupt-at", "\(size / 2 + 200):\(method)"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let data = patternData(size)
        let stored = try await storage.reference(withPath: "flip.bin").putDataAsync(data)
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: bucket, object: "flip.bin") == data)
        #expect(proxy.requests.contains { $0["method"] as? String == "DELETE" })
    }

    /// libcurl sends a request again on a new connection when a reused one turns out dead: the
    /// body must rewind (seen with Google's storage-testbench: 503, 429, then a reset).
    @Test func resetOnAReusedConnectionIsRetried() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [
            "--keep-alive", "--fail", "503:1:POST", "--fail", "429:1:POST", "--reset", "1:POST", "--retry-after", "0",
        ])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        let data = patternData(4096)
        let stored = try await storage.reference(withPath: "reset.bin").putDataAsync(data)
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: bucket, object: "reset.bin") == data)
        let log = proxy.log
        let reset = try #require(log.firstIndex { $0["event"] as? String == "reset" && $0["reused"] as? Bool == true })
        // curl itself sent the request again at once on a new connection (rewinding the body),
        // rather than failing it into the task's backoff, which waits seconds.
        let resent = try #require(log[(reset + 1)...].first { $0["method"] as? String == "POST" && $0["event"] == nil })
        let gap = (resent["time"] as? Double ?? 0) - (log[reset]["time"] as? Double ?? 0)
        #expect(gap < 1, "\(gap) s between the reset and the next try")
    }

    /// Resets and transient statuses before any byte of a resumable upload reached the server:
    /// on fake-gcs-server, whose status query then finalizes an empty object, which the task
    /// must refuse and replace. Each ends in a byte-exact object.
    @Test(arguments: [["--reset", "1:PUT"], ["--fail", "408:1:PUT"], ["--fail", "503:1:PUT"], ["--fail", "429:1:PUT"]])
    func resumableUploadSurvivesAFaultBeforeAnyByte(fault: [String]) async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--keep-alive", "--retry-after", "0"] + fault)
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let data = patternData(3 << 20 + 11)
        let stored = try await storage.reference(withPath: "before.bin").putDataAsync(data)
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: bucket, object: "before.bin") == data)
    }

    /// A connection broken after some bytes: on gcp-storage-emulator, which keeps what it got and
    /// tells the truth when asked, the upload goes on from its offset and ends byte-exact.
    @Test(arguments: [1 << 20, 2 << 20 + 7])
    func resumableUploadSurvivesACutAfterSomeBytes(cutAt: Int) async throws {
        let port = try StorageEmulator.port()
        let proxy = try FaultProxy(upstreamPort: port, ["--cut-after", "\(cutAt):1:PUT"])
        let storage = gcsStorage(bucket: StorageEmulator.bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let data = patternData(3 << 20 + 11)
        let object = "survive-\(UUID().uuidString).bin"
        let stored = try await storage.reference(withPath: object).putDataAsync(data)
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: object, port: port) == data)
    }

    /// A local upload session (of a large file: small ones keep no session file to resume) of
    /// `written` (1 MiB), as an earlier run left it, and the local file
    /// `name` as it is now; returns the task that resumes the session.
    private func resumeHalfWrittenLocalSession(_ fixture: LocalBucketFixture, name: String, written: Data, now: Data)
        async throws -> StorageUploadTask
    {
        let backend = try #require(fixture.storage.backend as? LocalBucket)
        let session = try await backend.startUpload(to: name, attributes: ObjectResource(), size: Int64(now.count))
        try written.prefix(1 << 20).write(to: backend.uploadsDirectory.appendingPathComponent("\(session.id).part"))
        let file = try fixture.directory.write(name, now)
        return fixture.storage.reference(withPath: name).putFile(from: file, metadata: nil, resumingSession: session.id)
    }

    /// What crashed processes left under `.hoist/uploads` is cleared when a process first
    /// uploads to the bucket: part files of small uploads whose process is gone (on this host),
    /// and sessions a week old (GCS forgets its sessions after a week too). A live process's
    /// part, another host's recent one, a recent resumable session and files not Hoist's stay.
    @Test func leftoversOfDeadProcessesAndWeekOldSessionsAreCleared() async throws {
        let fixture = try LocalBucketFixture()
        let backend = try #require(fixture.storage.backend as? LocalBucket)
        let uploads = backend.uploadsDirectory
        try FileManager.default.createDirectory(at: uploads, withIntermediateDirectories: true)
        func leave(_ name: String, daysOld: Double = 0) throws {
            let url = uploads.appendingPathComponent(name)
            try Data("x".utf8).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -daysOld * 86_400)], ofItemAtPath: url.path)
        }
        let host = LocalBucket.hostTag
        let dead = String(0x7fff_fff0, radix: 16)   // above any pid_max: no such process
        let alive = String(getppid(), radix: 16)
        try leave("\(host)-\(dead)-1234-1.part")
        try leave("\(host)-\(alive)-1234-1.part")
        try leave("0badc0de-\(dead)-1234-1.part")   // another host's: its pids are not ours to judge
        try leave("0badc0de-\(dead)-1234-2.part", daysOld: 8)
        let old = UUID().uuidString.lowercased(), recent = UUID().uuidString.lowercased()
        try leave("\(old).json", daysOld: 8)
        try leave("\(old).part", daysOld: 8)
        try leave("\(recent).json", daysOld: 1)
        try leave("\(recent).part", daysOld: 1)
        try leave("notes.txt", daysOld: 30)
        _ = try await fixture.storage.reference(withPath: "a").putDataAsync(Data("a".utf8))
        let left = try FileManager.default.contentsOfDirectory(atPath: uploads.path).sorted()
        #expect(left == ["\(host)-\(alive)-1234-1.part", "0badc0de-\(dead)-1234-1.part", "\(recent).json", "\(recent).part", "notes.txt"].sorted())

        // `.hoist/uploads` replaced by a link to another folder: nothing there is touched.
        let elsewhere = try TemporaryDirectory()
        let bait = try elsewhere.write("\(host)-\(dead)-1234-1.part", Data("x".utf8))
        try FileManager.default.removeItem(at: uploads)
        try FileManager.default.createSymbolicLink(at: uploads, withDestinationURL: elsewhere.url)
        let other = Storage(url: "file://" + fixture.bucketPath, backend: LocalBucket(directory: fixture.bucketPath))   // not the cached one: it sweeps again
        _ = try? await other.reference(withPath: "b").putDataAsync(Data("b".utf8))
        #expect(FileManager.default.fileExists(atPath: bait.path))
    }

    /// The local bucket: a session an earlier run left half written, then the file changed.
    @Test func localResumeOfAChangedFileStartsAgain() async throws {
        let fixture = try LocalBucketFixture()
        let new = patternData(9 << 20, seed: 4)
        let task = try await resumeHalfWrittenLocalSession(fixture, name: "l.bin", written: patternData(9 << 20, seed: 3), now: new)
        let last = await EventRecorder(task).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try fixture.storedBytes("l.bin") == new)
        #expect(last.metadata?.md5Hash == md5Base64(new))
        #expect(!fixture.allFiles().contains { $0.hasSuffix(".part") })
    }

    /// The local bucket: the same, with a file that did not change, continues from the part.
    @Test func localResumeOfTheSameFileContinues() async throws {
        let fixture = try LocalBucketFixture()
        let data = patternData(9 << 20, seed: 5)
        let task = try await resumeHalfWrittenLocalSession(fixture, name: "same.bin", written: data, now: data)
        let recorder = EventRecorder(task)
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try fixture.storedBytes("same.bin") == data)
        // Progress started from the part's 1 MiB: the session was continued, not restarted.
        let first = recorder.events.first { $0.status == .progress }?.completed ?? 0
        #expect(first > 1 << 20)
    }

    /// A file that grows while it is read is not kept: the task fails with a message naming it.
    @Test func fileChangedWhileUploadingIsNotKept() async throws {
        let fixture = try LocalBucketFixture()
        fixture.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 4 << 20)   // ~1 s: time to change the file
        let file = try fixture.directory.write("grow.log", patternData(4 << 20))
        let task = fixture.storage.reference(withPath: "grow.log").putFile(from: file)
        let appended = Mutex(false)
        let recorder = EventRecorder(task) { snapshot in
            guard snapshot.status == .progress, !appended.withLock({ let was = $0; $0 = true; return was }) else { return }
            let handle = try! FileHandle(forWritingTo: file)
            handle.seekToEndOfFile()
            handle.write(Data("one more line\n".utf8))
            try? handle.close()
        }
        let last = await recorder.finished()
        #expect(last.status == .failure)
        #expect(errorCode(last) == .invalidArgument)
        let message = (last.error as NSError?)?.localizedDescription ?? ""
        #expect(message.contains("grow.log changed while it was uploaded"), "\(message)")
        #expect(!fixture.allFiles().contains("grow.log"))
    }
}
