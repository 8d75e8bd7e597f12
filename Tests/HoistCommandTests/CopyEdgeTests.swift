import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// What a careful user tried on `hoist cp` (and `run`) after it moved onto the job engine: each
/// test is one of their findings, reproduced.
@Suite struct CopyEdgeTests {
    func storage(_ directory: TemporaryDirectory) -> String { "file://" + directory.url.appendingPathComponent("bucket").path }

    /// A file that fails before its upload starts (a name that is not UTF-8) is named with -v
    /// and has a `failure` event with --json, not only a count.
    @Test func aFileThatFailsBeforeItsUploadIsNamed() throws {
        let directory = try TemporaryDirectory()
        try directory.write("src/ok.txt", Data("ok".utf8))
        let run = try runProcess(testPython, testPythonArguments + ["-c", "open(b'\(directory.path)/src/bad\\xff.txt', 'wb').write(b'x')"])
        #expect(run.status == 0)
        let src = directory.url.appendingPathComponent("src").path
        let verbose = try runProcess(hoist, ["cp", "-v", "--storage", storage(directory), src, "v/"])
        #expect(verbose.status == 1)
        #expect(verbose.stderr.contains("bad\u{FFFD}.txt: the name is not valid UTF-8"), "\(verbose.stderr)")
        #expect(!verbose.stderr.contains("invalidArgument"), "\(verbose.stderr)")
        let json = try runProcess(hoist, ["cp", "--json", "--storage", storage(directory), src, "j/"])
        #expect(json.status == 1)
        #expect(try validateEvents(json.stdout).filter { $0 == "failure" }.count == 1)
        #expect(json.stdout.contains("bad\u{FFFD}.txt"))
    }

    /// `hoist cp a.txt s3://bench/h/` (before s3:// was served) stored the object `s3://bench/h/a.txt` in the default
    /// bucket and said ok: a destination that is a URL of a scheme Hoist does not store to is an
    /// error, before anything is uploaded.
    @Test(arguments: ["\(unservedScheme)://bench/h/", "\(unservedScheme)://x/y", "https://example.com/a"])
    func aDestinationURLOfAnotherSchemeIsAnError(destination: String) throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("a.txt", Data("a".utf8))
        let run = try runProcess(hoist, ["cp", "--storage", storage(directory), file.path, destination])
        #expect(run.status == 2, "\(run.stdout)\(run.stderr)")
        let scheme = destination.prefix { $0 != ":" }
        #expect(run.stderr.contains("'\(destination)': no storage backend serves \(scheme):// URLs; Hoist stores to ") && run.stderr.contains(BackendRegistry.copyForms), "\(run.stderr)")
        let stored = (try? FileManager.default.subpathsOfDirectory(atPath: directory.url.appendingPathComponent("bucket").path)) ?? []
        #expect(stored.filter { !$0.hasPrefix(".hoist") }.isEmpty, "\(stored)")
    }

    /// run, plan and cp share their output flags (`OutputOptions`): with `--dry-run`, `-v` adds
    /// each object's metadata to its line and `-q` prints nothing, as `hoist plan -v`/`-q` do.
    @Test func dryRunHonoursTheSharedOutputFlags() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("a.txt", Data("a".utf8))
        let arguments = ["cp", "--dry-run", "--cache-control", "no-cache", "--metadata", "k=v", "--storage", storage(directory), file.path, "d/"]
        let verbose = try runProcess(hoist, arguments + ["-v"])
        #expect(verbose.status == 0)
        #expect(verbose.stdout == "upload  a.txt -> d/a.txt (1 B) [cacheControl=no-cache, customMetadata.k=v]\n"
            + "cp: 1 to upload (1 B), 0 to skip; nothing was uploaded (--dry-run)\n", "\(verbose.stdout)")
        let quiet = try runProcess(hoist, arguments + ["-q"])
        #expect(quiet.status == 0 && quiet.stdout.isEmpty, "\(quiet.stdout)")
        let both = try runProcess(hoist, arguments + ["-q", "-v"])
        #expect(both.status == 2 && both.stderr.contains("--quiet and --verbose say opposite things"), "\(both.stderr)")
    }

    /// The HTTP engine starts only when something speaks HTTP: a copy to a local bucket never
    /// starts its thread (`hoist.curl`), though the GCS family is registered beside it; a copy
    /// to fake-gcs-server does (the same sampling sees it there, so it would see it here).
    @Test func theHTTPEngineStartsOnlyForHTTP() async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("slow.bin", Data(repeating: 7, count: 192 << 10))
        func threadNames(_ arguments: [String], environment: [String: String]? = nil) throws -> Set<String> {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: hoist)
            process.arguments = ["cp", "-q", "--bandwidth", "96KiB/s"] + arguments
            if let environment { process.environment = environment }
            try process.run()
            var names = Set<String>()
            while process.isRunning {
                let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/task")) ?? []
                for task in tasks {
                    let comm = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/task/\(task)/comm", encoding: .utf8)
                    if let comm { names.insert(comm.trimmingCharacters(in: .whitespacesAndNewlines)) }
                }
                usleep(20_000)
            }
            #expect(process.terminationStatus == 0)
            return names
        }
        let local = try threadNames(["--storage", storage(directory), file.path, "x/"])
        #expect(!local.isEmpty && !local.contains("hoist.curl"), "\(local)")
        let bucket = try await FakeGCS.makeBucket()
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(try FakeGCS.port())"
        let remote = try threadNames([file.path, "gs://\(bucket)/x/"], environment: environment)
        #expect(remote.contains("hoist.curl"), "\(remote)")
    }

    /// A bad value cp checks once it runs printed the root command's usage (`Usage: hoist
    /// <subcommand>`): it prints cp's.
    @Test(arguments: [["--bandwidth", "fast"], ["--storage", "nope://b"]])
    func aBadValueFoundWhileCpRunsShowsCpsUsage(option: [String]) throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("a.txt", Data("a".utf8))
        let run = try runProcess(hoist, ["cp"] + option + [file.path, "x/"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("Usage: hoist cp [<options>]") && run.stderr.contains("See 'hoist cp --help'"), "\(run.stderr)")
        #expect(!run.stderr.contains("<subcommand>"), "\(run.stderr)")
    }

    /// A file name cannot write to the terminal: its control characters are shown escaped.
    @Test func aFileNameCannotWriteToTheTerminal() throws {
        let directory = try TemporaryDirectory()
        try directory.write("src/x\u{1B}]0;pwned\u{07}.txt", Data("e".utf8))
        let run = try runProcess(hoist, ["cp", "--storage", storage(directory), directory.url.appendingPathComponent("src").path, "e/"])
        #expect(run.status == 1)
        #expect(!run.stderr.contains("\u{1B}") && !run.stderr.contains("\u{07}"), "\(run.stderr.debugDescription)")
        #expect(run.stderr.contains("x\\u{1B}]0;pwned\\u{7}.txt"), "\(run.stderr)")
    }

    /// --include and --exclude choose among a directory's files; a file named is uploaded.
    @Test func filtersLeaveNamedFilesAlone() throws {
        let directory = try TemporaryDirectory()
        let one = try directory.write("one.txt", Data("1".utf8))
        let run = try runProcess(hoist, ["cp", "--include", "*.jpg", "--exclude", "*.txt", "--storage", storage(directory), one.path, "f/"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: directory.url.appendingPathComponent("bucket/f/one.txt")) == Data("1".utf8))
    }

    /// Two named files with one object name stop cp before any upload; one file named twice goes up once.
    @Test func namedFilesWithOneObjectName() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("c1/x.txt", Data("1".utf8))
        let b = try directory.write("c2/x.txt", Data("2".utf8))
        let clash = try runProcess(hoist, ["cp", "--storage", storage(directory), a.path, b.path, "coll/"])
        #expect(clash.status == 2)
        #expect(clash.stderr.contains("would both be stored as 'coll/x.txt'"), "\(clash.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("bucket/coll/x.txt").path))
        let twice = try runProcess(hoist, ["cp", "--storage", storage(directory), a.path, a.path, "twice/"])
        #expect(twice.status == 0 && twice.stdout.hasPrefix("cp: 1 uploaded (1 B)"), "\(twice.stdout)\(twice.stderr)")
    }

    /// A symbolic link named on the command line is read through its target, under its own name.
    @Test func aNamedLinkIsReadThroughItsTarget() throws {
        let directory = try TemporaryDirectory()
        let target = try directory.write("real/data.bin", Data("target bytes".utf8))
        let link = directory.url.appendingPathComponent("link.bin").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target.path)
        let run = try runProcess(hoist, ["cp", "--storage", storage(directory), link, "l/"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: directory.url.appendingPathComponent("bucket/l/link.bin")) == Data("target bytes".utf8))
    }

    /// Links a walk does not upload are said, not skipped in silence (rclone's "Can't follow
    /// symlink" notice): links not followed, counted once per root with the first named; with
    /// `followSymlinks`, a link whose target is gone and a link back up (a loop). Warnings, on
    /// standard error and as `warning` events; the run still succeeds.
    @Test func linksThatAreNotUploadedAreSaid() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        let src = fixture.directory.url.appendingPathComponent("src").path
        try FileManager.default.createDirectory(atPath: src + "/sub", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: src + "/sub/link.txt", withDestinationPath: "../a.txt")
        try FileManager.default.createSymbolicLink(atPath: src + "/sub/up", withDestinationPath: "..")
        try FileManager.default.createSymbolicLink(atPath: src + "/gone", withDestinationPath: "/nonexistent-\(UUID())")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path

        let copy = try runProcess(hoist, ["cp", "--storage", storage(fixture.directory), src, "c/"])
        #expect(copy.status == 0, "\(copy.stderr)")
        #expect(copy.stderr.contains("hoist: warning: \(src): 3 symbolic links not followed (the first: gone)"), "\(copy.stderr)")
        let quiet = try runProcess(hoist, ["cp", "-q", "--storage", storage(fixture.directory), src, "q/"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")

        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, followSymlinks: true }]\n")
        let run = try runProcess(hoist, ["run", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("hoist: warning: \(src)/gone: a symbolic link whose target does not exist, skipped"), "\(run.stderr)")
        #expect(run.stderr.contains("hoist: warning: \(src)/sub/up: a link back to a folder above it (loop), skipped"), "\(run.stderr)")
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/sub/link.txt")).count == 10)
        let json = try runProcess(hoist, ["run", "--json", "--force", manifest])
        let events = try validateEvents(json.stdout)
        #expect(events.filter { $0 == "warning" }.count == 2, "\(json.stdout)")
        let warned = json.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }.filter { $0["event"] as? String == "warning" }.compactMap { $0["file"] as? String }
        #expect(warned == [src + "/gone", src + "/sub/up"])
    }

    /// The local bucket itself (or a folder in it) is not a source: its objects and Hoist's own
    /// files would be uploaded into it.
    @Test func theBucketItselfIsNotASource() throws {
        let directory = try TemporaryDirectory()
        try directory.write("bucket/old.txt", Data("o".utf8))
        let run = try runProcess(hoist, ["cp", "--storage", storage(directory), directory.url.appendingPathComponent("bucket").path, "again/"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("is inside the job's local bucket"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("bucket/again").path))
    }

    /// With --json, a run that cannot start still prints a `job_end` saying why.
    @Test func aRunThatCannotStartSaysWhyInJSON() throws {
        let fixture = try JobFixture()
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: missing }]\n")
        let run = try runProcess(hoist, ["run", "--json", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(run.status == 2)
        #expect(try validateEvents(run.stdout) == ["job_end"])
        #expect(run.stdout.contains("\"fatal\":"), "\(run.stdout)")
    }

    /// A root that is one file the job's user cannot read stops the job before any upload, as
    /// an unreadable folder does.
    @Test func anUnreadableFileRootStopsTheJob() throws {
        let fixture = try JobFixture()
        try fixture.file("secret.txt")
        try fixture.file("ok.txt")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: fixture.directory.url.appendingPathComponent("src/secret.txt").path)
        for path in [fixture.directory.path, fixture.directory.url.appendingPathComponent("src").path] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src/secret.txt }, { root: src/ok.txt }]\n")
        let run = try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", hoist, "validate",
                                                      fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(run.status == 2)
        #expect(run.stderr.contains("secret.txt cannot be read"), "\(run.stderr)")
    }

    /// A source that is neither a file nor a folder (a FIFO) stops cp with a plain `hoist:` line:
    /// cp's job has no manifest, so no `hoist cp:1:1:` and no caret under an empty line.
    @Test func aSourceThatIsNoFileIsRefusedWithoutAManifestLocation() throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.url.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o644) == 0)
        let run = try runProcess(hoist, ["cp", "--storage", storage(directory), fifo, "x/"])
        #expect(run.status == 2)
        #expect(run.stderr == "hoist: root \(fifo) is not a folder or a file\n", "\(run.stderr)")
    }
}
