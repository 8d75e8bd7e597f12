import Foundation
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// The `gs://` backend against real servers: fake-gcs-server for uploads and metadata,
/// gcp-storage-emulator where a resume needs truthful status queries, and the fault proxy
/// in front of either.
@Suite struct GCSBackendTests {
    /// The token goes only to the endpoint's origin: a URL that begins with `ENDPOINT/` is told
    /// so without parsing, and every other one is parsed; a longer host, a user part, another
    /// port or scheme is not the endpoint's.
    @Test func theTokenGoesOnlyToTheEndpointsOrigin() {
        let backend = GCSBackend(.init(bucket: "b", endpoint: "http://127.0.0.1:4443", downloadEndpoint: "http://127.0.0.1:4443"))
        for url in ["http://127.0.0.1:4443/upload/storage/v1/b/b/o?uploadType=multipart", "http://127.0.0.1:4443/@evil/",
                    "HTTP://127.0.0.1:4443/storage"] {
            #expect(backend.isOnEndpointOrigin(url), "\(url)")
        }
        for url in ["http://127.0.0.1:44430/", "http://127.0.0.1:4443.evil.example/", "http://127.0.0.1:4443@evil/",
                    "https://127.0.0.1:4443/", "http://127.0.0.2:4443/", "http://127.0.0.1:4443\\@evil/", "http://127.0.0.1/"] {
            #expect(!backend.isOnEndpointOrigin(url), "\(url)")
        }
        let noOrigin = GCSBackend(.init(bucket: "b", endpoint: "http://user@127.0.0.1:4443", downloadEndpoint: "http://127.0.0.1:4443"))
        #expect(!noOrigin.isOnEndpointOrigin("http://user@127.0.0.1:4443/upload"))
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

    /// Object names are escaped byte by byte, as Foundation's `addingPercentEncoding` does.
    @Test func percentEncodingMatchesFoundation() {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let firebase = unreserved.union(CharacterSet(charactersIn: "!$'()*,=:@"))
        var names = ["", "plain.txt", "a/b c/d+e&f;g", "100% ~tilde_under-dash.", "!$'()*,=:@#?[]{}|\\^`\"<>",
                     "résumé/日本語/😀.png", "\u{7F}\u{1}tab\there", "%2F already"]
        names.append(String((32..<127).map { Character(Unicode.Scalar(UInt8($0))) }))
        for name in names {
            #expect(GCSBackend.encode(name) == name.addingPercentEncoding(withAllowedCharacters: unreserved))
            #expect(GCSBackend.encodeForDownload(name) == name.addingPercentEncoding(withAllowedCharacters: firebase))
        }
    }

    /// An object name with dot segments goes in the path as one segment (`/` is escaped), so no
    /// client or server folds `site/../victim.txt` into `victim.txt`, where a mirror's delete
    /// would land.
    @Test func aNameWithDotSegmentsIsOnePathSegment() {
        #expect(GCSBackend.encode("site/../victim.txt") == "site%2F..%2Fvictim.txt")
        #expect(GCSBackend.encode("./a/./b") == ".%2Fa%2F.%2Fb")
    }

    /// A body of at most 64 KiB is read before its request and sent with the head; one byte
    /// more goes through the read callback. Either way the object is the file, byte for byte,
    /// its checksums verified, in one multipart request.
    @Test(arguments: [1, 4096, 65_536 - 300, 65_536, 65_537, 200_000])
    func smallBodiesFromMemoryAndLargerFromTheFile(size: Int) async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = gcsStorage(bucket: bucket, port: proxy.port)
        let directory = try TemporaryDirectory()
        let data = patternData(size)
        let file = try directory.write("small.bin", data)
        let stored = try await storage.reference(withPath: "s/small.bin").putFileAsync(from: file)
        #expect(stored.size == Int64(size))
        #expect(stored.md5Hash == md5Base64(data))
        #expect(try await FakeGCS.download(bucket: bucket, object: "s/small.bin") == data)
        #expect(proxy.requests.compactMap { $0["method"] as? String } == ["POST"])
    }

    @Test func downloadURLInFirebaseForm() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let port = try FakeGCS.port()
        let storage = gcsStorage(bucket: bucket, port: port)
        let ref = storage.reference(withPath: "images/a b+c.jpg")
        let stored = try await ref.putDataAsync(Data("jpg".utf8))
        let token = try #require(stored.customMetadata?["firebaseStorageDownloadTokens"])
        #expect(UUID(uuidString: token) != nil)
        let url = try await ref.downloadURL()
        #expect(url.absoluteString == "http://127.0.0.1:\(port)/v0/b/\(bucket)/o/images%2Fa%20b%2Bc.jpg?alt=media&token=\(token)")

        // The production form, from the same code with Google's hosts.
        let production = GCSBackend.Configuration(bucket: "my-app.appspot.com")
        #expect(production.downloadEndpoint == "https://firebasestorage.googleapis.com:443")   // as the SDK writes it
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
        // That a pause stops the bytes and the events is checked on every backend
        // (BackendConformanceTests); here, that a paused PUT is continued, not sent again.
        while !recorder.statuses.contains(.pause) { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(300))
        task.resume()
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try await FakeGCS.download(bucket: bucket, object: "big.bin") == data)
        // The same PUT carried on: no second request, no status query.
        #expect(proxy.requests.compactMap { $0["method"] as? String } == ["POST", "PUT"])
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
        let error = try #require(await putDataError(storage.reference(withPath: "never"), Data("x".utf8)))
        #expect(error.code == StorageErrorCode.retryLimitExceeded.rawValue
            && error.userInfo["ResponseCode"] as? Int == 503
            && (error.userInfo["ResponseBody"] as? String)?.contains("injected") == true)
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
        #expect(run.stdout.contains("missing file: failed: unknown: File at URL: path/to/missing is not reachable."))
        #expect(run.stdout.contains("missing file (async): unknown: File at URL: path/to/missing is not reachable."))
        #expect(try await FakeGCS.exists(bucket: bucket, object: "images/mountains.jpg"))
    }
}
