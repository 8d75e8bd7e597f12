import Foundation
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// The `gs://` backend against real servers: fake-gcs-server for uploads and metadata,
/// gcp-storage-emulator where a resume needs truthful status queries, and the fault proxy
/// in front of either.
@Suite struct GCSBackendTests {
    @Test func smallUploadWithEveryMetadataField() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let storage = gcsStorage(bucket: bucket, port: try FakeGCS.port())
        let data = patternData(100_000)
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-test"
        metadata.cacheControl = "public, max-age=60"
        metadata.contentDisposition = "attachment; filename=\"r.bin\""
        metadata.contentEncoding = "identity"
        metadata.contentLanguage = "de"
        metadata.customMetadata = ["owner": "ada", "emoji": "🚀"]
        let stored = try await storage.reference(withPath: "dir/r.bin").putDataAsync(data, metadata: metadata)

        #expect(try await FakeGCS.download(bucket: bucket, object: "dir/r.bin") == data)
        #expect(stored.bucket == bucket)
        #expect(stored.path == "dir/r.bin")
        #expect(stored.size == 100_000)
        #expect(stored.md5Hash == md5Base64(data))
        #expect(stored.generation > 0)
        #expect(stored.contentType == "application/x-test")
        #expect(stored.cacheControl == "public, max-age=60")
        #expect(stored.contentDisposition == "attachment; filename=\"r.bin\"")
        #expect(stored.contentEncoding == "identity")
        #expect(stored.contentLanguage == "de")
        #expect(stored.customMetadata?["owner"] == "ada")
        #expect(stored.customMetadata?["emoji"] == "🚀")
        let token = try #require(stored.customMetadata?["firebaseStorageDownloadTokens"])
        #expect(UUID(uuidString: token) != nil)
        // Read back from the server, the same.
        let fetched = try await storage.reference(withPath: "dir/r.bin").getMetadata()
        #expect(fetched.md5Hash == stored.md5Hash)
        #expect(fetched.customMetadata == stored.customMetadata)
        #expect(fetched.cacheControl == "public, max-age=60")
    }

    @Test func largeFileGoesUpResumablyByteForByte() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let directory = try TemporaryDirectory()
        let data = patternData(12 << 20 + 3)
        let file = try directory.write("movie.mp4", data)
        let task = storage.reference(withPath: "videos/movie.mp4").putFile(from: file)
        let recorder = EventRecorder(task)
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(last.metadata?.contentType == "video/mp4")
        #expect(last.metadata?.size == Int64(data.count))
        #expect(try await FakeGCS.download(bucket: bucket, object: "videos/movie.mp4") == data)
        // One session start, one streamed PUT of the whole file.
        let requests = proxy.requests.compactMap { $0["method"] as? String }
        #expect(requests == ["POST", "PUT"])
        #expect(proxy.requests.last?["contentRange"] as? String == "bytes 0-\(data.count - 1)/\(data.count)")
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted() && progress.last == Int64(data.count))
    }

    @Test func emptyObject() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let storage = gcsStorage(bucket: bucket, port: try FakeGCS.port())
        let stored = try await storage.reference(withPath: "empty.txt").putDataAsync(Data())
        #expect(stored.size == 0)
        #expect(stored.md5Hash == "1B2M2Y8AsgTpgAmY7PhCfg==")
    }

    @Test func downloadURLInFirebaseForm() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let port = try FakeGCS.port()
        let storage = gcsStorage(bucket: bucket, port: port)
        let ref = storage.reference(withPath: "images/a b+c.jpg")
        let stored = try await ref.putDataAsync(Data("jpg".utf8))
        let token = try #require(stored.customMetadata?["firebaseStorageDownloadTokens"])
        let url = try await ref.downloadURL()
        #expect(url.absoluteString == "http://127.0.0.1:\(port)/v0/b/\(bucket)/o/images%2Fa%20b%2Bc.jpg?alt=media&token=\(token)")

        // The production form, from the same code with Google's hosts.
        let production = GCSBackend.Configuration(bucket: "my-app.appspot.com")
        #expect(production.downloadEndpoint == "https://firebasestorage.googleapis.com")
        #expect(production.endpoint == "https://storage.googleapis.com")
    }

    @Test func downloadTokensCanBeTurnedOff() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let storage = gcsStorage(bucket: bucket, port: try FakeGCS.port()) { $0.setsDownloadTokens = false }
        let stored = try await storage.reference(withPath: "plain").putDataAsync(Data("x".utf8))
        #expect(stored.customMetadata?["firebaseStorageDownloadTokens"] == nil)
    }

    @Test func pauseAndResumeOnTheWire() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let directory = try TemporaryDirectory()
        let data = patternData(64 << 20)
        let file = try directory.write("big.bin", data)
        let task = storage.reference(withPath: "big.bin").putFile(from: file)
        let pausedOnce = Mutex(false)
        let recorder = EventRecorder(task) { _ in
            if pausedOnce.withLock({ let first = !$0; $0 = true; return first }) { task.pause() }
        }
        while !recorder.statuses.contains(.pause) { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(300))
        let held = recorder.events.count
        let completed = task.snapshot.progress?.completedUnitCount ?? -1
        try await Task.sleep(for: .milliseconds(500))
        #expect(recorder.events.count == held)
        #expect(task.snapshot.progress?.completedUnitCount == completed)
        #expect(completed < Int64(data.count))
        task.resume()
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(folded(recorder.statuses) == [.resume, .progress, .pause, .resume, .progress, .success])
        #expect(try await FakeGCS.download(bucket: bucket, object: "big.bin") == data)
        // The same PUT carried on: no second request, no status query.
        #expect(proxy.requests.compactMap { $0["method"] as? String } == ["POST", "PUT"])
    }

    @Test func cancelAbandonsTheSessionAndLeavesNoObject() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let directory = try TemporaryDirectory()
        let file = try directory.write("big.bin", patternData(64 << 20))
        let task = storage.reference(withPath: "cancelled.bin").putFile(from: file)
        let cancelledOnce = Mutex(false)
        let recorder = EventRecorder(task) { _ in
            if cancelledOnce.withLock({ let first = !$0; $0 = true; return first }) { task.cancel() }
        }
        let last = await recorder.finished()
        #expect(errorCode(last) == .cancelled)
        #expect(try await !FakeGCS.exists(bucket: bucket, object: "cancelled.bin"))
        #expect(proxy.requests.contains { $0["method"] as? String == "DELETE" })
    }

    @Test func brokenConnectionResumesFromTheServersOffset() async throws {
        let port = try StorageEmulator.port()
        let cutAt = 3 << 20
        let proxy = try FaultProxy(upstreamPort: port, ["--cut-after", "\(cutAt):1:PUT"])
        let storage = gcsStorage(bucket: StorageEmulator.bucket, port: proxy.port) { $0.multipartThreshold = 1 << 20 }
        let directory = try TemporaryDirectory()
        let data = patternData(8 << 20)
        let file = try directory.write("resume.bin", data)
        let object = "resume-\(UUID().uuidString).bin"
        let stored = try await storage.reference(withPath: object).putFileAsync(from: file)
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: object, port: port) == data)

        #expect(proxy.log.contains { $0["event"] as? String == "cut" })
        let ranges = proxy.requests.compactMap { $0["contentRange"] as? String }
        // First PUT from 0; then a status query; then the rest from exactly what the server held.
        #expect(ranges.first == "bytes 0-\(data.count - 1)/\(data.count)")
        #expect(ranges.contains("bytes */\(data.count)"))
        #expect(ranges.last == "bytes \(cutAt)-\(data.count - 1)/\(data.count)")
    }

    @Test(arguments: [503, 429, 500, 408])
    func transientStatusesAreRetried(status: Int) async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "\(status):2:POST"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        let data = patternData(10_000)
        let stored = try await storage.reference(withPath: "retried").putDataAsync(data)
        #expect(stored.size == 10_000)
        #expect(try await FakeGCS.download(bucket: bucket, object: "retried") == data)
        #expect(proxy.requests.filter { $0["method"] as? String == "POST" }.count == 3)
    }

    @Test func retryAfterIsHonored() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "429:1:POST", "--retry-after", "1"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        let started = Date()
        _ = try await storage.reference(withPath: "later").putDataAsync(Data("x".utf8))
        #expect(Date().timeIntervalSince(started) >= 1.0)
    }

    @Test func retriesStopAtTheRetryTime() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "503:1000"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        storage.maxUploadRetryTime = 1
        let started = Date()
        await #expect { try await storage.reference(withPath: "never").putDataAsync(Data("x".utf8)) } throws: { error in
            let error = error as NSError
            return error.code == StorageErrorCode.retryLimitExceeded.rawValue
                && error.userInfo["ResponseCode"] as? Int == 503
                && (error.userInfo["ResponseBody"] as? String)?.contains("injected") == true
        }
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(proxy.requests.count > 2)
    }

    @Test func forbiddenIsUnauthorizedWithTheServersAnswer() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "403:1"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        await #expect { try await storage.reference(withPath: "secret").putDataAsync(Data("x".utf8)) } throws: { error in
            let error = error as NSError
            return error.code == StorageErrorCode.unauthorized.rawValue
                && error.userInfo["ResponseCode"] as? Int == 403
                && error.localizedDescription == "User does not have permission to access gs://\(bucket)/secret."
        }
        #expect(proxy.requests.count == 1)   // 403 is not retried
    }

    @Test func missingBucketIsBucketNotFound() async throws {
        let storage = gcsStorage(bucket: "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())", port: try FakeGCS.port())
        for size in [10, 3 << 20] {   // multipart and resumable
            await #expect { try await storage.reference(withPath: "x").putDataAsync(patternData(size)) } throws: { error in
                (error as NSError).code == StorageErrorCode.bucketNotFound.rawValue
            }
        }
        await #expect { try await storage.reference(withPath: "x").getMetadata() } throws: { error in
            (error as NSError).code == StorageErrorCode.objectNotFound.rawValue
        }
    }

    @Test func emulatorHostFromTheEnvironment() throws {
        for (value, base) in [("127.0.0.1:4443", "http://127.0.0.1:4443"), ("http://localhost:9/", "http://localhost:9"),
                              ("https://emu.test:1", "https://emu.test:1")] {
            let configuration = try GCSBackend.Configuration.fromEnvironment(bucket: "b", ["STORAGE_EMULATOR_HOST": value])
            #expect(configuration.endpoint == base)
            #expect(configuration.downloadEndpoint == base)
        }
        #expect(try GCSBackend.Configuration.fromEnvironment(bucket: "b", [:]).endpoint == "https://storage.googleapis.com")
    }

    @Test func seedGuideRunsAgainstGCS() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let examples = productsDirectory.appendingPathComponent("hoist-examples").path
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(try FakeGCS.port())"
        environment["HOIST_STORAGE_URL"] = "gs://\(bucket)"
        let run = try runProcess(examples, [], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("bucket: gs://\(bucket) (\(bucket))"))
        #expect(run.stdout.contains("upload from memory: 19 bytes, download URL http://127.0.0.1:"))
        #expect(run.stdout.contains("manage uploads: failed: cancelled"))
        #expect(run.stdout.contains("full example: 100%"))
        #expect(run.stdout.contains("missing file: failed: objectNotFound"))
        #expect(try await FakeGCS.exists(bucket: bucket, object: "images/mountains.jpg"))
    }
}
