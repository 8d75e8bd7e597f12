import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// `SSL_CERT_DIR`, OpenSSL's folder of CA certificates named by their hashes (`openssl rehash`,
/// formerly c_rehash), honoured as curl's `--capath`: after `CURL_CA_BUNDLE` and `SSL_CERT_FILE`,
/// and `--ca-bundle`/`storage.caBundle` may name such a folder too. Against fake-gcs-server over
/// TLS with the tests' throwaway CA.
@Suite struct TLSCertDirTests {
    func environment(_ extra: [String: String]) throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
            environment[name] = nil
        }
        environment["STORAGE_EMULATOR_HOST"] = try FakeGCSTLS.endpoint()
        return environment.merging(extra) { $1 }
    }

    /// A folder holding the test CA's certificate, hashed by `openssl rehash` when `rehash`.
    func certificateFolder(in directory: TemporaryDirectory, rehash: Bool) throws -> String {
        let folder = directory.url.appendingPathComponent(rehash ? "certs" : "plain")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try TestCertificates.shared().caFile, toPath: folder.appendingPathComponent("hoist-test-ca.pem").path)
        if rehash {
            let run = try runProcess("/usr/bin/env", ["openssl", "rehash", folder.path])
            #expect(run.status == 0, "\(run.stderr)")
            let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(names.contains { $0.wholeMatch(of: /[0-9a-f]{8}\.0/) != nil }, "openssl rehash made no hash link: \(names)")
        }
        return folder.path
    }

    @Test func aRehashedFolderInSSL_CERT_DIRIsTrusted() async throws {
        let bucket = try await FakeGCSTLS.makeBucket()
        let directory = try TemporaryDirectory()
        let folder = try certificateFolder(in: directory, rehash: true)
        let small = try directory.write("small.txt", patternData(4096))
        let large = try directory.write("large.bin", patternData(9 << 20 + 3, seed: 6))   // over 8 MiB: resumable
        let run = try runProcess(hoist, ["cp", small.path, large.path, "gs://\(bucket)/dir/"], environment: try environment(["SSL_CERT_DIR": folder]))
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "dir/small.txt") == patternData(4096))
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "dir/large.bin") == patternData(9 << 20 + 3, seed: 6))

        // The flag takes such a folder too.
        let flag = try runProcess(hoist, ["cp", "--ca-bundle", folder, small.path, "gs://\(bucket)/flag/"], environment: try environment([:]))
        #expect(flag.status == 0, "\(flag.stderr)")
        #expect(try await FakeGCSTLS.download(bucket: bucket, object: "flag/small.txt") == patternData(4096))
    }

    @Test func aFolderThatWasNotRehashedIsNotEnoughAndTheMessageSaysWhatToDo() async throws {
        let bucket = try await FakeGCSTLS.makeBucket()
        let directory = try TemporaryDirectory()
        let folder = try certificateFolder(in: directory, rehash: false)
        let small = try directory.write("small.txt", patternData(100))
        let run = try runProcess(hoist, ["cp", small.path, "gs://\(bucket)/x/"], environment: try environment(["SSL_CERT_DIR": folder]))
        #expect(run.status == 2)
        #expect(run.stderr.hasPrefix("hoist: The TLS certificate of \(try FakeGCSTLS.endpoint()) is not trusted by the CA bundle \(folder) ("),
                "\(run.stderr)")
        #expect(run.stderr.contains("SSL_CERT_DIR") && run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
    }

    @Test func aCAFileNamedEarlierInTheChainWinsOverSSL_CERT_DIR() async throws {
        let bucket = try await FakeGCSTLS.makeBucket()
        let directory = try TemporaryDirectory()
        let folder = try certificateFolder(in: directory, rehash: true)
        let small = try directory.write("small.txt", patternData(100))
        // A readable bundle of another CA: SSL_CERT_FILE comes first, so the folder is not used.
        let other = directory.url.appendingPathComponent("other.pem").path
        let made = try runProcess("/usr/bin/env", ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                                   "-nodes", "-keyout", directory.url.appendingPathComponent("other.key").path,
                                                   "-out", other, "-days", "1", "-subj", "/CN=Another CA"])
        #expect(made.status == 0, "\(made.stderr)")
        for name in ["SSL_CERT_FILE", "CURL_CA_BUNDLE"] {
            let run = try runProcess(hoist, ["cp", small.path, "gs://\(bucket)/x/"], environment: try environment([name: other, "SSL_CERT_DIR": folder]))
            #expect(run.status == 2, "\(name): \(run.stderr)")
            #expect(run.stderr.contains("not trusted by the CA bundle \(other)"), "\(name): \(run.stderr)")
        }
        #expect(try GCSBackend.Configuration.fromEnvironment(bucket: "b", ["SSL_CERT_DIR": "/d"]).caBundle == "/d")
        #expect(try GCSBackend.Configuration.fromEnvironment(bucket: "b", ["SSL_CERT_DIR": "/d", "SSL_CERT_FILE": "/s.pem"]).caBundle == "/s.pem")
        #expect(try GCSBackend.Configuration.fromEnvironment(bucket: "b", ["SSL_CERT_DIR": "/d"], caBundle: "/flag.pem").caBundle == "/flag.pem")
    }
}
