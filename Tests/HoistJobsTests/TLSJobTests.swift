import Foundation
import HoistTestSupport
import Testing

/// `hoist run` against fake-gcs-server over https: the job's `storage.caBundle`, the
/// `--ca-bundle` flag, and `insecureSkipTLSVerify`, which works and warns on every run.
@Suite struct TLSJobTests {
    func environment() throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] { environment[name] = nil }
        environment["STORAGE_EMULATOR_HOST"] = try FakeGCSTLS.endpoint()
        return environment
    }

    @Test func behindAProxyWithHTTPS_PROXYAndSSL_CERT_FILE() async throws {
        // The user: a job run through a proxy, trusting a private CA, set by environment alone.
        let bucket = try await FakeGCSTLS.makeBucket()
        let proxy = try TinyProxy()
        let fixture = try JobFixture()
        try fixture.file("photos/a.jpg", 5000)
        try fixture.file("photos/b.jpg", 9 << 20)   // resumable
        _ = try fixture.job("storage: { url: 'gs://\(bucket)' }\nfiles: [{ root: src }]\n")
        var environment = try environment()
        environment["HTTPS_PROXY"] = "http://127.0.0.1:\(proxy.port)"
        environment["SSL_CERT_FILE"] = try TestCertificates.shared().caFile
        let run = try runProcess(hoist, ["run", fixture.directory.url.appendingPathComponent("job.yaml").path], environment: environment)
        #expect(run.status == 0, "\(run.stderr)\n\(proxy.log)")
        #expect(proxy.tunnels >= 1)
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "photos/a.jpg") == patternData(5000))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "photos/b.jpg") == patternData(9 << 20))
    }

    @Test func theJobsCABundleTheFlagAndInsecureSkipTLSVerify() async throws {
        let ca = try TestCertificates.shared().caFile
        let bucket = try await FakeGCSTLS.makeBucket()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 300)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let environment = try environment()
        func run(_ storage: String, _ extra: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
            _ = try fixture.job("storage: { url: 'gs://\(bucket)'\(storage) }\nfiles: [{ root: src, destination: '{relpath}' }]\n")
            return try runProcess(hoist, ["run", "--force"] + extra + [manifest], environment: environment)
        }

        // No CA: the run cannot start, and says how to fix it in one line.
        let untrusted = try run("")
        #expect(untrusted.status == 2)
        #expect(untrusted.stderr.contains("is not trusted") && untrusted.stderr.contains("--ca-bundle FILE"), "\(untrusted.stderr)")
        #expect(untrusted.stderr.split(separator: "\n").count == 1, "\(untrusted.stderr)")

        try FileManager.default.copyItem(atPath: ca, toPath: fixture.directory.url.appendingPathComponent("ca.pem").path)
        let fromManifest = try run(", caBundle: ca.pem")   // relative to the manifest's folder
        #expect(fromManifest.status == 0, "\(fromManifest.stderr)")
        #expect(!fromManifest.stderr.contains("warning"))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "a.txt") == patternData(300))

        let fromFlag = try run("", ["--ca-bundle", ca])
        #expect(fromFlag.status == 0, "\(fromFlag.stderr)")

        let missing = try run(", caBundle: nope.pem")
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("job.yaml:4:") && missing.stderr.contains("nope.pem cannot be read"), "\(missing.stderr)")

        // A hook's http.post trusts the job's CA bundle too (a re-signing proxy signs every host).
        let hook = """
            hooks:
              - inline: |
                  function on_success(s)
                    local r, err = http.post("\(try FakeGCSTLS.endpoint())/storage/v1/b/\(bucket)", "")
                    log.info("post " .. (r and tostring(r.status) or ("failed: " .. tostring(err))))
                  end

            """
        _ = try fixture.job("storage: { url: 'gs://\(bucket)', caBundle: ca.pem }\nfiles: [{ root: src }]\n" + hook)
        let hooked = try runProcess(hoist, ["run", "--force", manifest], environment: environment)
        #expect(hooked.status == 0, "\(hooked.stderr)")
        #expect(hooked.stderr.contains("info: post "), "\(hooked.stderr)")
        #expect(!hooked.stderr.contains("post failed"), "\(hooked.stderr)")

        // Checks off: it works, and every run says so.
        for _ in 0..<2 {
            let insecure = try run(", insecureSkipTLSVerify: true")
            #expect(insecure.status == 0, "\(insecure.stderr)")
            #expect(insecure.stderr.contains("hoist: warning: TLS certificate checks are off (storage.insecureSkipTLSVerify)"),
                    "\(insecure.stderr)")
        }
    }
}
