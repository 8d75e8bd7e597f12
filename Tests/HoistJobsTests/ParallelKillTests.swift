import Foundation
import HoistHTTP
import HoistStorage
import HoistTestSupport
import Testing

/// Parallel composite uploads in jobs: killed at random points (kill -9 of `hoist run`) on
/// gcp-storage-emulator, whose sessions keep the bytes of a broken `PUT` as Cloud Storage does;
/// and checked by CRC32C, since a composite object has no MD5 on Cloud Storage.
@Suite struct ParallelKillTests {
    /// Each run continues every part's session from the offset its server confirms: the object
    /// ends byte-exact, no component is left, and what the server got twice per kill is at
    /// most what the parts in flight had sent past their confirmed offsets.
    @Test func killedParallelUploadsEndByteExactWithNoComponentLeft() async throws {
        try await ExclusiveTests.shared.run {
            let fixture = try JobFixture()
            let size = (16 << 20) + 12_345
            try fixture.file("big.bin", size)
            let prefix = "pkill-\(UUID().uuidString.prefix(8))"
            let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "4MB/s", upload: ", concurrency: 4",
                                      storage: ", parallelUploadThreshold: 4MiB, parallelUploads: true")
            var kills = 0
            for _ in 0..<10 where kills < 5 {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: hoist)
                process.arguments = ["run", "--quiet", job.manifest]
                process.environment = job.environment
                try process.run()
                usleep(UInt32.random(in: 300_000...1_200_000))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                if process.terminationReason == .uncaughtSignal { kills += 1 }
            }
            try unthrottle(job.manifest, "4MB/s")   // the last run only finishes: at full speed
            let last = try runProcess(hoist, ["run", job.manifest], environment: job.environment)
            #expect(last.status == 0, "\(last.stdout) \(last.stderr)")
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/big.bin", port: job.port) == patternData(size))
            let left = try await FakeGCS.list(bucket: StorageEmulator.bucket, prefix: "hoist-parallel-uploads/", port: job.port)
            #expect(left.isEmpty, "\(left.compactMap { $0["name"] })")
            // Bytes the server received, all runs together: the file once, plus what each kill
            // cut off in flight (at most 4 parts, each less than 1 MiB past its confirmed offset).
            let (received, starts) = (job.proxy.dataBytesForwarded, job.proxy.sessionStarts)
            if ProcessInfo.processInfo.environment["HOIST_DEBUG_LOG"] != nil {
                for entry in job.proxy.log {
                    let target = (entry["target"] as? String ?? "")
                    print(entry["event"] ?? "req", entry["method"] ?? "", target.suffix(60), entry["contentRange"] ?? "", entry["status"] ?? "",
                          entry["range"] ?? "", entry["forwarded"] ?? "")
                }
            }
            print("parallel kill loop: \(kills) kills, \(received - size) bytes received twice, \(starts) sessions started")
            #expect(received - size <= kills * 4 * (1 << 20), "\(received - size) bytes again after \(kills) kills")
            #expect(kills >= 3)
        }
    }

    /// `parallelUploads: auto` (the default) on a slow link, killed once after its probe gave the
    /// stream up (its session deleted: the server's log): the journal holds the parallel upload,
    /// so the next run continues its parts, starting no session, joins them, and ends byte-exact
    /// with no component left.
    @Test func aRunKilledAfterAutoWentParallelContinuesItsParts() async throws {
        try await ExclusiveTests.shared.run {
            let fixture = try JobFixture()
            let size = (24 << 20) + 999
            try fixture.file("big.bin", size)
            let prefix = "akill-\(UUID().uuidString.prefix(8))"
            let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "4MB/s", upload: ", concurrency: 4",
                                      storage: ", parallelUploadThreshold: 4MiB")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: hoist)
            process.arguments = ["run", "--quiet", job.manifest]
            process.environment = job.environment
            try process.run()
            func switched() -> Bool {
                job.proxy.requests.contains { $0["method"] as? String == "DELETE" && ($0["target"] as? String ?? "").contains("/upload/") }
            }
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, !switched(), process.isRunning { usleep(20_000) }
            usleep(1_000_000)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(switched(), "the probe did not give the stream up")
            #expect(process.terminationReason == .uncaughtSignal, "the run ended before the kill")
            let starts = job.proxy.sessionStarts
            #expect(starts == 5, "the object's session and four parts' expected: \(starts)")
            try unthrottle(job.manifest, "4MB/s")
            let last = try runProcess(hoist, ["run", job.manifest], environment: job.environment)
            #expect(last.status == 0, "\(last.stdout) \(last.stderr)")
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/big.bin", port: job.port) == patternData(size))
            let left = try await FakeGCS.list(bucket: StorageEmulator.bucket, prefix: "hoist-parallel-uploads/", port: job.port)
            #expect(left.isEmpty, "\(left.compactMap { $0["name"] })")
            #expect(job.proxy.sessionStarts == starts, "the parts were started again, not continued")
            // Joined from the parts: not the given-up stream continued (the emulator keeps a
            // deleted session's bytes).
            #expect(job.proxy.requests.contains { ($0["target"] as? String ?? "").hasSuffix("/compose") }, "no compose")
        }
    }

    /// `--remote-check` of a composite object whose journal row has no MD5 (Cloud Storage gives
    /// none for one): its CRC32C, the journal's against the server's, says it is unchanged; an
    /// object replaced by other bytes of the same size is uploaded again.
    @Test func remoteCheckOfACompositeObjectComparesCRC32C() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let fixture = try JobFixture()
        try fixture.file("big.bin", (6 << 20) + 3)
        _ = try fixture.job("storage: { url: 'gs://\(bucket)', parallelUploadThreshold: 4MiB }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(try FakeGCS.port())"
        let first = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(first.status == 0, "\(first.stderr)")
        _ = try python("""
            import sqlite3
            c = sqlite3.connect('\(journal)')
            c.execute("UPDATE file SET md5Hash = NULL")
            c.commit()
            """)
        let unchanged = try runProcess(hoist, ["run", "--remote-check", manifest], environment: environment)
        #expect(unchanged.stdout.hasPrefix("test: 0 uploaded (0 B), 1 unchanged"), "\(unchanged.stdout)")
        // Other bytes of the same size under its name.
        var request = HTTPRequest(method: "POST", url: "http://127.0.0.1:\(try FakeGCS.port())/upload/storage/v1/b/\(bucket)/o?uploadType=media&name=big.bin")
        request.body = [.data(patternData((6 << 20) + 3, seed: 99))]
        #expect(try await CurlEngine.shared.perform(request).status == 200)
        let replaced = try runProcess(hoist, ["run", "--remote-check", manifest], environment: environment)
        #expect(replaced.stdout.hasPrefix("test: 1 uploaded"), "\(replaced.stdout)")
        #expect(try await FakeGCS.download(bucket: bucket, object: "big.bin") == patternData((6 << 20) + 3))
    }
}
