import Foundation
import HoistTestSupport
import Testing

/// An upload that waits to try again says so: a `retry` event per wait in `hoist run --json`,
/// "retrying" on the terminal's progress line. Faults from the fault proxy (503 answers to the
/// upload's POST) in front of fake-gcs-server.
@Suite struct RetryDisplayTests {
    /// A job of one 4 KiB file on a new fake-gcs-server bucket reached through a fault proxy
    /// answering the first two upload POSTs with 503.
    func fixture() async throws -> (JobFixture, String, [String: String], FaultProxy) {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "503:2:POST"])
        let fixture = try JobFixture()
        try fixture.file("photo.jpg", 4096)
        _ = try fixture.job("storage: { url: 'gs://\(bucket)' }\nfiles: [{ root: src }]\n")
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(proxy.port)"
        return (fixture, fixture.directory.url.appendingPathComponent("job.yaml").path, environment, proxy)
    }

    @Test func theJSONEventsCarryEachRetryInOrderBeforeTheSuccess() async throws {
        let (fixture, manifest, environment, proxy) = try await fixture()
        defer { withExtendedLifetime(fixture) {} }
        let run = try runProcess(hoist, ["run", "--json", manifest], environment: environment)
        #expect(try validateEvents(run.stdout).filter { $0 == "retry" }.count == 2)
        #expect(run.status == 0, "\(run.stderr)")
        let events = run.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let names = events.compactMap { $0["event"] as? String }.filter { !["progress", "job_start", "plan_counted"].contains($0) }
        #expect(names == ["resume", "retry", "retry", "success", "job_end"], "\(run.stdout)")
        let retries = events.filter { $0["event"] as? String == "retry" }
        #expect(retries.map { $0["attempt"] as? Int } == [1, 2], "\(retries)")
        #expect(retries.allSatisfy { $0["status"] as? Int == 503 && ($0["file"] as? String)?.hasSuffix("/src/photo.jpg") == true
            && $0["object"] as? String == "photo.jpg" && ($0["message"] as? String)?.isEmpty == false }, "\(retries)")
        // Backoff with jitter in the upper half of each step: 0.5-1 s, then 1-2 s.
        let delays = retries.compactMap { $0["delay"] as? Double }
        #expect(delays.count == 2 && (0.5...1.0).contains(delays[0]) && (1.0...2.0).contains(delays[1]), "\(delays)")
        // Three POSTs reached the proxy: two answered 503, the third stored the object.
        #expect(proxy.requests.filter { $0["method"] as? String == "POST" }.count == 3)
    }

    /// In a real pseudo-terminal the line says "retrying 1 (503, next in ...)" while the upload waits.
    @Test func theProgressLineSaysRetrying() async throws {
        let (fixture, manifest, environment, proxy) = try await fixture()
        defer { withExtendedLifetime((fixture, proxy)) {} }   // the proxy is killed when its value goes
        try await ExclusiveTests.shared.run {
            let script = packageRoot.appendingPathComponent("Tests/servers/ptyrun.py").path
            let run = try runProcess("/usr/bin/env", ["python3", script, "100", "0", "0", "--", hoist, "run", manifest],
                                     environment: environment)
            #expect(run.stdout.hasSuffix("EXIT 0\n"), "\(run.stdout.suffix(400)) \(run.stderr)")
            let segments = run.stdout.replacingOccurrences(of: "\u{1B}[K", with: "")
                .split(whereSeparator: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" }).map(String.init)
            let retrying = segments.filter { $0.contains("retrying") }
            #expect(retrying.contains { $0.contains("retrying 1 (503, next in ") && $0.contains(" s)") }, "\(segments)")
            #expect(retrying.contains { $0.contains("retrying 2 (503, next in ") }, "\(segments)")
            #expect(retrying.allSatisfy { $0.count <= 99 })
            // Once stored, the summary; no "retrying" after it.
            let summary = try #require(segments.lastIndex { $0.hasPrefix("test: 1 uploaded") }, "\(segments)")
            #expect(!segments[summary...].contains { $0.contains("retrying") })
        }
    }
}
