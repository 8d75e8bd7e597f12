import Foundation
import HoistTestSupport
import Testing

/// What `hoist run` and `hoist cp` show: the progress line in a real pseudo-terminal, the flags
/// rclone and gsutil users type, the version.
@Suite struct TerminalTests {
    @Test func versionNamesTheLibraries() throws {
        let run = try runProcess(hoist, ["--version"])
        #expect(run.status == 0)
        // 0.1.0-dev from a plain build; scripts/build-release links in the repository's version.
        #expect(run.stdout.wholeMatch(of: /0\.1\.0-dev \(libcurl \d+\.\d+\.\d+, Lua 5\.4\.\d+, libyaml \d+\.\d+\.\d+\)\n/) != nil, "\(run.stdout)")
    }

    @Test func runTakesVerboseQuietAndDryRun() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        try fixture.file("skip.tmp", 5)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, exclude: '*.tmp' }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let bucket = fixture.directory.url.appendingPathComponent("bucket")

        let dry = try runProcess(hoist, ["run", "--dry-run", manifest])
        #expect(dry.status == 0)
        #expect(dry.stdout == "upload  a.txt -> a.txt (10 B)\nskip    skip.tmp (excluded by *.tmp)\ntest: 1 to upload (10 B), 1 to skip\n")
        #expect(!FileManager.default.fileExists(atPath: bucket.path))

        let verbose = try runProcess(hoist, ["run", "-v", manifest])
        #expect(verbose.status == 0, "\(verbose.stderr)")
        let lines = verbose.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(verbose.stdout)")
        #expect(Set(lines.prefix(2)) == ["uploaded  a.txt -> a.txt (10 B)", "skipped   skip.tmp (excluded by *.tmp)"])
        #expect(lines.last?.hasPrefix("test: 1 uploaded (10 B)") == true)

        try fixture.file("b.txt", 20)
        let quiet = try runProcess(hoist, ["run", "-q", manifest])
        #expect(quiet.status == 0)
        #expect(quiet.stdout == "" && quiet.stderr == "")
        #expect(FileManager.default.fileExists(atPath: bucket.appendingPathComponent("b.txt").path))

        let both = try runProcess(hoist, ["run", "-q", "-v", manifest])
        #expect(both.status == 2)
        #expect(both.stderr.contains("--quiet and --verbose say opposite things"))
    }

    @Test func cpTakesVerboseQuietAndDryRun() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("photo.jpg", Data(repeating: 1, count: 100)).path
        let bucket = "file://" + directory.url.appendingPathComponent("bucket").path
        let dry = try runProcess(hoist, ["cp", "--dry-run", "--storage", bucket, file, "img/"])
        #expect(dry.status == 0)
        #expect(dry.stdout == "upload  photo.jpg -> img/photo.jpg (100 B)\ncp: 1 to upload (100 B), 0 to skip; nothing was uploaded (--dry-run)\n")
        #expect(!FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("bucket/img/photo.jpg").path))
        let verbose = try runProcess(hoist, ["cp", "-v", "--storage", bucket, file, "img/"])
        #expect(verbose.status == 0, "\(verbose.stderr)")
        #expect(verbose.stdout.hasPrefix("uploaded  photo.jpg -> img/photo.jpg (100 B)\ncp: 1 uploaded (100 B) in "), "\(verbose.stdout)")
        let quiet = try runProcess(hoist, ["cp", "-q", "--storage", bucket, file, "img/again.jpg"])
        #expect(quiet.status == 0 && quiet.stdout == "" && quiet.stderr == "")
    }

    /// In a 60-column pseudo-terminal: the status line never wraps (nor after the terminal is
    /// narrowed to 50), hook log lines get lines of their own, SIGUSR1 shows PAUSED, and no ETA
    /// is shown without a rate.
    @Test func theProgressLineFitsTheTerminalAndLogLinesGoAboveIt() async throws {
        try await ExclusiveTests.shared.run { try progressInAPty() }
    }

    func progressInAPty() throws {
        let fixture = try JobFixture()
        for index in 0..<8 { try fixture.file("a-rather-long-folder-name/file-with-a-long-name-\(index).bin", 300_000) }
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            upload: { bandwidth: 800KB/s, concurrency: 2 }
            hooks:
              - inline: |
                  function on_success(s) log.info("stored " .. s.reference.name) end

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let script = packageRoot.appendingPathComponent("Tests/servers/ptyrun.py").path
        let run = try runProcess("/usr/bin/env", ["python3", script, "60", "1.0", "2.0", "--", hoist, "run", manifest])
        #expect(run.stdout.hasSuffix("EXIT 0\n"), "\(run.stdout.suffix(400)) \(run.stderr)")
        let segments = run.stdout.replacingOccurrences(of: "\u{1B}[K", with: "")
            .split(whereSeparator: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" }).map(String.init)
        let status = segments.filter { $0.contains(" files") && !$0.hasPrefix("test:") && !$0.hasPrefix("hoist:") }
        #expect(status.count > 5, "\(segments)")
        #expect(status.allSatisfy { $0.count <= 59 }, "\(status.filter { $0.count > 59 })")
        let lastPaused = try #require(status.lastIndex { $0.hasPrefix("PAUSED") }, "\(status)")
        #expect(status[(lastPaused + 2)...].allSatisfy { $0.count <= 49 }, "\(status[(lastPaused + 2)...])")
        #expect(status.filter { $0.contains("ETA") }.allSatisfy { $0.contains("/s") })
        #expect(status.filter { $0.hasPrefix("PAUSED") }.allSatisfy { !$0.contains("ETA") })
        // Every hook line starts a line of its own, whole.
        let hookLines = segments.filter { $0.contains("stored ") }
        #expect(hookLines.count == 8, "\(hookLines)")
        #expect(hookLines.allSatisfy { $0.hasPrefix("hoist: [") && $0.contains("] info: stored file-with-a-long-name-") }, "\(hookLines)")
    }
}

/// Shell completion: `hoist run pho<TAB>` offers the manifests (and folders), not other files.
@Suite struct CompletionTests {
    @Test func bashCompletesManifestsForJobArguments() throws {
        let directory = try TemporaryDirectory()
        _ = try directory.write("photos.yaml", Data())
        _ = try directory.write("photo.txt", Data())
        _ = try directory.write("photos.d/x", Data())
        let script = try runProcess(hoist, ["--generate-completion-script", "bash"])
        #expect(script.status == 0)
        let file = try directory.write("hoist.bash", Data(script.stdout.utf8)).path
        for command in ["run", "validate", "plan", "cron", "status"] {
            let run = try runProcess("/bin/bash", ["-c", """
                cd "$1" && source "$2"
                COMP_WORDS=(hoist \(command) pho); COMP_CWORD=2; COMP_LINE="hoist \(command) pho"; COMP_POINT=${#COMP_LINE}
                _hoist hoist pho \(command); printf '%s\\n' "${COMPREPLY[@]}" | sort
                """, "bash", directory.path, file])
            #expect(run.stdout == "photos.d\nphotos.yaml\n", "\(command): \(run.stdout) \(run.stderr)")
        }
    }
}
