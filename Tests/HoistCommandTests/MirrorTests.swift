import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// Where a mirror test's objects go: a local bucket, fake-gcs-server or S3 on moto or Ceph's
/// radosgw, each reached as a user's manifest reaches it, and checked through the server's own API.
enum MirrorTarget: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case local, fakeGCS, moto, ceph
    var testDescription: String { rawValue }

    /// The S3 server, for an S3 target.
    var s3Server: S3TestServer? { self == .moto ? .moto : self == .ceph ? .ceph : nil }

    /// The manifest's `storage:`, the environment a run needs, and a storage to look at (and,
    /// as "another writer", to write) the bucket.
    func prepare(_ fixture: JobFixture) async throws -> (storage: String, environment: [String: String], bucket: Storage) {
        var environment = ProcessInfo.processInfo.environment
        switch self {
        case .local:
            let folder = fixture.directory.url.appendingPathComponent("bucket").path
            return ("{ url: 'file:bucket' }", environment, Storage(url: "file://" + folder, backend: LocalBucket(directory: folder)))
        case .fakeGCS:
            let bucket = try await FakeGCS.makeBucket()
            environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(try FakeGCS.port())"
            return ("{ url: 'gs://\(bucket)' }", environment, gcsStorage(bucket: bucket, port: try FakeGCS.port()))
        case .moto, .ceph:
            let server = s3Server!
            let bucket = try await server.makeBucket()
            environment["AWS_ACCESS_KEY_ID"] = S3TestServer.accessKey
            environment["AWS_SECRET_ACCESS_KEY"] = S3TestServer.secretKey
            return ("{ url: 's3://\(bucket)', endpoint: '\(try server.endpoint())', region: us-east-1, pathStyle: true }", environment,
                    try s3Storage(server, bucket: bucket))
        }
    }
}

/// `mirror: true` and `mirror: listed` (docs/manifest.md), through `hoist run` as a user meets
/// them: which objects are left in the bucket, the exit status, what is said and the events.
@Suite(.serialized) struct MirrorTests {
    struct Setup {
        let fixture: JobFixture
        let manifest: String
        let environment: [String: String]
        let bucket: Storage
        let target: MirrorTarget

        func run(_ arguments: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
            try runProcess(hoist, (arguments.first == "plan" ? [] : ["run"]) + arguments + [manifest],
                           environment: environment)
        }

        func exists(_ object: String) async -> Bool { (try? await bucket.backend.metadata(of: object)) != nil }

        /// The stored bytes, read through the server's own API (or the bucket's folder).
        func bytes(_ object: String) async throws -> Data? {
            let name = bucket.reference().bucket
            switch target {
            case .local: return try? Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/" + object))
            case .fakeGCS: return try? await FakeGCS.download(bucket: name, object: object)
            case .moto, .ceph: return try await target.s3Server!.storedBytes(bucket: name, key: object)
            }
        }

        /// Another writer replaces `object` with other bytes (a new generation).
        func replace(_ object: String, with data: Data) async throws {
            _ = try await bucket.reference(withPath: object).putDataAsync(data)
        }

        func removeFile(_ path: String) throws { try FileManager.default.removeItem(at: fixture.directory.url.appendingPathComponent("src/" + path)) }
    }

    func setUp(_ target: MirrorTarget, files: [String: Int], set extra: String = "", upload: String = "", hooks: String = "") async throws -> Setup {
        try await Self.setUp(target, files: files, fileSet: "destination: 'site/{relpath}', mirror: true" + extra, upload: upload, hooks: hooks)
    }

    /// A job of one file set (`root: src, FILESET`) on `target` (or on `storage`, a manifest's
    /// `storage:` of the test's own), its `src/` holding `files` (path: size).
    static func setUp(_ target: MirrorTarget, files: [String: Int], fileSet: String, upload: String = "", hooks: String = "",
                      storage: String? = nil) async throws -> Setup {
        let fixture = try JobFixture()
        for (path, size) in files { try fixture.file(path, size) }
        try FileManager.default.createDirectory(at: fixture.directory.url.appendingPathComponent("src"), withIntermediateDirectories: true)
        let (prepared, environment, bucket) = try await target.prepare(fixture)
        _ = try fixture.job("""
            storage: \(storage ?? prepared)
            files: [{ root: src, \(fileSet) }]
            upload: { concurrency: 8\(upload) }
            \(hooks)
            """)
        return Setup(fixture: fixture, manifest: fixture.directory.url.appendingPathComponent("job.yaml").path, environment: environment,
                     bucket: bucket, target: target)
    }

    /// The `delete` events of a `--json` run's output (checked against the event schema).
    func deleteEvents(_ output: String) throws -> [[String: Any]] { try Self.events("delete", in: output) }

    /// The events named `name` of a `--json` run's output (checked against the event schema).
    static func events(_ name: String, in output: String) throws -> [[String: Any]] {
        _ = try validateEvents(output)
        return output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["event"] as? String == name }
    }

    @Test(arguments: MirrorTarget.allCases)
    func deletingThreeOfAHundredFilesDeletesExactlyThoseThreeObjects(target: MirrorTarget) async throws {
        var files: [String: Int] = [:]
        for index in 0..<100 { files["d\(index % 7)/f\(index).html"] = 100 + index }
        let setup = try await setUp(target, files: files)
        // Objects outside the file set's prefix, and one beside it, are never the mirror's.
        try await setup.replace("other/f1.html", with: Data("not the mirror's".utf8))
        try await setup.replace("sitemap.xml", with: Data("not the mirror's".utf8))
        let first = try setup.run()
        #expect(first.status == 0, "\(first.stderr)")
        let gone = ["d1/f1.html", "d3/f38.html", "d6/f97.html"]
        for path in gone { try setup.removeFile(path) }

        let plan = try setup.run(["plan"])
        for path in gone { #expect(plan.stdout.contains("delete  site/\(path) (file gone: "), "\(plan.stdout)") }
        #expect(plan.stdout.contains("97 to skip, 3 to delete"), "\(plan.stdout)")
        let dry = try setup.run(["--dry-run"])
        #expect(dry.stdout.contains("delete  site/d1/f1.html"), "\(dry.stdout)")
        #expect(await setup.exists("site/d1/f1.html"), "a dry run deletes nothing")
        let lines = try setup.run(["--dry-run", "--json"]).stdout.split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(Set(lines.filter { $0["action"] as? String == "delete" }.compactMap { $0["object"] as? String }) == Set(gone.map { "site/" + $0 }))
        #expect(lines.last?["delete"] as? Int == 3)

        let second = try setup.run(["--json"])
        #expect(second.status == 0, "\(second.stderr)")
        let events = try deleteEvents(second.stdout)
        #expect(Set(events.compactMap { $0["object"] as? String }) == Set(gone.map { "site/" + $0 }))
        #expect(events.allSatisfy { $0["outcome"] as? String == "deleted" && $0["reason"] as? String == "gone" })
        for index in 0..<100 {
            let path = "d\(index % 7)/f\(index).html"
            #expect(await setup.exists("site/" + path) == !gone.contains(path), "\(path)")
        }
        #expect(await setup.exists("other/f1.html"))
        #expect(await setup.exists("sitemap.xml"))
        // The journal marks them: the next run deletes nothing more, and `status` counts them.
        let third = try setup.run()
        #expect(third.status == 0 && third.stdout.hasPrefix("test: 0 uploaded (0 B), 97 unchanged in"), "\(third.stdout)")
        let status = try runProcess(hoist, ["status", setup.manifest], environment: setup.environment)
        #expect(status.stdout.contains("3 deleted by mirror"), "\(status.stdout)")
    }

    @Test(arguments: MirrorTarget.allCases)
    func anObjectAnotherWriterReplacedIsKept(target: MirrorTarget) async throws {
        let setup = try await setUp(target, files: ["a.txt": 100, "b.txt": 200, "c.txt": 300], upload: ", maxDelete: 100%")
        #expect(try setup.run().status == 0)
        try setup.removeFile("a.txt")
        try setup.removeFile("b.txt")
        let theirs = Data("another writer's page".utf8)
        try await setup.replace("site/a.txt", with: theirs)
        let run = try setup.run(["--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let outcomes = Dictionary(uniqueKeysWithValues: try deleteEvents(run.stdout).map { ($0["object"] as! String, $0["outcome"] as! String) })
        #expect(outcomes == ["site/a.txt": "changed", "site/b.txt": "deleted"])
        #expect(try await setup.bytes("site/a.txt") == theirs)
        #expect(await !setup.exists("site/b.txt"))
        // Not tried again: the object is the other writer's now.
        #expect(try deleteEvents(try setup.run(["--json"]).stdout).isEmpty)
    }

    @Test func aRunWithAFailedUploadDeletesNothing() async throws {
        let setup = try await setUp(.local, files: ["a.txt": 100, "b.txt": 200, "c.txt": 300], hooks: """
            lua: { env: [FAIL_C] }
            hooks:
              - inline: |
                  function before_upload(f) if f.relpath == "c.txt" and os.getenv("FAIL_C") then error("refused") end end
            """)
        #expect(try setup.run().status == 0)
        try setup.removeFile("a.txt")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 10)],
                                              ofItemAtPath: setup.fixture.directory.url.appendingPathComponent("src/c.txt").path)
        var failing = setup.environment
        failing["FAIL_C"] = "1"
        let run = try runProcess(hoist, ["run", setup.manifest], environment: failing)
        #expect(run.status == 1)
        #expect(run.stderr.contains("mirror: nothing deleted, as not every upload of the run succeeded"), "\(run.stderr)")
        #expect(await setup.exists("site/a.txt"))
        // Once every upload succeeds, the object goes.
        #expect(try setup.run().status == 0)
        #expect(await !setup.exists("site/a.txt"))
    }

    @Test(arguments: [MirrorTarget.local, .fakeGCS])
    func passingMaxDeleteDeletesNothingAndExits1(target: MirrorTarget) async throws {
        let setup = try await setUp(target, files: ["a.txt": 1, "b.txt": 2, "c.txt": 3, "d.txt": 4], upload: ", maxDelete: 2")
        #expect(try setup.run().status == 0)
        for path in ["a.txt", "b.txt", "c.txt"] { try setup.removeFile(path) }
        let run = try setup.run()
        #expect(run.status == 1)
        #expect(run.stderr.contains("mirror would delete 3 of 4 objects, more than upload.maxDelete (2): nothing deleted"), "\(run.stderr)")
        for path in ["a.txt", "b.txt", "c.txt", "d.txt"] { #expect(await setup.exists("site/" + path)) }
        #expect(try setup.run(["plan"]).stderr.contains("more than upload.maxDelete (2): a run would delete nothing"))
        // A percentage: 3 of 4 objects is 75%.
        let text = try String(contentsOfFile: setup.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "maxDelete: 2", with: "maxDelete: 75%").write(toFile: setup.manifest, atomically: true, encoding: .utf8)
        #expect(try setup.run().status == 0)
        for path in ["a.txt", "b.txt", "c.txt"] { #expect(await !setup.exists("site/" + path)) }
    }

    @Test func beforeDeleteVetoesAndOnDeleteReports() async throws {
        let setup = try await setUp(.local, files: ["keep.txt": 10, "gone.txt": 20, "stays.txt": 30], upload: ", maxDelete: 100%", hooks: """
            hooks:
              - inline: |
                  function before_delete(o) return o.object ~= "site/keep.txt" end
                  function on_delete(o) log.info("on_delete " .. o.object .. " " .. o.outcome .. " " .. o.reason) end
            """)
        #expect(try setup.run().status == 0)
        try setup.removeFile("keep.txt")
        try setup.removeFile("gone.txt")
        let run = try setup.run()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(await setup.exists("site/keep.txt"))
        #expect(await !setup.exists("site/gone.txt"))
        let said = run.stdout + run.stderr
        #expect(said.contains("on_delete site/keep.txt vetoed gone"), "\(said)")
        #expect(said.contains("on_delete site/gone.txt deleted gone"), "\(said)")
        #expect(run.stdout.contains("1 deleted, 1 kept from deletion"), "\(run.stdout)")
    }

    /// `before_delete` fails closed: a hook's error keeps the object and fails the run.
    @Test func aBeforeDeleteErrorKeepsTheObject() async throws {
        let setup = try await setUp(.local, files: ["a.txt": 10, "b.txt": 20], hooks: """
            hooks:
              - inline: |
                  function before_delete(o) error("no deletes today") end
            """)
        #expect(try setup.run().status == 0)
        try setup.removeFile("a.txt")
        let run = try setup.run()
        #expect(run.status == 1)
        #expect(run.stderr.contains("no deletes today"), "\(run.stderr)")
        #expect(await setup.exists("site/a.txt"))
    }

    /// The same on a PostgreSQL journal: its rows say what was stored, and mark what went.
    @Test func aMirrorOnAPostgreSQLJournal() async throws {
        let url = try PostgresServer.shared().makeDatabase()
        let fixture = try JobFixture()
        for name in ["a.txt", "b.txt", "c.txt"] { try fixture.file(name, 100) }
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try """
            version: 1
            name: test
            journal: ${HOIST_PG}
            storage: { url: 'file:bucket' }
            files: [{ root: src, destination: 'site/{relpath}', mirror: true }]

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["HOIST_PG"] = url
        #expect(try runProcess(hoist, ["run", manifest], environment: environment).status == 0)
        try FileManager.default.removeItem(at: fixture.directory.url.appendingPathComponent("src/b.txt"))
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("2 unchanged, 1 deleted"), "\(run.stdout)")
        let bucket = fixture.directory.url.appendingPathComponent("bucket/site")
        #expect(try FileManager.default.contentsOfDirectory(atPath: bucket.path).sorted() == ["a.txt", "c.txt"])
        #expect(try runProcess(hoist, ["run", manifest], environment: environment).stdout.hasPrefix("test: 0 uploaded (0 B), 2 unchanged in"))
        #expect(try runProcess(hoist, ["status", manifest], environment: environment).stdout.contains("files: 2 uploaded, 0 pending, 0 failed, 1 deleted by mirror"))
    }

    /// A root that went away (an optional set, a mount gone) is not "every file gone": nothing
    /// is deleted. A later hook cannot undo an earlier hook's veto. The metrics count deletions.
    @Test func aMissingRootDeletesNothingAndAVetoIsFinal() async throws {
        let setup = try await setUp(.local, files: ["a.txt": 10, "b.txt": 20, "c.txt": 30], set: ", optional: true", upload: ", maxDelete: 100%",
                                    hooks: """
            hooks:
              - inline: |
                  function before_delete(o) if o.object == "site/a.txt" then return false end end
              - inline: |
                  function before_delete(o) return true end
            """)
        #expect(try setup.run().status == 0)
        let root = setup.fixture.directory.url.appendingPathComponent("src")
        let away = setup.fixture.directory.url.appendingPathComponent("src-away")
        try FileManager.default.moveItem(at: root, to: away)
        let missing = try setup.run()
        #expect(missing.status == 0, "\(missing.stderr)")
        #expect(await setup.exists("site/a.txt"))
        #expect(await setup.exists("site/b.txt"))
        try FileManager.default.moveItem(at: away, to: root)
        try setup.removeFile("a.txt")
        try setup.removeFile("b.txt")
        let metrics = setup.fixture.directory.url.appendingPathComponent("hoist.prom").path
        #expect(try setup.run(["--metrics-file", metrics]).status == 0)
        #expect(await setup.exists("site/a.txt"), "the first hook's veto stands")
        #expect(await !setup.exists("site/b.txt"))
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("hoist_last_run_objects_deleted{job=\"test\",outcome=\"deleted\"} 1"), "\(text)")
        #expect(text.contains("hoist_last_run_objects_deleted{job=\"test\",outcome=\"kept\"} 1"), "\(text)")
    }

    @Test(arguments: MirrorTarget.allCases)
    func listedRemovesAStrayAndNothingOutsideThePrefix(target: MirrorTarget) async throws {
        let setup = try await setUp(target, files: ["a.txt": 10, "sub/b.txt": 20, "skip.tmp": 30], set: ", exclude: ['*.tmp']",
                                    upload: ", maxDelete: 100%")
        let text = try String(contentsOfFile: setup.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "mirror: true", with: "mirror: listed").write(toFile: setup.manifest, atomically: true, encoding: .utf8)
        let stray = Data("left by hand".utf8)
        for object in ["site/stray.txt", "site/sub/old.txt", "site/skip.tmp", "sitemap.txt", "other/a.txt"] {
            try await setup.replace(object, with: stray)
        }
        let run = try setup.run(["--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let deleted = try deleteEvents(run.stdout).filter { $0["outcome"] as? String == "deleted" }.compactMap { $0["object"] as? String }
        #expect(Set(deleted) == ["site/stray.txt", "site/sub/old.txt"])
        #expect(try deleteEvents(run.stdout).allSatisfy { $0["reason"] as? String == "stray" })
        for object in ["site/a.txt", "site/sub/b.txt", "sitemap.txt", "other/a.txt"] { #expect(await setup.exists(object), "\(object)") }
        // An excluded file's object is not the mirror's to delete (as rclone's filters).
        #expect(await setup.exists("site/skip.tmp"))
        #expect(try await setup.bytes("site/a.txt") == patternData(10))
    }

    /// The removal gate, end to end: between two runs someone swaps the bucket's folder `site/dir` for a
    /// link to a folder outside holding a file of the size the sidecar says, so the sidecar and
    /// the journal agree on the generation. The mirror's delete of `site/dir/shadow` removed
    /// that file; now it finds no object there and removes nothing.
    @Test func aMirrorDeletesNothingThroughALinkInALocalBucket() async throws {
        let setup = try await setUp(.local, files: ["dir/shadow": 64, "keep.txt": 10])
        #expect(try setup.run().status == 0)
        let bucket = setup.fixture.directory.url.appendingPathComponent("bucket")
        let outside = try TemporaryDirectory()
        let victim = try outside.write("shadow", Data(repeating: UInt8(ascii: "v"), count: 64))
        try FileManager.default.moveItem(at: bucket.appendingPathComponent("site/dir"), to: outside.url.appendingPathComponent("moved"))
        try FileManager.default.createSymbolicLink(at: bucket.appendingPathComponent("site/dir"), withDestinationURL: outside.url)
        try setup.removeFile("dir/shadow")
        let run = try setup.run(["--json"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try deleteEvents(run.stdout).map { $0["outcome"] as? String } == ["absent"], "\(run.stdout)")
        #expect(try Data(contentsOf: victim) == Data(repeating: UInt8(ascii: "v"), count: 64))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: bucket.appendingPathComponent("site/dir").path) == outside.path)
        #expect(try await setup.bytes("site/keep.txt") == patternData(10))
    }
}
