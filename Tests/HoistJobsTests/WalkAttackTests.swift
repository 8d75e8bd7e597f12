import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import Testing

/// Files Hoist cannot see must fail loudly, never vanish from a run that exits 0.
@Suite struct WalkAttackTests {
    @Test func aNameThatIsNotUTF8FailsTheFileLoudly() async throws {
        let fixture = try JobFixture()
        try fixture.file("ok.txt", 10)
        let src = fixture.directory.url.appendingPathComponent("src").path
        _ = try python("open(b'\(src)/only\\xff.txt', 'wb').write(b'x' * 10)")
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let storage = try job.makeStorage()
        let runner = JobRunner(job: job, storage: storage, observers: [])
        let summary = await runner.run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 1)
        #expect(summary.failed == 1)
        let failure = try #require(summary.failures.first)
        #expect(failure.file == "\(src)/only\u{FFFD}.txt")
        #expect(failure.message.contains("the name is not valid UTF-8"), "\(failure.message)")

        // The command says so and exits 1.
        let run = try runProcess(hoist,
                                 ["run", "--force", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("not valid UTF-8"), "\(run.stderr)")
    }

    @Test func anUnreadableFolderInsideARootIsAFailure() throws {
        let fixture = try JobFixture()
        try fixture.file("ok.txt", 10)
        try fixture.file("locked/secret.txt", 10)
        let folder = fixture.directory.url
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        for path in [folder.path, folder.appendingPathComponent("src").path] {
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: path)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder.appendingPathComponent("src/ok.txt").path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder.appendingPathComponent("job.yaml").path)
        let locked = folder.appendingPathComponent("src/locked")
        try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: locked.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: locked.path) }
        // root reads every folder: run as nobody, as a cron job of an unprivileged user would.
        let arguments = ["run", folder.appendingPathComponent("job.yaml").path]
        let run = getuid() == 0
            ? try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", hoist] + arguments,
                             environment: ["HOME": folder.path, "PATH": "/usr/bin:/bin"])
            : try runProcess(hoist, arguments)
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("\(locked.path): cannot list the folder: Permission denied"), "\(run.stderr)")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("bucket/ok.txt").path))
    }

    @Test func aFileNameWithANewlineFailsThatFileOnly() async throws {
        let fixture = try JobFixture()
        try fixture.file("ok.txt", 10)
        try fixture.file("evil\nX-Injected: yes.txt", 10)
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files:
              - root: src
                metadata: { contentDisposition: 'attachment; filename="{name}"' }
            """)
        let totals = try Planner(job: job).check()
        #expect(totals.files == 1)
        let runner = JobRunner(job: job, storage: try job.makeStorage(), observers: [])
        let summary = await runner.run(totals: totals)
        #expect(summary.uploaded == 1 && summary.failed == 1)
        let failure = try #require(summary.failures.first)
        #expect(failure.file.hasSuffix("evil\nX-Injected: yes.txt"))
        #expect(failure.message.contains("contains the control character U+000A: object names cannot"), "\(failure.message)")
        let stored = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.url.appendingPathComponent("bucket").path)
        #expect(stored.filter { !$0.hasPrefix(".") } == ["ok.txt"])
    }
}

/// Globs from a hostile manifest: bounded work whatever the pattern.
@Suite struct GlobAttackTests {
    @Test func backtrackingGlobMatchesInLinearTime() throws {
        let glob = try Glob(parsing: String(repeating: "*a", count: 30) + "*b")
        let started = Date()
        #expect(!glob.matches(String(repeating: "a", count: 255)))
        #expect(try Glob(parsing: "**/" + String(repeating: "*a", count: 10) + "*b").matches(String(repeating: "a/", count: 100) + "aaaaaaaaaaab"))
        #expect(Date().timeIntervalSince(started) < 1)
    }

    @Test func braceBombsAreRefused() throws {
        let started = Date()
        #expect { try Glob(parsing: String(repeating: "{a,b}", count: 30)) } throws: {
            "\($0)".contains("its braces make more than 256 patterns")
        }
        #expect { try Glob(parsing: String(repeating: "{", count: 5000) + String(repeating: "}", count: 5000)) } throws: {
            "\($0)".contains("at most 1024 bytes and 32 braces")
        }
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(try Glob(parsing: "*.{jpg,png}").matches("a/b.png"))
    }
}

/// A local bucket keeps its objects inside it.
@Suite struct LocalBucketAttackTests {
    @Test func aSymlinkInsideALocalBucketDoesNotTakeObjectsOutside() async throws {
        let outside = try TemporaryDirectory()
        let fixture = try JobFixture()
        try fixture.file("evil/cron.txt", 10)
        try fixture.file("fine.txt", 10)
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        try FileManager.default.createDirectory(at: bucket, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bucket.appendingPathComponent("evil").path, withDestinationPath: outside.url.path)
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let runner = JobRunner(job: job, storage: try job.makeStorage(), observers: [])
        let summary = await runner.run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 1 && summary.failed == 1)
        #expect(summary.failures.first?.message.contains("is a symbolic link, and objects stay inside the local bucket") == true,
                "\(summary.failures)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.url.path).isEmpty)
        #expect(FileManager.default.fileExists(atPath: bucket.appendingPathComponent("fine.txt").path))
    }
}

@Suite struct FollowedLinkTests {
    @Test func followSymlinksUploadsALinkToAFile() async throws {
        let fixture = try JobFixture()
        try fixture.file("real/one.txt", 10)
        let src = fixture.directory.url.appendingPathComponent("src")
        try FileManager.default.createSymbolicLink(atPath: src.appendingPathComponent("link.txt").path, withDestinationPath: "real/one.txt")
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, followSymlinks: true }]\n")
        let runner = JobRunner(job: job, storage: try job.makeStorage(), observers: [])
        let summary = await runner.run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 2, "\(summary.failures)")
        let stored = try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/link.txt"))
        #expect(stored == patternData(10))
    }
}

/// A file's times come from whoever wrote the file.
@Suite struct FileTimeAttackTests {
    @Test func aFileDatedYear146BillionDoesNotCrashTemplatesOrHooks() async throws {
        // ext4 clamps times to 1901-2446; tmpfs keeps any 64-bit time.
        guard FileManager.default.isWritableFile(atPath: "/dev/shm") else { return }
        let root = URL(fileURLWithPath: "/dev/shm/hoist-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        for (name, seconds) in [("future.txt", "2**62"), ("max.txt", "2**63 - 1"), ("past.txt", "-2**62")] {
            _ = try python("import os; open('\(root.path)/\(name)', 'wb').write(b'x'); os.utime('\(root.path)/\(name)', (0, \(seconds)))")
        }
        let fixture = try JobFixture()
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: \(root.path), destination: '{mtime:%Y}/{name}' }]
            lua: { output: out }
            hooks:
              - inline: |
                  function before_upload(f) hoist.append_file("seen.txt", f.relpath .. " " .. f.mtime .. "\\n") end
            """)
        let bus = try HookBus(job: job, storage: try job.makeStorage()) { _ in }
        let runner = JobRunner(job: job, storage: try job.makeStorage(), observers: [], hooks: bus)
        let result = await runner.run(totals: try Planner(job: job).check())
        #expect(result.uploaded == 3 && result.failed == 0, "\(result.failures)")
        let stored = try FileManager.default.subpathsOfDirectory(atPath: fixture.directory.url.appendingPathComponent("bucket").path)
            .filter { !$0.hasPrefix(".") && $0.hasSuffix(".txt") }.sorted()
        #expect(stored == ["1/past.txt", "9999/future.txt", "9999/max.txt"])
        let seen = try String(contentsOf: fixture.directory.url.appendingPathComponent("out/seen.txt"), encoding: .utf8)
        #expect(seen.contains("max.txt 253402300799"), "\(seen)")
    }
}

/// `hoist cp` sees what `hoist run` sees, and fails such files as a run does: the file is
/// named, the others are uploaded, the exit status is 1.
@Suite struct CopyWalkAttackTests {
    @Test func cpFailsAFileWithANameThatIsNotUTF8() throws {
        let directory = try TemporaryDirectory()
        try directory.write("src/ok.txt", Data("hi".utf8))
        _ = try python("open(b'\(directory.path)/src/only\\xff.txt', 'wb').write(b'x')")
        let run = try runProcess(hoist,
                                 ["cp", "--storage", "file://\(directory.path)/bucket", "\(directory.path)/src", "/"])
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("only\u{FFFD}.txt: the name is not valid UTF-8"), "\(run.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(directory.path)/bucket/src/ok.txt")) == Data("hi".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(directory.path)/bucket/src") == ["ok.txt"])
    }

    @Test func cpFailsAnObjectNameWithANewline() throws {
        let directory = try TemporaryDirectory()
        try directory.write("src/line\nbreak.txt", Data("hi".utf8))
        let run = try runProcess(hoist,
                                 ["cp", "--storage", "file://\(directory.path)/bucket", "\(directory.path)/src", "/"])
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("contains the control character U+000A"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(directory.path)/bucket/src"))
    }
}

/// Someone who can write in a root must not make a root-run job upload another file.
@Suite struct SymlinkSwapAttackTests {
    /// Records the first progress of one file and runs `action` once.
    final class OnFirstProgress: JobObserver, @unchecked Sendable {
        let name: String
        let action: @Sendable () -> Void
        private var done = false
        private let lock = NSLock()
        init(_ name: String, _ action: @escaping @Sendable () -> Void) {
            self.name = name
            self.action = action
        }
        func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
        func fileSkipped(_ item: PlanItem, reason: String) {}
        func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
            guard item.file.relativePath == name, snapshot.status == .progress else { return }
            let run = lock.withLock { () -> Bool in defer { done = true }; return !done }
            if run { action() }
        }
        func jobFinished(_ summary: JobSummary) {}
    }

    /// Two large files and two slots, one for large files: big2 is found, then waits while big1
    /// goes up (at 12 MB/s), so a test can change big2 between the walk and its upload.
    static func bigTwoWaitsForBigOne() throws -> (JobFixture, Job, big2: String) {
        let fixture = try JobFixture()
        try fixture.file("big1.bin", 9 << 20)
        try fixture.file("big2.bin", 9 << 20)
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 2, bandwidth: 12MB/s }\n")
        return (fixture, job, fixture.directory.url.appendingPathComponent("src/big2.bin").path)
    }

    @Test func aFileSwappedForASymlinkAfterTheWalkIsNotUploaded() async throws {
        let outside = try TemporaryDirectory()
        let secret = try outside.write("shadow", Data("root:$6$secret".utf8))
        let (fixture, job, big2) = try Self.bigTwoWaitsForBigOne()
        let swap = OnFirstProgress("big1.bin") {
            try? FileManager.default.removeItem(atPath: big2)
            try? FileManager.default.createSymbolicLink(atPath: big2, withDestinationPath: secret.path)
        }
        let runner = JobRunner(job: job, storage: try job.makeStorage(), observers: [swap])
        let summary = await runner.run()
        #expect(summary.uploaded == 1 && summary.failed == 1, "\(summary.failures)")
        #expect(summary.failures.first?.message.contains("became a symbolic link") == true, "\(summary.failures)")
        let stored = fixture.directory.url.appendingPathComponent("bucket/big2.bin")
        #expect((try? Data(contentsOf: stored)) != Data("root:$6$secret".utf8))
    }

    @Test func aFileDeletedAfterTheWalkFailsSayingSo() async throws {
        let (fixture, job, big2) = try Self.bigTwoWaitsForBigOne()
        let delete = OnFirstProgress("big1.bin") { try? FileManager.default.removeItem(atPath: big2) }
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [delete]).run()
        #expect(summary.uploaded == 1 && summary.failed == 1, "\(summary.failures)")
        #expect(summary.failures.first?.message == "\(big2) was deleted after the walk found it: not uploaded", "\(summary.failures)")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/big2.bin").path))
    }

    /// The journal records the file the upload read, not the one the walk saw: else a file
    /// changed after the walk, then given back its walked size and time (`touch -r`, rsync -t),
    /// would be taken as stored while its object holds the other bytes.
    @Test func aFileChangedAfterTheWalkIsJournaledAsItWasRead() async throws {
        let (fixture, job, big2) = try Self.bigTwoWaitsForBigOne()
        let newer = Data(repeating: 7, count: (9 << 20) + 5)
        let change = OnFirstProgress("big1.bin") {
            _ = FileManager.default.createFile(atPath: big2, contents: newer)
            var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 250_000_000)]
            utimensat(AT_FDCWD, big2, &times, 0)
        }
        let journal = try SQLiteJournal(path: fixture.directory.url.appendingPathComponent("journal.sqlite").path)
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [change], journal: journal).run()
        #expect(summary.uploaded == 2, "\(summary.failures)")
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/big2.bin")) == newer)
        let row = try #require(try journal.record(source: big2, destination: "big2.bin"))
        #expect(row.state == .done)
        #expect(row.size == Int64(newer.count))
        #expect(row.mtime == 1_600_000_000.25)
    }
}
