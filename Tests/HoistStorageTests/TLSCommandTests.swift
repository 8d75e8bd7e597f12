import Foundation
import HoistTestSupport
import Testing

/// `hoist cp` to fake-gcs-server over https, as a user behind a private CA or a proxy runs it:
/// exit statuses, what is printed, bytes on the server, connections the server saw.
@Suite struct TLSCommandTests {
    /// The environment of a user pointing Hoist at `endpoint`, with no CA bundle of their own.
    func environment(_ endpoint: String, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "https_proxy", "HTTPS_PROXY", "http_proxy", "all_proxy", "ALL_PROXY",
                     "no_proxy", "NO_PROXY"] {
            environment[name] = nil
        }
        environment["STORAGE_EMULATOR_HOST"] = endpoint
        return environment.merging(extra) { $1 }
    }

    @Test func withoutTheCAItStopsAtOnceNamingTheFix() async throws {
        let bucket = try await FakeGCSTLS.makeBucket()
        let directory = try TemporaryDirectory()
        let file = try directory.write("a.txt", Data("alpha".utf8))
        let started = Date()
        let run = try runProcess(hoist, ["cp", file.path, "gs://\(bucket)/a.txt"], environment: environment(try FakeGCSTLS.endpoint()))
        #expect(run.status == 2)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(run.stderr.hasPrefix("hoist: The TLS certificate of \(try FakeGCSTLS.endpoint()) is not trusted"), "\(run.stderr)")
        #expect(run.stderr.contains("--ca-bundle FILE") && run.stderr.contains("SSL_CERT_FILE"))
        #expect(run.stderr.split(separator: "\n").count == 1)
    }

    @Test func theCABundleFromTheFlagOrTheEnvironment() async throws {
        let ca = try TestCertificates.shared().caFile
        let bucket = try await FakeGCSTLS.makeBucket()
        let directory = try TemporaryDirectory()
        let small = try directory.write("small.txt", patternData(4096))
        let large = try directory.write("large.bin", patternData(9 << 20 + 5, seed: 4))   // over 8 MiB: resumable
        let endpoint = try FakeGCSTLS.endpoint()
        let flag = try runProcess(hoist, ["cp", "--ca-bundle", ca, small.path, large.path, "gs://\(bucket)/flag/"],
                                  environment: environment(endpoint))
        #expect(flag.status == 0, "\(flag.stderr)")
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "flag/small.txt") == patternData(4096))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "flag/large.bin") == patternData(9 << 20 + 5, seed: 4))
        for name in ["SSL_CERT_FILE", "CURL_CA_BUNDLE"] {
            let run = try runProcess(hoist, ["cp", small.path, "gs://\(bucket)/\(name)/"], environment: environment(endpoint, [name: ca]))
            #expect(run.status == 0, "\(name): \(run.stderr)")
            #expect(try await FakeGCSTLS.download(bucket: bucket, object: "\(name)/small.txt") == patternData(4096))
        }
        let missing = try runProcess(hoist, ["cp", "--ca-bundle", directory.url.appendingPathComponent("no.pem").path, small.path,
                                             "gs://\(bucket)/x/"], environment: environment(endpoint))
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("no.pem cannot be read"), "\(missing.stderr)")
    }

    @Test func smallUploadsShareFewConnectionsOverHTTP2() async throws {
        let ca = try TestCertificates.shared().caFile
        let bucket = try await FakeGCSTLS.makeBucket()
        let relay = try CountingRelay(upstreamPort: try FakeGCSTLS.port())
        let directory = try TemporaryDirectory()
        for index in 0..<200 { try directory.write("many/f\(index).txt", patternData(1000 + index, seed: UInt8(index % 200))) }
        let run = try runProcess(hoist, ["cp", "--json", "-j", "64", "--ca-bundle", ca, directory.url.appendingPathComponent("many").path,
                                         "gs://\(bucket)/"], environment: environment("https://127.0.0.1:\(relay.port)"))
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.components(separatedBy: #""event":"success""#).count - 1 == 200)
        for index in [0, 77, 199] {
            #expect(try await FakeGCSTLS.download(bucket: bucket, object: "many/f\(index).txt")
                == patternData(1000 + index, seed: UInt8(index % 200)))
        }
        // 200 uploads, 64 at a time: streams of one HTTP/2 connection (and the access check's), not 64 connections.
        #expect(relay.connections >= 1 && relay.connections <= 4, "\(relay.connections) connections")
    }

    @Test func throughAProxyWithCONNECTAndPastItWithNO_PROXY() async throws {
        let ca = try TestCertificates.shared().caFile
        let bucket = try await FakeGCSTLS.makeBucket()
        let proxy = try TinyProxy(user: "hoist", password: "s3cr3t-pass")
        let directory = try TemporaryDirectory()
        let small = try directory.write("small.txt", patternData(2048))
        let large = try directory.write("large.bin", patternData(9 << 20, seed: 8))
        let endpoint = try FakeGCSTLS.endpoint()
        let proxied = environment(endpoint, ["HTTPS_PROXY": "http://hoist:s3cr3t-pass@127.0.0.1:\(proxy.port)", "SSL_CERT_FILE": ca])

        let run = try runProcess(hoist, ["cp", small.path, large.path, "gs://\(bucket)/p/"], environment: proxied)
        #expect(run.status == 0, "\(run.stderr)\n\(proxy.log)")
        #expect(proxy.tunnels >= 1, "\(proxy.log)")
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "p/small.txt") == patternData(2048))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "p/large.bin") == patternData(9 << 20, seed: 8))

        // NO_PROXY names the host: straight to the server, the proxy sees nothing.
        let before = proxy.tunnels
        var bypass = proxied
        bypass["NO_PROXY"] = "example.com,127.0.0.1"
        let direct = try runProcess(hoist, ["cp", small.path, "gs://\(bucket)/direct/"], environment: bypass)
        #expect(direct.status == 0, "\(direct.stderr)")
        #expect(proxy.tunnels == before)
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "direct/small.txt") == patternData(2048))

        // A refused password: exit 2 naming the proxy, never its credentials.
        var refused = proxied
        refused["HTTPS_PROXY"] = "http://hoist:wrong-s3cr3t@127.0.0.1:\(proxy.port)"
        let denied = try runProcess(hoist, ["cp", small.path, "gs://\(bucket)/denied/"], environment: refused)
        #expect(denied.status == 2)
        #expect(denied.stderr.contains("through the proxy http://***@127.0.0.1:\(proxy.port) (HTTPS_PROXY)"), "\(denied.stderr)")
        #expect(!denied.stderr.contains("s3cr3t") && !denied.stdout.contains("s3cr3t"))
        let json = try runProcess(hoist, ["cp", "--json", small.path, "gs://\(bucket)/denied/"], environment: refused)
        #expect(json.status == 2)
        #expect(!json.stderr.contains("s3cr3t") && !json.stdout.contains("s3cr3t"))
    }
}
