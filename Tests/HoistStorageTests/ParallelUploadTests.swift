import Foundation
import HoistHTTP
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// Parallel composite uploads (`GCSParallelSession`): a large file in parts sent at once as
/// component objects, joined by `compose`, checked by the CRC32C combined from the parts'.
@Suite struct ParallelUploadTests {
    /// The CRC32C of a file from its parts' CRC32Cs and lengths, cut anywhere, equals the CRC32C
    /// of the whole: what the composed object is checked against without reading it again.
    @Test func partsCRC32CsCombineToTheWholeFiles() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<40 {
            let data = patternData(Int.random(in: 1...300_000, using: &generator), seed: UInt8(round))
            var whole = Checksums.CRC32C()
            data.withUnsafeBytes { whole.update($0) }
            var cuts = (0..<Int.random(in: 0...6, using: &generator)).map { _ in Int.random(in: 0...data.count, using: &generator) }
            cuts = ([0] + cuts.sorted() + [data.count])
            var combined: UInt32 = 0
            for (start, end) in zip(cuts, cuts.dropFirst()) {
                var part = Checksums.CRC32C()
                data[start..<end].withUnsafeBytes { part.update($0) }
                combined = Checksums.crc32cCombine(combined, part.value, secondLength: Int64(end - start))
            }
            #expect(combined == whole.value, "cuts \(cuts)")
        }
    }

    /// A journal's id of a parallel upload reads back as written; one that is not (a token
    /// outside the allow-list, a part count that does not match, sizes out of bounds) is refused.
    @Test func planIDsRoundTripAndHostileOnesAreRefused() throws {
        let plan = GCSParallelSession.Plan(path: "a b/c.bin", size: 10 << 20, partSize: 4 << 20, token: "0f3a-beef",
                                           urls: ["http://h/1", "http://h/2", "http://h/3"])
        #expect(GCSParallelSession.Plan(id: plan.id) == plan)
        #expect(plan.component(2) == "hoist-parallel-uploads/0f3a-beef/0002")
        let hostile = [
            plan.id.replacingOccurrences(of: "0f3a-beef", with: "../x"),
            plan.id.replacingOccurrences(of: " http://h/3", with: ""),
            plan.id.replacingOccurrences(of: "\(10 << 20) ", with: "-5 "),
            plan.id.replacingOccurrences(of: " \(4 << 20) ", with: " 0 "),
            GCSParallelSession.Plan.prefix + "1 1 t p u",
            GCSParallelSession.Plan.prefix + "\(Int64.max) \(Int64.max - 1) t p u u",
        ]
        for id in hostile { #expect(GCSParallelSession.Plan(id: id) == nil, "\(id)") }
    }

    /// A journal's parallel-upload id is trusted as a session URL is: one part's URL on another
    /// host, or an id for another object, is refused before any request (nothing to send there).
    @Test func aJournaledParallelUploadElsewhereOrOfAnotherObjectIsRefused() async throws {
        let backend = GCSBackend(GCSBackend.Configuration(bucket: "b", endpoint: "http://127.0.0.1:9", downloadEndpoint: "http://127.0.0.1:9"))
        let good = "http://127.0.0.1:9/upload/storage/v1/b/b/o?uploadType=resumable&upload_id=1"
        func id(_ urls: [String], path: String = "o.bin") -> String {
            GCSParallelSession.Plan(path: path, size: 8 << 20, partSize: 4 << 20, token: "t0", urls: urls).id
        }
        await #expect(throws: StorageFailure.self) {
            _ = try await backend.resumeUpload(id: id([good, "http://attacker.example/upload/storage/v1/b/b/o?upload_id=2"]), for: "o.bin",
                                               attributes: ObjectResource())
        }
        await #expect(throws: StorageFailure.self) {
            _ = try await backend.resumeUpload(id: id([good, good], path: "other.bin"), for: "o.bin", attributes: ObjectResource())
        }
        let resumed = try await backend.resumeUpload(id: id([good, good]), for: "o.bin", attributes: ObjectResource())
        #expect(resumed.id == id([good, good]))
    }

    /// A file over the threshold goes up in parts at once: the object is the file byte for byte
    /// with its metadata and download token, its CRC32C the file's; the components carried the
    /// metadata without the token; progress only grows and ends at the size once; no component
    /// is left. Paused while some components are stored, it stops and carries on.
    @Test func aLargeFileGoesUpInPartsAndLeavesNoComponent() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = parallelStorage(bucket: bucket, port: proxy.port, streams: 2, parts: 6)
        storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 24 << 20)
        let directory = try TemporaryDirectory()
        let data = patternData((12 << 20) + 4_321)
        let file = try directory.write("scene.bin", data)
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-scene"
        metadata.customMetadata = ["team": "render"]
        let task = storage.reference(withPath: "renders/scene.bin").putFile(from: file, metadata: metadata)
        let paused = Mutex(false)
        let recorder = EventRecorder(task) { snapshot in
            if (snapshot.progress?.completedUnitCount ?? 0) > Int64(data.count) / 2, paused.withLock({ let first = !$0; $0 = true; return first }) {
                task.pause()
            }
        }
        while !recorder.statuses.contains(.pause) { try await Task.sleep(for: .milliseconds(5)) }
        let components = try await FakeGCS.list(bucket: bucket, prefix: "hoist-parallel-uploads/")
        #expect(!components.isEmpty, "no component stored by half-way")
        for component in components {
            let custom = component["metadata"] as? [String: String]
            #expect(custom?["team"] == "render" && custom?["firebaseStorageDownloadTokens"] == nil, "\(component)")
            #expect(component["contentType"] as? String == "application/x-scene")
        }
        let sentWhilePaused = proxy.requests.count
        try await Task.sleep(for: .milliseconds(300))
        #expect(proxy.requests.count == sentWhilePaused)
        task.resume()
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try await FakeGCS.download(bucket: bucket, object: "renders/scene.bin") == data)
        var crc = Checksums.CRC32C()
        data.withUnsafeBytes { crc.update($0) }
        #expect(last.metadata?.resource.crc32c == crc.base64())
        #expect(last.metadata?.contentType == "application/x-scene")
        #expect(last.metadata?.customMetadata?["team"] == "render")
        #expect(UUID(uuidString: last.metadata?.customMetadata?["firebaseStorageDownloadTokens"] ?? "") != nil)
        // Two parts in flight at once (the streams): a second data PUT began before the first ended.
        #expect(proxy.mostInFlight("PUT") == 2, "at most \(proxy.mostInFlight("PUT")) parts in flight")
        // Six sessions, one compose, and no component left.
        let posts = proxy.requests.filter { $0["method"] as? String == "POST" }.compactMap { $0["target"] as? String }
        #expect(posts.filter { $0.contains("uploadType=resumable") }.count == 6)
        #expect(posts.filter { $0.hasSuffix("/compose") }.count == 1)
        #expect(try await FakeGCS.list(bucket: bucket, prefix: "hoist-parallel-uploads/").isEmpty)
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted() && progress.last == Int64(data.count))
        #expect(progress.filter { $0 == Int64(data.count) }.count == 1)
    }

    /// More parts than one `compose` takes (32): joined in rounds through intermediate objects,
    /// each deleted after.
    @Test func morePartsThanOneComposeTakesAreJoinedInRounds() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = parallelStorage(bucket: bucket, port: proxy.port, streams: 8, parts: 40)
        let data = patternData((10 << 20) - 1_000)   // 40 parts of 256 KiB
        let directory = try TemporaryDirectory()
        let file = try directory.write("many.bin", data)
        let stored = try await storage.reference(withPath: "many.bin").putFileAsync(from: file)
        #expect(stored.size == Int64(data.count))
        #expect(try await FakeGCS.download(bucket: bucket, object: "many.bin") == data)
        let composes = proxy.requests.compactMap { $0["target"] as? String }.filter { $0.hasSuffix("/compose") }
        #expect(composes.count == 3, "\(composes)")   // two intermediates of 32 and 8, then the object
        #expect(try await FakeGCS.list(bucket: bucket, prefix: "hoist-parallel-uploads/").isEmpty)
    }

    /// A cancelled parallel upload fails with `cancelled` and leaves nothing: no object, no
    /// component.
    @Test func aCancelledParallelUploadLeavesNothing() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let storage = parallelStorage(bucket: bucket, port: try FakeGCS.port(), streams: 2, parts: 6)
        storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 16 << 20)
        let data = patternData(12 << 20)
        let directory = try TemporaryDirectory()
        let file = try directory.write("gone.bin", data)
        let task = storage.reference(withPath: "gone.bin").putFile(from: file)
        let cancelled = Mutex(false)
        let recorder = EventRecorder(task) { snapshot in
            if (snapshot.progress?.completedUnitCount ?? 0) > Int64(data.count) * 6 / 10, cancelled.withLock({ let first = !$0; $0 = true; return first }) {
                task.cancel()
            }
        }
        let last = await recorder.finished()
        #expect(last.status == .failure)
        #expect((last.error as NSError?)?.code == StorageErrorCode.cancelled.rawValue)
        #expect(try await !FakeGCS.exists(bucket: bucket, object: "gone.bin"))
        #expect(try await FakeGCS.list(bucket: bucket, prefix: "hoist-parallel-uploads/").isEmpty)
    }

    /// Through a relay that caps each TCP connection (a WAN stream's limit), a parallel upload
    /// is at least three times as fast as one stream (curl's resumable PUT through the same
    /// relay), and stores the same bytes.
    @Test func partsAtOnceBeatOneCappedStream() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let rate = 8 << 20
        let relay = try CountingRelay(upstreamPort: try FakeGCS.port(), bytesPerSecond: rate)
        let data = patternData(48 << 20)
        let directory = try TemporaryDirectory()
        let file = try directory.write("wan.bin", data)
        let single = try curlResumablePut(file: file.path, size: data.count, bucket: bucket, object: "single.bin", port: relay.port)
        let storage = parallelStorage(bucket: bucket, port: relay.port, streams: 8, parts: nil)
        // The best of up to three uploads: on a machine shared with other work, one stalls now
        // and then; parts sent one after another never come near (one stream's time).
        var parallel = Double.infinity
        for attempt in 1...3 where single / parallel < 3 {
            let start = Date()
            let stored = try await storage.reference(withPath: "parallel-\(attempt).bin").putFileAsync(from: file)
            parallel = min(parallel, Date().timeIntervalSince(start))
            #expect(stored.size == Int64(data.count))
            #expect(try await FakeGCS.download(bucket: bucket, object: "parallel-\(attempt).bin") == data)
        }
        #expect(try await FakeGCS.download(bucket: bucket, object: "single.bin") == data)
        #expect(single / parallel >= 3, "one stream \(single) s, parallel \(parallel) s (best of three)")
        print("parallel composite through a \(rate >> 20) MiB/s-per-connection relay: one stream \(single) s, parallel \(parallel) s, "
              + "ratio \(single / parallel)")
    }
    /// `parallelUploads` of a manifest: `auto` by default (the probe), `true` parallel from the
    /// threshold on at once, `false` never; any other word refused by name.
    @Test func parallelUploadsIsAutoByDefault() throws {
        func backend(_ json: String) throws -> GCSBackend {
            let options = try JSONDecoder().decode(GCSOptions.self, from: Data(json.utf8))
            return try GCSBackend(BackendContext(location: try StorageLocation(parsing: "gs://b-1"), options: options,
                                                 environment: ["STORAGE_EMULATOR_HOST": "127.0.0.1:9"]))
        }
        for json in [#"{}"#, #"{"parallelUploads":"auto"}"#] {
            let configuration = try backend(json).configuration
            #expect(configuration.parallelUploadProbe == .standard && configuration.parallelUploadThreshold == 150 << 20, "\(json)")
        }
        for json in [#"{"parallelUploads":true}"#, #"{"parallelUploads":"true"}"#] {
            let configuration = try backend(json).configuration
            #expect(configuration.parallelUploadProbe == nil && configuration.parallelUploadThreshold == 150 << 20, "\(json)")
        }
        #expect(try backend(#"{"parallelUploads":false}"#).configuration.parallelUploadThreshold == nil)
        #expect(throws: DecodingError.self) { _ = try backend(#"{"parallelUploads":"sometimes"}"#) }
    }

    /// `parallelUploads: auto` on a link faster than the probe's rate (1 MiB/s: a loaded machine's
    /// proxy is far faster): the file goes up as one resumable session of the object (its probe
    /// chunk, then the rest), byte for byte with its CRC32C; no part's session, no component, no
    /// compose, ever (the server's request log).
    @Test func autoOnAFastLinkStaysOneStreamAndComposesNothing() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let storage = autoStorage(bucket: bucket, port: proxy.port, probe: GCSParallelProbe(bytes: 2 << 20, bytesPerSecond: Double(1 << 20)))
        let data = patternData((24 << 20) + 777)
        let directory = try TemporaryDirectory()
        let file = try directory.write("fast.bin", data)
        let stored = try await storage.reference(withPath: "fast.bin").putFileAsync(from: file)
        #expect(try await FakeGCS.download(bucket: bucket, object: "fast.bin") == data)
        #expect(stored.resource.crc32c == crc32c(data))
        let requests = proxy.requests.map { ($0["method"] as? String ?? "", $0["target"] as? String ?? "") }
        #expect(requests.filter { $0.0 == "POST" && $0.1.contains("uploadType=resumable") }.count == 1, "\(requests)")
        #expect(!requests.contains { $0.1.hasSuffix("/compose") || $0.1.contains("hoist-parallel-uploads") }, "\(requests)")
        // The probe's chunk, then the rest in one PUT.
        #expect(requests.filter { $0.0 == "PUT" }.count == 2, "\(requests)")
        #expect(try await FakeGCS.list(bucket: bucket, prefix: "hoist-parallel-uploads/").isEmpty)
    }

    /// `parallelUploads: auto` through a relay capping each connection below the probe's rate:
    /// the stream is given up after its probe (its session deleted) and the file goes up as a
    /// parallel composite upload: the exact bytes with their CRC32C, one compose, no component
    /// left, and its new id reported before its parts' bytes.
    @Test func autoOnACappedLinkGoesParallel() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        let relay = try CountingRelay(upstreamPort: proxy.port, bytesPerSecond: 4 << 20)
        let storage = autoStorage(bucket: bucket, port: relay.port, probe: GCSParallelProbe(bytes: 1 << 20, bytesPerSecond: Double(16 << 20)))
        let data = patternData((16 << 20) + 4_321)
        let directory = try TemporaryDirectory()
        let file = try directory.write("slow.bin", data)
        let task = storage.reference(withPath: "slow.bin").putFile(from: file)
        let sessions = Mutex<[String]>([])
        task.onSessionStarted { id in sessions.withLock { $0.append(id) } }
        let recorder = EventRecorder(task)
        let last = await recorder.finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try await FakeGCS.download(bucket: bucket, object: "slow.bin") == data)
        #expect(last.metadata?.resource.crc32c == crc32c(data))
        let requests = proxy.requests.map { ($0["method"] as? String ?? "", $0["target"] as? String ?? "") }
        // The object's session, then four parts' sessions; the first given up, one compose.
        #expect(requests.filter { $0.0 == "POST" && $0.1.contains("uploadType=resumable") }.count == 5, "\(requests)")
        #expect(requests.filter { $0.0 == "DELETE" && $0.1.contains("/upload/") }.count == 1, "\(requests)")
        #expect(requests.filter { $0.1.hasSuffix("/compose") }.count == 1, "\(requests)")
        #expect(try await FakeGCS.list(bucket: bucket, prefix: "hoist-parallel-uploads/").isEmpty)
        let ids = sessions.withLock { $0 }
        #expect(ids.last?.hasPrefix("gcs-parallel1 ") == true, "\(ids)")
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted() && progress.last == Int64(data.count))
    }
}

/// A storage with `parallelUploads: auto` from 4 MiB on: `probe` decides, four parts at once.
func autoStorage(bucket: String, port: Int, probe: GCSParallelProbe) -> Storage {
    gcsStorage(bucket: bucket, port: port) {
        $0.parallelUploadThreshold = 4 << 20
        $0.parallelUploadStreams = 4
        $0.parallelUploadProbe = probe
        $0.multipartThreshold = 1 << 20
    }
}

/// The base64 CRC32C of `data`, as Cloud Storage gives it.
func crc32c(_ data: Data) -> String {
    var crc = Checksums.CRC32C()
    data.withUnsafeBytes { crc.update($0) }
    return crc.base64()
}

/// A storage sending files of 4 MiB and more in `parts` parts (nil: one per stream), `streams` at once.
func parallelStorage(bucket: String, port: Int, streams: Int, parts: Int?) -> Storage {
    gcsStorage(bucket: bucket, port: port) {
        $0.parallelUploadThreshold = 4 << 20
        $0.parallelUploadStreams = streams
        $0.parallelUploadParts = parts
        $0.multipartThreshold = 1 << 20
    }
}

/// One resumable upload by curl (a session, then one streamed `PUT` of the file): its seconds.
func curlResumablePut(file: String, size: Int, bucket: String, object: String, port: Int) throws -> TimeInterval {
    let base = "http://127.0.0.1:\(port)"
    let start = Date()
    let session = try runProcess("/usr/bin/curl", [
        "-s", "-D", "-", "-o", "/dev/null", "-X", "POST", "-H", "Content-Type: application/json",
        "-d", #"{"name":"\#(object)"}"#, "\(base)/upload/storage/v1/b/\(bucket)/o?uploadType=resumable&name=\(object)",
    ])
    guard let location = session.stdout.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("location:") }) else {
        throw TestServerError("no session: \(session.stdout) \(session.stderr)")
    }
    let url = location.dropFirst("location:".count).trimmingCharacters(in: .whitespaces)
    let put = try runProcess("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "-H",
                                               "Content-Range: bytes 0-\(size - 1)/\(size)", "-T", file, url])
    guard put.stdout == "200" || put.stdout == "201" else { throw TestServerError("curl PUT: \(put.stdout) \(put.stderr)") }
    return Date().timeIntervalSince(start)
}
