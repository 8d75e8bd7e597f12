import Foundation
import HoistHTTP
import HoistStorage
import HoistTestSupport
import Testing

/// Parallel composite uploads killed at random points (kill -9 of `hoist run`), on
/// gcp-storage-emulator, whose sessions keep the bytes of a broken `PUT` as Cloud Storage does.
@Suite struct ParallelKillTests {
    let hoist = productsDirectory.appendingPathComponent("hoist").path

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
                                      storage: ", parallelUploadThreshold: 4MiB")
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
            let last = try runProcess(hoist, ["run", job.manifest], environment: job.environment)
            #expect(last.status == 0, "\(last.stdout) \(last.stderr)")
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/big.bin", port: job.port) == patternData(size))
            let left = try await FakeGCS.list(bucket: StorageEmulator.bucket, prefix: "hoist-parallel-uploads/", port: job.port)
            #expect(left.isEmpty, "\(left.compactMap { $0["name"] })")
            // Bytes the server received, all runs together: the file once, plus what each kill
            // cut off in flight (at most 4 parts, each less than 1 MiB past its confirmed offset).
            let received = job.proxy.log.reduce(0) { sum, entry in
                let event = entry["event"] as? String
                let range = entry["contentRange"] as? String ?? ""
                guard entry["method"] as? String == "PUT", event == "answer" || event == "partial", !range.hasPrefix("bytes */") else { return sum }
                return sum + (entry["forwarded"] as? Int ?? 0)
            }
            let starts = job.proxy.requests.filter { ($0["target"] as? String ?? "").contains("uploadType=resumable") && $0["method"] as? String == "POST" }
            if ProcessInfo.processInfo.environment["HOIST_DEBUG_LOG"] != nil {
                for entry in job.proxy.log {
                    let target = (entry["target"] as? String ?? "")
                    print(entry["event"] ?? "req", entry["method"] ?? "", target.suffix(60), entry["contentRange"] ?? "", entry["status"] ?? "",
                          entry["range"] ?? "", entry["forwarded"] ?? "")
                }
            }
            print("parallel kill loop: \(kills) kills, \(received - size) bytes received twice, \(starts.count) sessions started")
            #expect(received - size <= kills * 4 * (1 << 20), "\(received - size) bytes again after \(kills) kills")
            #expect(kills >= 3)
        }
    }
}
