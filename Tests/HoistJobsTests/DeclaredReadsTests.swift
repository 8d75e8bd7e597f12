import Foundation
@testable import HoistJobs
import HoistStorage
import HoistTestSupport
import Testing

/// What a run reads is declared (`AppendTarget.reads(of:)`: the manifest's files, each backend's
/// `reads(in:)`, HoistHTTP's environment files), so a hook's output folder can be kept clear of
/// all of it. These tests run `hoist` under `strace` with every variable known to name a file set
/// (Hoist's own, AWS's, Google's, curl's, OpenSSL's, libc's, PostgreSQL's) and fail on any file
/// the process opens to read that no declaration names: a new backend, or a library that starts
/// reading a file, cannot be forgotten.
@Suite(.serialized) struct DeclaredReadsTests {
    /// Variables that name a file or folder some part of the process may read, each set to a
    /// file of its own (a copy of the system's CA bundle or OpenSSL configuration where a
    /// library parses it).
    static let fileVariables: [(name: String, content: String?)] = [
        ("CURL_CA_BUNDLE", "ca"), ("SSL_CERT_FILE", "ca"), ("SSL_CERT_DIR", nil), ("AWS_CA_BUNDLE", "ca"),
        ("OPENSSL_CONF", "openssl"), ("OPENSSL_MODULES", nil), ("OPENSSL_ENGINES", nil),
        ("AWS_SHARED_CREDENTIALS_FILE", "[default]\naws_access_key_id = \(S3TestServer.accessKey)\naws_secret_access_key = \(S3TestServer.secretKey)\n"),
        ("AWS_CONFIG_FILE", "[default]\nregion = us-east-1\n"), ("AWS_WEB_IDENTITY_TOKEN_FILE", "token\n"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "{}\n"), ("CLOUDSDK_CONFIG", nil), ("BOTO_CONFIG", "\n"),
        ("HOIST_PLUGIN_PATH", nil), ("XDG_STATE_HOME", nil), ("XDG_CONFIG_HOME", nil), ("XDG_DATA_HOME", nil), ("XDG_CACHE_HOME", nil),
        ("PGPASSFILE", "\n"), ("PGSERVICEFILE", "\n"), ("PGSSLROOTCERT", "ca"), ("PGSYSCONFDIR", nil),
        ("NETRC", "\n"), ("CURL_HOME", nil), ("SSLKEYLOGFILE", nil), ("HOSTALIASES", "\n"),
        ("LOCPATH", nil), ("TZDIR", nil), ("GCONV_PATH", nil), ("NLSPATH", "\n"), ("ICU_DATA", nil),
        ("SASL_PATH", nil), ("SASL_CONF_PATH", nil), ("KRB5_CONFIG", "\n"), ("LDAPCONF", "\n"), ("OPENSSL_CONF_INCLUDE", nil),
    ]

    /// A home folder with every file the usual tools keep there.
    static let homeFiles: [String: String] = [
        ".aws/credentials": "[default]\naws_access_key_id = x\naws_secret_access_key = y\n", ".aws/config": "[default]\n",
        ".config/gcloud/application_default_credentials.json": "{}\n", ".pgpass": "\n", ".netrc": "\n", ".curlrc": "\n",
        ".postgresql/root.crt": "ca", ".boto": "\n", ".config/hoist/config.yaml": "\n",
    ]

    struct Traced {
        let status: Int32
        let output: String
        /// Files opened to read (not folders, not opened to write only), absolute.
        let reads: [String]
    }

    /// Runs `hoist ARGUMENTS` under strace and returns the files it opened to read.
    func traced(_ arguments: [String], environment: [String: String], in folder: TemporaryDirectory) throws -> Traced {
        let trace = folder.url.appendingPathComponent("trace-\(UUID().uuidString)").path
        let run = try runProcess("/usr/bin/strace", ["-f", "-qq", "-y", "-e", "trace=open,openat,openat2", "-e", "status=successful",
                                                     "-o", trace, hoist] + arguments, environment: environment)
        let lines = (try String(contentsOfFile: trace, encoding: .utf8)).split(separator: "\n")
        try? FileManager.default.removeItem(atPath: trace)
        var reads: [String] = []
        for line in lines {
            // `PID openat(AT_FDCWD, "path", FLAGS) = 3</path>`: the result names the file opened.
            guard let call = line.range(of: "open"), let result = line.range(of: ") = ", options: .backwards) else { continue }
            let flags = line[call.upperBound..<result.lowerBound]
            if flags.contains("O_WRONLY") || flags.contains("O_DIRECTORY") || flags.contains("O_PATH") || flags.contains("O_TMPFILE") { continue }
            let opened = line[result.upperBound...]
            guard let start = opened.firstIndex(of: "<"), let end = opened.lastIndex(of: ">"), start < end else { continue }
            reads.append(String(opened[opened.index(after: start)..<end]))
        }
        return Traced(status: run.status, output: run.stdout + run.stderr, reads: reads)
    }

    /// The folder with every variable's file, the home folder and an environment naming them.
    func bait() throws -> (folder: TemporaryDirectory, environment: [String: String]) {
        let folder = try TemporaryDirectory()
        let ca = try String(contentsOfFile: "/etc/ssl/certs/ca-certificates.crt", encoding: .utf8)
        let openssl = (try? String(contentsOfFile: "/usr/lib/ssl/openssl.cnf", encoding: .utf8)) ?? "\n"
        func content(_ given: String) -> String { given == "ca" ? ca : given == "openssl" ? openssl : given }
        var environment = ["PATH": "/usr/bin:/bin", "HOME": folder.url.appendingPathComponent("home").path, "LANG": "C.UTF-8"]
        for (name, given) in Self.fileVariables {
            let path = folder.url.appendingPathComponent("env/\(name)")
            if let given {
                try folder.write("env/\(name)", Data(content(given).utf8))
            } else {
                try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
                try folder.write("env/\(name)/file", Data("\n".utf8))
            }
            environment[name] = path.path
        }
        for (path, given) in Self.homeFiles { try folder.write("home/\(path)", Data(content(given).utf8)) }
        environment["TZ"] = ":" + folder.url.appendingPathComponent("env/TZ").path
        try folder.write("env/TZ", Data("\n".utf8))
        return (folder, environment)
    }

    /// Every file under `folder` in `reads` that the job's declarations do not name.
    func undeclared(_ reads: [String], under folder: TemporaryDirectory, job: Job) -> [String] {
        let root = AppendTarget.real(folder.url.path)
        let declared = AppendTarget.reads(of: job)
        return Array(Set(reads.filter { $0.hasPrefix(root + "/") && !$0.contains("/trace-") }.filter { path in
            !declared.contains { read in path == read.path || (read.isTree && path.hasPrefix(read.path + "/")) }
        })).sorted()
    }

    func check(storage: String, extra: [String: String] = [:], body: String = "") async throws {
        let (folder, baseEnvironment) = try bait()
        let environment = baseEnvironment.merging(extra) { $1 }
        try folder.write("job/src/a.txt", Data("hello\n".utf8))
        try folder.write("job/hooks/count.lua", Data("function on_success(s) log.info(s.reference.fullPath) end\n".utf8))
        let manifest = folder.url.appendingPathComponent("job/job.yaml").path
        try """
            version: 1
            name: reads
            storage: \(storage)
            files: [{ root: src }]
            lua: { output: logs }
            hooks: [hooks/count.lua, { plugin: jsonl-log }]
            \(body)
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let job = try Job(file: manifest, environment: environment)
        for arguments in [["validate", manifest], ["run", manifest], ["run", manifest], ["status", manifest]] {
            let run = try traced(arguments, environment: environment, in: folder)
            #expect(run.status == 0, "\(arguments): \(run.output)")
            let missing = undeclared(run.reads, under: folder, job: job)
            #expect(missing.isEmpty, "hoist \(arguments[0]) read files no declaration names: \(missing)")
        }
    }

    @Test func aLocalBucketRunReadsOnlyWhatIsDeclared() async throws {
        try await check(storage: "{ url: 'file:bucket' }")
    }

    @Test func aGCSRunReadsOnlyWhatIsDeclared() async throws {
        let bucket = try await FakeGCS.makeBucket()
        try await check(storage: "{ url: 'gs://\(bucket)' }", extra: ["STORAGE_EMULATOR_HOST": "127.0.0.1:\(try FakeGCS.port())"])
    }

    @Test func anS3RunReadsOnlyWhatIsDeclared() async throws {
        let bucket = try await S3TestServer.moto.makeBucket()
        try await check(storage: "{ url: 's3://\(bucket)/p', endpoint: '\(try S3TestServer.moto.endpoint())', pathStyle: true }")
    }
}
