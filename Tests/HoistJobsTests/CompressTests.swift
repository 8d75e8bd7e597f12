import Foundation
import HoistHTTP
@testable import HoistJobs
@testable import HoistStorage
import HoistTestSupport
import Testing

/// `compress:` on a file set: objects are the files gzipped, stored with `Content-Encoding: gzip`
/// and the file's own content type, verified against the compressed bytes, journaled under the
/// file (a change of the setting uploads again), and resumed from the server's offset after a
/// `kill -9` by compressing the file again.
@Suite struct CompressTests {
    private func runJob(_ job: Job, in fixture: JobFixture) async throws -> JobSummary { try await fixture.run(job) }

    @Test func aLocalBucketHoldsTheFilesGzippedAndTheJournalKnowsIt() async throws {
        let fixture = try JobFixture()
        let log = logText(300_000)
        let page = logText(5_000)
        let image = patternData(20_000)
        _ = try fixture.directory.write("src/app.log", log)
        _ = try fixture.directory.write("src/page.html", page)
        _ = try fixture.directory.write("src/image.png", image)
        let compressed = """
            storage: { url: 'file:bucket' }
            files: [{ root: src, compress: { format: gzip, level: 9, include: ["*.log", "*.html"] } }]
            """
        let job = try fixture.job(compressed)
        let first = try await runJob(job, in: fixture)
        #expect(first.uploaded == 3 && first.failed == 0, "\(first.failures)")
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        let storedLog = try Data(contentsOf: bucket.appendingPathComponent("app.log"))
        #expect(try gunzip(storedLog) == log)
        #expect(storedLog.count * 4 < log.count)
        #expect(try gunzip(try Data(contentsOf: bucket.appendingPathComponent("page.html"))) == page)
        #expect(try Data(contentsOf: bucket.appendingPathComponent("image.png")) == image)
        // The summary counts the bytes stored.
        #expect(first.bytes == Int64(storedLog.count) + Int64(try Data(contentsOf: bucket.appendingPathComponent("page.html")).count) + 20_000)

        let storage = try job.makeStorage()
        let html = try await storage.reference(withPath: "page.html").getMetadata()
        #expect(html.contentEncoding == "gzip")
        #expect(html.contentType == "text/html")
        let png = try await storage.reference(withPath: "image.png").getMetadata()
        #expect(png.contentEncoding == nil)

        // Unchanged: nothing goes up, also when the server is asked (the objects' sizes are the
        // gzip streams', not the files').
        let second = try await runJob(try fixture.job(compressed + "\nupload: { remoteCheck: true }\n"), in: fixture)
        #expect(second.uploaded == 0 && second.unchanged == 3)
        // The setting off: the compressed files go up again, as they are.
        let plain = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let third = try await runJob(plain, in: fixture)
        #expect(third.uploaded == 2 && third.unchanged == 1)
        #expect(try Data(contentsOf: bucket.appendingPathComponent("app.log")) == log)
        #expect(try await storage.reference(withPath: "app.log").getMetadata().contentEncoding == nil)
        // And on again: up again, compressed.
        let fourth = try await runJob(try fixture.job(compressed), in: fixture)
        #expect(fourth.uploaded == 2)
        #expect(try Data(contentsOf: bucket.appendingPathComponent("app.log")) == storedLog)
    }

    /// A compressed file's progress events count its gzip stream, whose size they know from the
    /// first event; they only grow, and end at the bytes stored, which `job_end` gives too.
    @Test func progressCountsTheGzipStreamAndOnlyGrows() throws {
        let fixture = try JobFixture()
        _ = try fixture.directory.write("src/app.log", patternData(12 << 20))
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, compress: { level: 1 } }]\n")
        let result = try runProcess(hoist, ["run", "--json", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(result.status == 0, "\(result.stderr)")
        let events = result.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let stored = try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/app.log")).count
        #expect(try gunzip(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/app.log"))) == patternData(12 << 20))
        let progress = events.filter { $0["event"] as? String == "progress" }
        #expect(!progress.isEmpty)
        #expect(progress.allSatisfy { $0["total"] as? Int == stored }, "\(progress)")
        let completed = progress.compactMap { $0["completed"] as? Int }
        #expect(completed == completed.sorted() && completed.last == stored, "\(completed)")
        #expect(events.first { $0["event"] as? String == "job_end" }?["bytes"] as? Int == stored)
    }

    @Test func cloudStorageObjectsSayContentEncodingGzip() async throws {
        let port = try FakeGCS.port()
        let bucket = try await FakeGCS.makeBucket()
        let fixture = try JobFixture()
        let log = logText(2 << 20)
        _ = try fixture.directory.write("src/app.log", log)
        let job = try fixture.job("""
            storage: { url: 'gs://\(bucket)' }
            files: [{ root: src, destination: 'logs/{relpath}', compress: gzip, metadata: { contentType: text/plain } }]
            """, environment: ["HOME": "/root", "STORAGE_EMULATOR_HOST": "127.0.0.1:\(port)"])
        let summary = try await runJob(job, in: fixture)
        #expect(summary.uploaded == 1 && summary.failed == 0, "\(summary.failures)")
        let metadata = try await CurlEngine.shared.perform(HTTPRequest(
            method: "GET", url: "http://127.0.0.1:\(port)/storage/v1/b/\(bucket)/o/\(GCSBackend.encode("logs/app.log"))"))
        let resource = try #require(try JSONSerialization.jsonObject(with: metadata.body) as? [String: Any])
        #expect(resource["contentEncoding"] as? String == "gzip")
        #expect(resource["contentType"] as? String == "text/plain")
        let size = Int(resource["size"] as? String ?? "") ?? -1
        #expect(size > 0 && size * 4 < log.count, "stored \(size) bytes of \(log.count)")
        var download = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/download/storage/v1/b/\(bucket)/o/\(GCSBackend.encode("logs/app.log"))?alt=media",
                                   headers: [("Accept-Encoding", "gzip")])
        download.maxResponseBytes = nil
        let stored = try await CurlEngine.shared.perform(download).body
        #expect(try gunzip(stored) == log)
    }

    @Test func s3ObjectsSayContentEncodingGzip() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let fixture = try JobFixture()
        let small = logText(200_000)
        let large = logText(40 << 20)
        _ = try fixture.directory.write("src/small.log", small)
        _ = try fixture.directory.write("src/large.log", large)
        let job = try fixture.job("""
            storage: { url: 's3://\(bucket)', endpoint: '\(try server.endpoint())', pathStyle: true, region: us-east-1, multipartThreshold: 5MiB }
            files: [{ root: src, compress: gzip }]
            """, environment: ["HOME": "/root", "AWS_ACCESS_KEY_ID": S3TestServer.accessKey, "AWS_SECRET_ACCESS_KEY": S3TestServer.secretKey])
        let summary = try await runJob(job, in: fixture)
        #expect(summary.uploaded == 2 && summary.failed == 0, "\(summary.failures)")
        for (key, text) in [("small.log", small), ("large.log", large)] {
            let head = try await server.request("HEAD", "/\(bucket)/\(key)")
            #expect(head.header("content-encoding") == "gzip", "\(key)")
            let stored = try #require(try await server.storedBytes(bucket: bucket, key: key))
            #expect(try gunzip(stored) == text, "\(key)")
        }
    }

    /// A 200 MiB file compressed on the way to gcp-storage-emulator, killed once bytes are moving:
    /// the next run compresses it again and continues the session from the server's offset,
    /// sending again at most what was in flight, and the object gunzips to the file.
    @Test func aKilledCompressedUploadResumesFromTheServersOffset() async throws {
        try await ExclusiveTests.shared.run { try await killedCompressedUpload() }
    }

    func killedCompressedUpload() async throws {
        let fixture = try JobFixture()
        let source = fixture.directory.url.appendingPathComponent("src/big.log")
        try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
        // Hex of random bytes: text that gzip takes to about half, so most of the stream is sent.
        _ = try python("import os\nopen('\(source.path)', 'w').write(os.urandom(100 << 20).hex())")
        let prefix = "gz-\(UUID().uuidString.prefix(8))"
        let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "25MB/s", files: ", compress: gzip")
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        // Killed once the journal holds the session and a confirmed offset past 8 MiB.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--quiet", job.manifest]
        process.environment = job.environment
        try process.run()
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let offset = try? python("""
                import sqlite3
                c = sqlite3.connect('file:\(journal)?mode=ro', uri=True)
                print(c.execute("SELECT confirmedOffset FROM file WHERE session IS NOT NULL").fetchone()[0])
                """)
            if let offset, let value = Int(offset), value > 8 << 20 { break }
            usleep(200_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try unthrottle(job.manifest, "25MB/s")   // the last run only finishes: at full speed
        let last = try runProcess(hoist, ["run", job.manifest], environment: job.environment)
        #expect(last.status == 0, "\(last.stderr)")

        let stored = try await FakeGCS.download(bucket: StorageEmulator.bucket, object: prefix + "/big.log", port: job.port)
        #expect(try gunzip(stored) == (try Data(contentsOf: source)))
        let resumes = job.proxy.resumes
        #expect(resumes.count == 1, "\(resumes)")
        #expect(resumes.allSatisfy { $0.start == $0.confirmed && $0.start > 0 }, "\(resumes)")
        let forwarded = job.proxy.log.filter { ["partial", "answer"].contains($0["event"] as? String) && $0["method"] as? String == "PUT" }
            .compactMap { $0["forwarded"] as? Int }.reduce(0, +)
        let resent = forwarded - stored.count
        print("compressed resume: \(stored.count) bytes stored, \(forwarded) sent, \(resent) sent twice, resumed from \(resumes)")
        // At most what was in flight when the process died: one piece of the stream.
        #expect(resent <= 1 << 20, "sent \(resent) bytes twice")
    }
}
