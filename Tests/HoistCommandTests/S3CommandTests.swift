import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// `s3://` through the command, as a user points Hoist at S3: a manifest's `storage:` (endpoint,
/// region, pathStyle, credentials by profile) and `hoist cp`, against the S3 test servers.
@Suite(.serialized) struct S3CommandTests {
    /// AWS's own files, as a user has them: a profile with the test key.
    func awsHome() throws -> TemporaryDirectory {
        let home = try TemporaryDirectory()
        try home.write(".aws/credentials", Data("""
            [uploader]
            aws_access_key_id = \(S3TestServer.accessKey)
            aws_secret_access_key = \(S3TestServer.secretKey)

            """.utf8))
        return home
    }

    @Test(arguments: S3TestServer.plain)
    func aJobUploadsToS3WithTheManifestsOptions(server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 300)
        try fixture.file("deep/b.bin", 20 << 20)   // over the 16 MiB threshold: multipart
        let home = try awsHome()
        _ = try fixture.job("""
            storage:
              url: s3://\(bucket)/backups
              endpoint: \(try server.endpoint())
              region: us-east-1
              pathStyle: true
              credentials: uploader
            files: [{ root: src, metadata: { cacheControl: no-cache } }]

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
        let validated = try runProcess(hoist, ["validate", manifest], environment: environment)
        #expect(validated.status == 0, "\(validated.stderr)")
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("2 uploaded") || run.stdout.contains("2 uploaded"), "\(run.stdout)\(run.stderr)")
        for (name, size) in [("a.txt", 300), ("deep/b.bin", 20 << 20)] {
            let stored = try await server.storedBytes(bucket: bucket, key: "backups/" + name)
            #expect(stored == patternData(size), "\(name)")
        }
        let head = try await server.request("HEAD", "/\(bucket)/backups/a.txt")
        #expect(head.header("Cache-Control") == "no-cache")
        // The journal answers the next run: nothing is sent again.
        let again = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(again.status == 0)
        #expect((again.stdout + again.stderr).contains("2 unchanged"), "\(again.stdout)\(again.stderr)")
    }

    /// A run killed (SIGKILL) while sending a large file, at a random moment once three of its
    /// parts are stored, and run again: the second run continues the multipart upload
    /// (`ListParts`), so the server receives the file's bytes plus at most the parts that were in
    /// flight at the kill (two: the job's slots, `concurrency: 2`), counted at a proxy (a run
    /// that started again would send the three stored parts twice); the object is byte-exact and
    /// no multipart upload is left behind.
    @Test(arguments: S3TestServer.plain)
    func aKilledRunIsContinuedResendingAtMostItsPartsInFlight(server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let fixture = try JobFixture()
        let size = 56 << 20 + 7   // 7 parts of 8 MiB and 7 bytes
        try fixture.file("big.bin", size)
        let home = try awsHome()
        _ = try fixture.job("""
            storage: { url: 's3://\(bucket)/k', endpoint: 'http://127.0.0.1:\(proxy.port)', region: us-east-1, pathStyle: true, credentials: uploader }
            files: [{ root: src }]
            upload: { concurrency: 2, bandwidth: 8MB/s }

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
        let killed = try StartedProcess(hoist, ["run", "--quiet", manifest], environment: environment)
        let partsStored = { proxy.log.filter { $0["event"] as? String == "answer" && $0["status"] as? Int == 200
            && ($0["target"] as? String ?? "").contains("partNumber=") }.count }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, killed.process.isRunning, partsStored() < 3 { usleep(20_000) }
        #expect(partsStored() >= 3, "\(partsStored()) parts stored before the kill")
        usleep(UInt32.random(in: 0...1_500_000))
        kill(killed.pid, SIGKILL)
        _ = killed.finish()
        #expect(try await server.storedBytes(bucket: bucket, key: "k/big.bin") == nil, "the kill came too late")

        // The next run sends the rest at full speed (two parts at once still: `concurrency: 2`).
        try unthrottle(manifest, "8MB/s")
        let again = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "k/big.bin") == patternData(size))
        let received = proxy.dataBytesForwarded
        print("s3 kill: \(received) bytes received for \(size)")
        #expect(received <= size + 2 * (8 << 20), "\(received - size) bytes more than the file")
        #expect(proxy.mostInFlight("PUT") == 2, "parts at once: the job's two slots")
        #expect(try await server.pendingUploads(bucket: bucket) == [])
    }

    /// On `rclone serve s3`, whose later reads give a multipart object the MD5 of its bytes
    /// rather than Complete's ETag: a plain job trusts the parts' MD5s and Complete's ETag and
    /// reads nothing back (no `HEAD`, which costs this server an MD5 of the whole object); a job
    /// that moves reads each multipart object back before it removes the file (the size of what
    /// the server assembled), and one that mirrors does too, so the generation it records is the
    /// one later reads report, and a removed file's object is deleted, not kept.
    @Test func onlyAJobThatMovesOrMirrorsReadsAMultipartObjectBack() async throws {
        let server = S3TestServer.rclone
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let fixture = try JobFixture()
        try fixture.file("big.bin", 20 << 20)   // over the 16 MiB threshold: multipart
        try fixture.file("small.txt", 300)
        let home = try awsHome()
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
        func job(_ name: String, _ files: String) throws -> String {
            try fixture.directory.write("\(name).yaml", Data("""
                version: 1
                name: \(name)
                journal: \(name).sqlite
                storage: { url: 's3://\(bucket)', endpoint: 'http://127.0.0.1:\(proxy.port)', region: us-east-1, pathStyle: true, credentials: uploader }
                files: [\(files)]

                """.utf8))
            return fixture.directory.url.appendingPathComponent("\(name).yaml").path
        }
        func heads(of key: String, from start: Int) -> Int {
            proxy.requests[start...].filter { "\($0["method"] ?? "") \($0["target"] ?? "")".hasPrefix("HEAD /\(bucket)/\(key)") }.count
        }

        let plain = try runProcess(hoist, ["run", "--quiet", try job("plain", "{ root: src, destination: 'plain/{relpath}' }")],
                                   environment: environment)
        #expect(plain.status == 0, "\(plain.stdout)\(plain.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "plain/big.bin") == patternData(20 << 20))
        #expect(heads(of: "plain/big.bin", from: 0) == 0, "\(proxy.requests.map { "\($0["method"] ?? "") \($0["target"] ?? "")" })")

        try FileManager.default.copyItem(at: fixture.directory.url.appendingPathComponent("src"),
                                         to: fixture.directory.url.appendingPathComponent("outbox"))
        var before = proxy.requests.count
        let moved = try runProcess(hoist, ["run", "--quiet", try job("move", "{ root: outbox, destination: 'moved/{relpath}', move: true }")],
                                   environment: environment)
        #expect(moved.status == 0, "\(moved.stdout)\(moved.stderr)")
        #expect(heads(of: "moved/big.bin", from: before) == 1)
        #expect(try await server.storedBytes(bucket: bucket, key: "moved/big.bin") == patternData(20 << 20))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("outbox/big.bin").path))

        let mirror = try job("mirror", "{ root: src, destination: 'site/{relpath}', mirror: true }")
        before = proxy.requests.count
        let first = try runProcess(hoist, ["run", "--quiet", mirror], environment: environment)
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        #expect(heads(of: "site/big.bin", from: before) == 1)
        try FileManager.default.removeItem(at: fixture.directory.url.appendingPathComponent("src/big.bin"))
        let again = try runProcess(hoist, ["run", mirror], environment: environment)
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        #expect((again.stdout + again.stderr).contains("1 deleted"), "\(again.stdout)\(again.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "site/big.bin") == nil)
        #expect(try await server.storedBytes(bucket: bucket, key: "site/small.txt") == patternData(300))
    }

    /// A run with nothing changed asks the journal, not the server: at a proxy, the run of 300
    /// unchanged files makes the same few requests (the access check) as a run of none would,
    /// no request per file, so a no-change run to `s3://` costs what one to `gs://` does.
    @Test func aNoChangeRunMakesNoRequestPerFile() async throws {
        let server = S3TestServer.rclone
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let fixture = try JobFixture()
        for index in 0..<300 { try fixture.file("d\(index % 10)/f\(index).txt", 10 + index) }
        let home = try awsHome()
        _ = try fixture.job("""
            storage: { url: 's3://\(bucket)/n', endpoint: 'http://127.0.0.1:\(proxy.port)', region: us-east-1, pathStyle: true, credentials: uploader }
            files: [{ root: src }]

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
        let first = try runProcess(hoist, ["run", "--quiet", manifest], environment: environment)
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        let before = proxy.requests.count
        #expect(before >= 300)
        let again = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(again.status == 0)
        #expect((again.stdout + again.stderr).contains("300 unchanged"), "\(again.stdout)\(again.stderr)")
        let asked = proxy.requests[before...].map { "\($0["method"] ?? "") \($0["target"] ?? "")" }
        #expect(asked.count <= 2, "\(asked)")
    }

    /// A job of many small files keeps its connections: each of its slots opens one and sends
    /// every later request on it (keep-alive), on radosgw as on `rclone serve s3`. Counted as
    /// the kernel sees it: the client ports of TCP connections to the server's port
    /// (`/proc/net/tcp`, either side's entry, so a connection closed by either end is still
    /// seen, in `TIME_WAIT`) new during the run. A server or a client that closed each
    /// connection shows one per file: moto's server does (`Connection: close` on every answer;
    /// 61 connections for these 60 files and the pre-flight), so it is not one of the servers here.
    @Test(arguments: [S3TestServer.rclone, .ceph])
    func smallFilesReuseTheirConnections(server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let port = try server.port()
        let fixture = try JobFixture()
        for index in 0..<60 { try fixture.file("f\(index).bin", 4096) }
        let home = try awsHome()
        _ = try fixture.job("""
            storage: { url: 's3://\(bucket)/c', endpoint: '\(try server.endpoint())', region: us-east-1, pathStyle: true, credentials: uploader }
            files: [{ root: src }]
            upload: { concurrency: 4 }

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let before = try clientPorts(to: port)
        let run = try runProcess(hoist, ["run", "--quiet", manifest], environment: ["HOME": home.path, "PATH": "/usr/bin:/bin"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let opened = try clientPorts(to: port).subtracting(before)
        #expect(!opened.isEmpty && opened.count <= 4 + 2, "\(opened.count) connections for 60 files at concurrency 4 (\(before.count) before)")
        let listed = try await server.request("GET", "/\(bucket)", query: [("list-type", "2"), ("prefix", "c/")])
        #expect(String(decoding: listed.body, as: UTF8.self).components(separatedBy: "<Key>").count - 1 == 60)
    }

    /// The local ports of TCP connections (any state but listening) between clients and `port`:
    /// from the client's entries (remote port `port`) and the server's (local port `port`), in
    /// the IPv4 and IPv6 tables (a server listening on `::` has its side of a connection there).
    func clientPorts(to port: Int) throws -> Set<Int> {
        // Read to the end: /proc's files say their size is 0, which a whole-file read may trust.
        let table = try ["/proc/net/tcp", "/proc/net/tcp6"].map { path in
            guard let file = FileHandle(forReadingAtPath: path) else { throw TestServerError("cannot read \(path)") }
            defer { try? file.close() }
            return String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
        }.joined(separator: "\n")
        var ports = Set<Int>()
        for line in table.split(separator: "\n") where !line.contains("local_address") {
            let fields = line.split(separator: " ")
            guard fields.count > 3 else { continue }
            let local = fields[1].split(separator: ":"), remote = fields[2].split(separator: ":")
            guard local.count == 2, remote.count == 2, let localPort = Int(local[1], radix: 16),
                  let remotePort = Int(remote[1], radix: 16), fields[3] != "0A" else { continue }   // 0A: LISTEN
            if remotePort == port { ports.insert(localPort) } else if localPort == port { ports.insert(remotePort) }
        }
        return ports
    }

    /// Only the uploads the job's journal records are the job's to end, never another
    /// application's in the same bucket. A run killed
    /// while sending two large files leaves both multipart uploads, each recorded in its
    /// journal; then one file is removed and the other changed. The next run ends the changed
    /// file's old upload as it starts the new one (the file's row is about to forget it), and the
    /// removed file's at its end (moto dates every upload in 2010: over a day old), each said in
    /// a warning; another application's upload under the job's own prefix (a
    /// CreateMultipartUpload of its own) and one under another prefix are left alone.
    @Test func aLaterRunEndsOnlyTheUploadsItsJournalRecords() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), [])
        let others = try await server.pendingUploads(bucket: bucket)
        for key in ["jobs/x/theirs.bin", "jobs/y/other.bin"] {
            #expect(try await server.request("POST", "/\(bucket)/\(key)", query: [("uploads", "")]).status == 200)
        }
        let theirs = Set(try await server.pendingUploads(bucket: bucket)).subtracting(others)
        #expect(theirs.count == 2)
        let fixture = try JobFixture()
        try fixture.file("gone.bin", 20 << 20)
        try fixture.file("changed.bin", 20 << 20)
        let home = try awsHome()
        _ = try fixture.job("""
            storage: { url: 's3://\(bucket)/jobs/x', endpoint: 'http://127.0.0.1:\(proxy.port)', region: us-east-1, pathStyle: true, credentials: uploader }
            files: [{ root: src }]
            upload: { concurrency: 3, bandwidth: 4MB/s }

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
        let killed = try StartedProcess(hoist, ["run", "--quiet", manifest], environment: environment)
        // Answers the proxy gave for one file: its CreateMultipartUpload (`?uploads`), its parts,
        // its CompleteMultipartUpload (a POST with `uploadId=`).
        let answered = { (name: String, method: String, marker: String) in proxy.log.filter { entry in
            let target = entry["target"] as? String ?? ""
            return entry["event"] as? String == "answer" && entry["status"] as? Int == 200 && entry["method"] as? String == method
                && target.contains("/jobs/x/\(name)?") && target.contains(marker)
        }.count }
        // Killed once both uploads exist and a part is stored: not once each has a part, as the
        // first file's parts fill the slots and it may be complete by the time the second's first
        // part is (seen once in 25 runs, under load).
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, killed.process.isRunning,
              answered("gone.bin", "POST", "uploads") < 1 || answered("changed.bin", "POST", "uploads") < 1
                || answered("gone.bin", "PUT", "partNumber=") + answered("changed.bin", "PUT", "partNumber=") < 1 { usleep(20_000) }
        kill(killed.pid, SIGKILL)
        _ = killed.finish()
        #expect(answered("gone.bin", "POST", "uploads") == 1 && answered("changed.bin", "POST", "uploads") == 1, "the kill came too early")
        #expect(answered("gone.bin", "POST", "uploadId=") + answered("changed.bin", "POST", "uploadId=") == 0, "an upload finished before the kill")
        let pendingAfterKill = try await server.pendingUploads(bucket: bucket)
        #expect(pendingAfterKill.count == 4, "\(pendingAfterKill)")
        try FileManager.default.removeItem(at: fixture.directory.url.appendingPathComponent("src/gone.bin"))
        try fixture.file("changed.bin", 20 << 20 + 1)

        try unthrottle(manifest, "4MB/s")   // the next run is not killed: at full speed
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("ended the unfinished upload of 'changed.bin' an earlier run began (the file changed since)"),
                "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("ended 1 unfinished upload that earlier runs left over a day ago ('jobs/x/gone.bin')"),
                "\(run.stdout)\(run.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "jobs/x/changed.bin") == patternData(20 << 20 + 1))
        #expect(Set(try await server.pendingUploads(bucket: bucket)) == theirs)
    }

    /// radosgw without `rgw dns name`, asked with virtual-host addressing, answers the bucket's
    /// pre-flight listing with the list of all buckets (played by the fault proxy, in front of
    /// each server): `hoist cp` stops there (exit 2) saying what came back and naming
    /// `pathStyle`, and no byte reaches the server.
    @Test(arguments: S3TestServer.plain)
    func aPreflightAnsweredWithAllBucketsStopsTheCopy(server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), ["--preflight", "all-buckets"])
        let directory = try TemporaryDirectory()
        let file = try directory.write("report.csv", Data("a,b\n1,2\n".utf8))
        let home = try awsHome()
        let environment = ["HOME": home.path, "AWS_PROFILE": "uploader", "AWS_ENDPOINT_URL": "http://127.0.0.1:\(proxy.port)",
                           "PATH": "/usr/bin:/bin"]
        let copy = try runProcess(hoist, ["cp", file.path, "s3://\(bucket)/in/"], environment: environment)
        #expect(copy.status == 2 && copy.stderr.contains("ListAllMyBucketsResult") && copy.stderr.contains("pathStyle"),
                "\(copy.stdout)\(copy.stderr)")
        #expect(!proxy.requests.contains { ($0["method"] as? String) == "PUT" })
        #expect(try await server.storedBytes(bucket: bucket, key: "in/report.csv") == nil)
    }

    @Test func cpToAnS3URLAndAMistypedKey() async throws {
        let server = S3TestServer.rclone
        let bucket = try await server.makeBucket()
        let directory = try TemporaryDirectory()
        let file = try directory.write("report.csv", Data("a,b\n1,2\n".utf8))
        let home = try awsHome()
        let environment = ["HOME": home.path, "AWS_PROFILE": "uploader", "AWS_ENDPOINT_URL": try server.endpoint(), "PATH": "/usr/bin:/bin"]
        // cp reads the environment as the AWS tools do (a custom endpoint is addressed path style).
        let copy = try runProcess(hoist, ["cp", file.path, "s3://\(bucket)/in/"], environment: environment)
        #expect(copy.status == 0, "\(copy.stdout)\(copy.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "in/report.csv") == Data("a,b\n1,2\n".utf8))
        // A key of another backend (or mistyped) is an error at its line, with the nearest S3 key.
        let job = try directory.write("job.yaml", Data("version: 1\nname: s3typo\nstorage: { url: 's3://\(bucket)', regoin: eu-west-1 }\nfiles: [{ root: ., optional: true }]\n".utf8))
        let validated = try runProcess(hoist, ["validate", job.path], environment: environment)
        #expect(validated.status == 2)
        #expect(validated.stderr.contains("job.yaml:3:") && validated.stderr.contains("unknown key 'regoin' (did you mean 'region'?)"), "\(validated.stderr)")
    }

    /// `hoist cp --multipart-threshold --part-size` (and the manifest's `partSize`): a 12 MiB
    /// file in 5 MiB parts is a multipart object of 3 parts (its ETag ends `-3`), where the
    /// defaults (16 MiB threshold) send it in one PutObject; a backend without the key refuses
    /// the flag, and a part size S3 cannot take is refused at its key.
    @Test func cpTakesAPartSizeAndAThreshold() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let directory = try TemporaryDirectory()
        let file = try directory.write("big.bin", patternData(12 << 20))
        let home = try awsHome()
        let environment = ["HOME": home.path, "AWS_PROFILE": "uploader", "AWS_ENDPOINT_URL": try server.endpoint(), "PATH": "/usr/bin:/bin"]
        for (arguments, key, parts) in [([], "plain.bin", nil), (["--multipart-threshold", "5MiB", "--part-size", "5MiB"], "parts.bin", "-3")] {
            let copy = try runProcess(hoist, ["cp"] + arguments + [file.path, "s3://\(bucket)/\(key)"], environment: environment)
            #expect(copy.status == 0, "\(copy.stdout)\(copy.stderr)")
            #expect(try await server.storedBytes(bucket: bucket, key: key) == patternData(12 << 20))
            let etag = try await server.request("HEAD", "/\(bucket)/\(key)").header("ETag") ?? ""
            #expect(parts.map { etag.hasSuffix($0 + "\"") || etag.hasSuffix($0) } ?? !etag.contains("-"), "\(key): \(etag)")
        }
        let local = try runProcess(hoist, ["cp", "--part-size", "8MiB", file.path, "file:" + directory.url.appendingPathComponent("bucket").path + "/x"],
                                   environment: environment)
        #expect(local.status == 2 && local.stderr.contains("--part-size applies to s3:// destinations, not file:"), "\(local.stderr)")
        let small = try runProcess(hoist, ["cp", "--part-size", "1MiB", file.path, "s3://\(bucket)/small.bin"], environment: environment)
        #expect(small.status == 2 && small.stderr.contains("--part-size: partSize 1048576 B is outside S3's part sizes, 5 MiB to 5 GiB"),
                "\(small.stderr)")
        let job = try directory.write("job.yaml", Data("version: 1\nname: parts\nstorage: { url: 's3://\(bucket)', partSize: 4MiB }\nfiles: [{ root: ., optional: true }]\n".utf8))
        let validated = try runProcess(hoist, ["validate", job.path], environment: environment)
        #expect(validated.status == 2 && validated.stderr.contains("job.yaml:3:") && validated.stderr.contains("outside S3's part sizes"),
                "\(validated.stderr)")
    }

    /// A custom endpoint and no credentials found (cron's bare environment, an envFile that went
    /// missing) sent unsigned requests, silently. It stops at the check now, for `run` and `cp`
    /// alike, naming where credentials come from and `anonymous: true`; asked for, requests go
    /// unsigned (moto takes them).
    @Test func noCredentialsStopsUnlessAnonymousIsAskedFor() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        let environment = ["HOME": try TemporaryDirectory().path, "PATH": "/usr/bin:/bin"]
        let storage = "storage: { url: 's3://\(bucket)/site', endpoint: '\(try server.endpoint())' }\nfiles: [{ root: src }]\n"
        _ = try fixture.job(storage)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let refused = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(refused.status == 2, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stderr.contains("No credentials for s3://\(bucket)") && refused.stderr.contains("anonymous: true"), "\(refused.stderr)")
        let file = fixture.directory.url.appendingPathComponent("src/a.txt").path
        let copy = try runProcess(hoist, ["cp", file, "s3://\(bucket)/cp/a.txt"], environment: environment.merging(["AWS_ENDPOINT_URL": try server.endpoint()]) { $1 })
        #expect(copy.status == 2 && copy.stderr.contains("No credentials for s3://\(bucket)"), "\(copy.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "site/a.txt") == nil)

        _ = try fixture.job(storage.replacingOccurrences(of: "endpoint:", with: "anonymous: true, endpoint:"))
        let anonymous = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(anonymous.status == 0, "\(anonymous.stdout)\(anonymous.stderr)")
        #expect(try await server.storedBytes(bucket: bucket, key: "site/a.txt") == patternData(100))
        let anonymousCopy = try runProcess(hoist, ["cp", "--anonymous", file, "s3://\(bucket)/cp/a.txt"],
                                           environment: environment.merging(["AWS_ENDPOINT_URL": try server.endpoint()]) { $1 })
        #expect(anonymousCopy.status == 0, "\(anonymousCopy.stderr)")
    }
}
