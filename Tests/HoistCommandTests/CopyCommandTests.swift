import Foundation
import HoistTestSupport
import Testing

/// `hoist cp` as a user runs it: objects in the bucket, output lines and exit statuses. It runs
/// on the engine of `hoist run` (a job made from the command line), so it prints the same summary
/// line and JSON events.
@Suite struct CopyCommandTests {
    func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test func filesUnderAPrefixWithMetadataFlags() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("src/a.txt", Data("alpha".utf8))
        let b = try directory.write("src/b.html", Data("<b>".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let run = try runProcess(hoist, [
            "cp", "--storage", "file://" + bucket.path, "--cache-control", "no-cache", "--metadata", "team=web",
            "--metadata", "run=3", a.path, b.path, "site/",
        ])
        #expect(run.status == 0, "\(run.stderr)")
        // Not a terminal: the summary line, and no errors.
        #expect(run.stdout.hasPrefix("cp: 2 uploaded (8 B) in "), "\(run.stdout)")
        #expect(run.stderr.isEmpty)
        #expect(try Data(contentsOf: bucket.appendingPathComponent("site/a.txt")) == Data("alpha".utf8))
        let meta = LocalBucketFiles.attribute(of: "site/b.html", in: bucket.path)
        #expect(meta?["contentType"] as? String == "text/html")
        #expect(meta?["cacheControl"] as? String == "no-cache")
        #expect(meta?["metadata"] as? [String: String] == ["team": "web", "run": "3"])
    }

    @Test func oneFileToAnExactNameWithJSONEvents() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("a.txt", Data("alpha".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let run = try runProcess(hoist, ["cp", "--json", "--storage", "file://" + bucket.path, a.path, "renamed/x.bin"])
        #expect(run.status == 0)
        let events = jsonLines(run.stdout)
        // The events of `hoist run --json` (`plan_counted` comes when the walk ends, among the file's events).
        #expect(events.map { $0["event"] as? String }.filter { $0 != "plan_counted" } == ["job_start", "resume", "progress", "success", "job_end"])
        #expect(events.allSatisfy { $0["time"] is String })
        let success = try #require(events.first { $0["event"] as? String == "success" })
        #expect(success["object"] as? String == "renamed/x.bin")
        #expect(success["size"] as? Int == 5)
        #expect(success["md5Hash"] as? String == "LBdDo5EwX782ffjk8Gn5+Q==")
        let end = try #require(events.last)
        #expect(end["job"] as? String == "cp" && end["uploaded"] as? Int == 1 && end["failed"] as? Int == 0)
        #expect(try Data(contentsOf: bucket.appendingPathComponent("renamed/x.bin")) == Data("alpha".utf8))
    }

    @Test func directoriesGoUnderThePrefixByRelativePath() throws {
        let directory = try TemporaryDirectory()
        try directory.write("out/a.png", Data("a".utf8))
        try directory.write("out/sub/b.png", Data("bb".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let run = try runProcess(hoist, ["cp", "--json", "--storage", "file://" + bucket.path,
                                         directory.url.appendingPathComponent("out").path, "img/"])
        #expect(run.status == 0, "\(run.stderr)")
        let stored = jsonLines(run.stdout).filter { $0["event"] as? String == "success" }.compactMap { $0["object"] as? String }
        #expect(stored.sorted() == ["img/out/a.png", "img/out/sub/b.png"])
        #expect(try Data(contentsOf: bucket.appendingPathComponent("img/out/sub/b.png")) == Data("bb".utf8))
    }

    @Test func toGCSWithTheEmulatorHost() async throws {
        let bucketName = try await FakeGCS.makeBucket()
        let directory = try TemporaryDirectory()
        let a = try directory.write("a.txt", Data("alpha".utf8))
        let b = try directory.write("b.txt", Data("beta".utf8))
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(try FakeGCS.port())"
        let run = try runProcess(hoist, ["cp", "-j", "2", a.path, b.path, "gs://\(bucketName)/docs/"], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try await FakeGCS.download(bucket: bucketName, object: "docs/b.txt") == Data("beta".utf8))
        #expect(try await FakeGCS.download(bucket: bucketName, object: "docs/a.txt") == Data("alpha".utf8))
    }

    /// A source that does not exist stops cp before anything is uploaded: exit 2, the path named.
    @Test func aMissingSourceStopsBeforeAnyUpload() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("a.txt", Data("alpha".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let missing = directory.url.appendingPathComponent("missing.txt").path
        let run = try runProcess(hoist, ["cp", "--storage", "file://" + bucket.path, a.path, missing, "p/"])
        #expect(run.status == 2)
        #expect(run.stderr == "hoist: \(missing): No such file or directory. Nothing was uploaded.\n")
        #expect(!FileManager.default.fileExists(atPath: bucket.appendingPathComponent("p/a.txt").path))
    }

    /// `--include`/`--exclude` (the manifest's globs, on paths below each directory), `--no-clobber`
    /// (an existing object is left as it is) and `--bandwidth` (the rate holds).
    @Test func filtersNoClobberAndBandwidth() throws {
        let directory = try TemporaryDirectory()
        try directory.write("out/a.jpg", Data("new a".utf8))
        try directory.write("out/b.jpg", Data("new b".utf8))
        try directory.write("out/raw/c.jpg", Data("new c".utf8))
        try directory.write("out/notes.txt", Data("n".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        try directory.write("bucket/img/out/a.jpg", Data("old a".utf8))
        let out = directory.url.appendingPathComponent("out").path
        let run = try runProcess(hoist, ["cp", "--storage", "file://" + bucket.path, "--include", "**/*.jpg", "--exclude", "raw/**",
                                         "--no-clobber", "-v", out, "img/"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: bucket.appendingPathComponent("img/out/a.jpg")) == Data("old a".utf8))
        #expect(try Data(contentsOf: bucket.appendingPathComponent("img/out/b.jpg")) == Data("new b".utf8))
        #expect(!FileManager.default.fileExists(atPath: bucket.appendingPathComponent("img/out/raw/c.jpg").path))
        #expect(!FileManager.default.fileExists(atPath: bucket.appendingPathComponent("img/out/notes.txt").path))
        #expect(run.stdout.contains("skipped   a.jpg (the object exists (no-clobber))"), "\(run.stdout)")
        #expect(run.stdout.contains("cp: 1 uploaded (5 B), 2 not included, 1 already in the bucket in "), "\(run.stdout)")

        // 256 KiB at 128 KiB/s: about two seconds (less the limiter's burst of a tenth of a second).
        try directory.write("big.bin", patternData(256 << 10))
        let started = Date()
        let slow = try runProcess(hoist, ["cp", "--storage", "file://" + bucket.path, "--bandwidth", "128KiB/s",
                                          directory.url.appendingPathComponent("big.bin").path, "big.bin"])
        let seconds = Date().timeIntervalSince(started)
        #expect(slow.status == 0, "\(slow.stderr)")
        #expect(seconds > 1.5 && seconds < 6, "\(seconds) s")
        #expect(try Data(contentsOf: bucket.appendingPathComponent("big.bin")) == patternData(256 << 10))

        let bad = try runProcess(hoist, ["cp", "--bandwidth", "fast", out, "x/"])
        #expect(bad.status == 2)
        #expect(bad.stderr.hasPrefix("Error: --bandwidth: bad rate 'fast'"), "\(bad.stderr)")
    }

    @Test(arguments: [["cp", "only-one"], ["cp", "--bogus", "a", "b"], ["cp", "/etc/hostname", "/etc/hosts", "no-slash"],
                      ["cp", "-j", "0", "a", "b/"], ["cp", "/etc", "no-slash"], ["cp", "a", "gs:///x"],
                      ["cp", "--storage", "gs://", "/etc/hostname", "x"], ["cp", "--storage", "gs:///p", "/etc/hostname", "x"]])
    func badUsageExitsTwo(arguments: [String]) throws {
        let started = Date()
        let run = try runProcess(hoist, arguments)
        #expect(run.status == 2)
        #expect(run.stderr.hasPrefix("Error: "))
        #expect(Date().timeIntervalSince(started) < 5)   // refused at once, never retried
    }

    /// `hoist cp . DEST` from a folder that holds its own local bucket (`.hoist/bucket`, the
    /// default) does not copy the bucket into itself.
    @Test func copyingAFolderLeavesItsOwnBucketAlone() throws {
        let directory = try TemporaryDirectory()
        try directory.write("site/a.html", Data("a".utf8))
        let site = directory.url.appendingPathComponent("site")
        let first = try runProcess("/usr/bin/env", ["sh", "-c", "cd '\(site.path)' && '\(hoist)' cp . web/"])
        #expect(first.status == 0, "\(first.stderr)")
        let again = try runProcess("/usr/bin/env", ["sh", "-c", "cd '\(site.path)' && '\(hoist)' cp . web/"])
        #expect(again.status == 0, "\(again.stderr)")
        let bucket = site.appendingPathComponent(".hoist/bucket")
        let objects = try FileManager.default.subpathsOfDirectory(atPath: bucket.path).filter { !$0.hasPrefix(".hoist") }
        #expect(objects.sorted() == ["web", "web/site", "web/site/a.html"], "\(objects)")
    }

    /// A bucket on a file system with no user extended attributes (ramfs, in a mount namespace
    /// of its own: root, where the machine lets root make one): each object's metadata goes to
    /// its sidecar, the run says so once, and the objects read back with their metadata.
    @Test func aBucketWithoutExtendedAttributesKeepsSidecarsAndSaysSoOnce() throws {
        guard geteuid() == 0, (try? runProcess("/usr/bin/unshare", ["-m", "true"]))?.status == 0 else { return }
        let folder = try TemporaryDirectory()
        let a = try folder.write("a.txt", Data("alpha".utf8))
        let b = try folder.write("b.html", Data("<p>".utf8))
        let bucket = folder.url.appendingPathComponent("bucket").path
        try FileManager.default.createDirectory(atPath: bucket, withIntermediateDirectories: true)
        let quoted = "'\(hoist)'"
        let run = try runProcess("/usr/bin/unshare", ["-m", "sh", "-c", """
            mount -t ramfs none '\(bucket)' || exit 99
            \(quoted) cp --storage 'file://\(bucket)' --metadata team=web '\(a.path)' '\(b.path)' site/ || exit $?
            cd '\(bucket)' && find . -type f | sort && cat .hoist/meta/site/b.html.json
            """], environment: ["HOME": "/root", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("./.hoist/meta/site/a.txt.json") && lines.contains("./.hoist/meta/site/b.html.json"), "\(run.stdout)")
        #expect(lines.contains("./site/a.txt") && lines.contains("./site/b.html"), "\(run.stdout)")
        let sidecar = try #require(lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(sidecar["contentType"] as? String == "text/html" && sidecar["metadata"] as? [String: String] == ["team": "web"])
        let notes = run.stderr.split(separator: "\n").filter { $0.hasPrefix("hoist: note: ") }
        #expect(notes.count == 1 && notes.first?.contains("takes no user extended attributes") == true, "\(run.stderr)")
    }
}
