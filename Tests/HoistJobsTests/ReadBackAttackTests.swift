import Foundation
import HoistHTTP
@testable import HoistJobs
import HoistTestSupport
import HoistYAML
import Testing

/// What Hoist writes beside a job (lock, journal, metrics) and what it prints from what it
/// reads back (journal rows, manifest lines, paths): each test is one attack of the red team's
/// third pass, checked by what a user would see.
@Suite struct ReadBackAttackTests {
    /// A job in a fresh folder whose default journal lives under `HOME`.
    func job(_ fixture: JobFixture, extra: String = "") throws -> (manifest: String, environment: [String: String]) {
        try fixture.file("a.txt")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try "version: 1\nname: readback\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n\(extra)".write(
            toFile: manifest, atomically: true, encoding: .utf8)
        return (manifest, ["HOME": fixture.directory.url.appendingPathComponent("home").path, "PATH": "/usr/bin:/bin"])
    }

    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// The journal holds resumable session URLs (credentials): it, its lock and the state folder
    /// made for it are the job's user's alone.
    @Test func theJournalItsLockAndItsFolderArePrivate() throws {
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture)
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        let state = fixture.directory.url.appendingPathComponent("home/.local/state/hoist").path
        #expect(try mode(state) == 0o700)
        #expect(try mode(state + "/readback.sqlite") == 0o600)
        #expect(try mode(state + "/readback.sqlite.lock") == 0o600)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: state + "/readback.sqlite" + suffix) {
            #expect(try mode(state + "/readback.sqlite" + suffix) & 0o077 == 0, "\(suffix)")
        }
    }

    /// `NAME.sqlite.lock -> /victim`: the victim was truncated and the pid written into it.
    @Test func aSymlinkedLockFileIsNotFollowed() throws {
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture, extra: "journal: journal.sqlite\n")
        let victim = try fixture.directory.write("victim.txt", Data("precious\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: fixture.directory.url.appendingPathComponent("journal.sqlite.lock").path,
                                                   withDestinationPath: victim.path)
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains("journal.sqlite.lock is a symbolic link"), "\(run.stderr)")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
    }

    /// A journal (or its WAL) that is a link would have SQLite write wherever it leads.
    @Test(arguments: ["journal.sqlite", "journal.sqlite-wal"])
    func aSymlinkedJournalIsRefused(name: String) throws {
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture, extra: "journal: journal.sqlite\n")
        let victim = try fixture.directory.write("victim.txt", Data("precious\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: fixture.directory.url.appendingPathComponent(name).path, withDestinationPath: victim.path)
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains("\(name) is a symbolic link"), "\(run.stderr)")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
    }

    /// `hoist.prom.tmp.PID` made beforehand as a link to a victim: the metrics went into it.
    @Test func aPreCreatedMetricsTemporaryLinkIsNotFollowed() throws {
        let folder = try TemporaryDirectory()
        let victim = try folder.write("victim.txt", Data("precious\n".utf8))
        let metrics = folder.url.appendingPathComponent("hoist.prom").path
        try FileManager.default.createSymbolicLink(atPath: metrics + ".tmp.\(getpid())", withDestinationPath: victim.path)
        var summary = JobSummary(job: "readback")
        summary.uploaded = 3
        try Metrics.write(summary, to: metrics)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains(#"hoist_last_run_files{job="readback",outcome="uploaded"} 3"#))
        #expect(try FileManager.default.attributesOfItem(atPath: metrics)[.type] as? FileAttributeType == .typeRegular)
    }

    /// A manifest path holding a newline printed a crontab entry of the attacker's.
    @Test func aManifestPathWithANewlineAddsNoCrontabEntry() throws {
        let fixture = try JobFixture()
        let folder = fixture.directory.url.appendingPathComponent("x\n* * * * * touch PWNED\n").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let manifest = folder + "/job.yaml"
        try "version: 1\nname: cronjob\nstorage: { url: 'file:bucket' }\nfiles: [{ root: ., optional: true }]\nschedule: '0 3 * * *'\n"
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let run = try runProcess(hoist, ["cron", manifest])
        #expect(run.status == 2)
        #expect(!run.stdout.contains("touch PWNED"), "\(run.stdout)")
        #expect(run.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("#") || $0.hasPrefix("0 3 * * *") }, "\(run.stdout)")
        #expect(run.stderr.contains("cannot go in a crontab line"), "\(run.stderr)")
    }

    /// A failed row's message (a server's words, or a journal someone edited) holding a clear
    /// screen, a title change and a forged line: `hoist status` shows them escaped.
    @Test func statusPrintsJournalTextEscaped() throws {
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture, extra: "journal: journal.sqlite\n")
        #expect(try runProcess(hoist, ["run", manifest], environment: environment).status == 0)
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        _ = try python("""
            import sqlite3
            c = sqlite3.connect('\(journal)')
            c.execute("UPDATE file SET state = 'failed', error = ?, destination = ?",
                      ('\\x1b[2J\\x1b]0;owned\\x07\\nfiles: 0 uploaded, 0 pending, 0 failed', 'evil\\u202etxt.exe'))
            c.commit()
            """)
        let run = try runProcess(hoist, ["status", manifest], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stdout.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x202E }, "\(run.stdout)")
        #expect(run.stdout.contains(#"\u{1B}[2J\u{1B}]0;owned\u{7}\u{A}files: 0 uploaded"#), "\(run.stdout)")
        #expect(run.stdout.contains(#"evil\u{202E}txt.exe"#), "\(run.stdout)")
        #expect(run.stdout.components(separatedBy: "\n").filter { $0.hasPrefix("files:") }.count == 1)
    }

    /// `hoist validate` quoted a manifest line holding a database password.
    @Test func validateHidesAPasswordInTheLinesItQuotes() throws {
        let fixture = try JobFixture()
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try """
            version: 1
            name: secret
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            journal: { url: "postgres://hoist:S3cretPW@db.example/hoist" }

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let run = try runProcess(hoist, ["validate", manifest])
        #expect(run.status == 2)
        #expect(!run.stderr.contains("S3cretPW"), "\(run.stderr)")
        #expect(run.stderr.contains("postgres://hoist:***@db.example/hoist"), "\(run.stderr)")
    }

    /// Passwords as URL parsers read them: up to the last '@' of the authority, spaces included.
    @Test func passwordsWithAtSignsAndSpacesAreHidden() {
        #expect(redactingURLPasswords("postgres://hoist:p@ssA1@db/x").text == "postgres://hoist:***@db/x")
        #expect(redactingURLPasswords("url: postgres://hoist:pa ssA4@db/x").text == "url: postgres://hoist:***@db/x")
        #expect(redactingURLPasswords("a http://u:one@h/x b https://v:two@g").text == "a http://u:***@h/x b https://v:***@g")
        #expect(redactingURLPasswords("mail me: a@b.c, see http://h/x").text == "mail me: a@b.c, see http://h/x")
        #expect(redactingURLPasswords("postgres://hoist@db/x").text == "postgres://hoist@db/x")
    }

    @Test func aCaretAfterAHiddenPasswordStaysUnderItsColumn() {
        let line = #"  url: "postgres://u:longpassword@h/d", bad: x"#
        let column = Array(line).firstIndex(of: "b")! + 1
        let error = YAMLError(file: "j.yaml", mark: YAMLMark(line: 1, column: column), message: "unknown key", sourceLine: line)
        let lines = error.description.components(separatedBy: "\n")
        #expect(lines[1] == #"      url: "postgres://u:***@h/d", bad: x"#)
        #expect(Array(lines[2]).firstIndex(of: "^") == Array(lines[1]).firstIndex(of: "b"))
    }

    /// A file named with a right-to-left override shows as another name (`evil\u{202E}txt.exe`
    /// reads `evilexe.txt`): printed escaped, in plans and summaries alike.
    @Test func bidirectionalOverridesInFileNamesAreShownEscaped() throws {
        #expect(printable("evil\u{202E}txt.exe") == #"evil\u{202E}txt.exe"#)
        #expect(printable("a\u{2066}b\u{2069}c\u{200F}") == #"a\u{2066}b\u{2069}c\u{200F}"#)
        #expect(printable("café 日本 \u{1F600}") == "café 日本 \u{1F600}")
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture)
        try fixture.file("evil\u{202E}txt.exe")
        let run = try runProcess(hoist, ["plan", manifest], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stdout.unicodeScalars.contains { $0.value == 0x202E }, "\(run.stdout)")
        #expect(run.stdout.contains(#"evil\u{202E}txt.exe"#), "\(run.stdout)")
    }

    // MARK: - The red team's second look (each a finding, reproduced)

    /// A folder above the output folder, which another user may rename, swapped for a link to
    /// the job's config folder after the check: the hook's append went into the envFile.
    @Test func aLinkSwappedInAboveTheOutputFolderIsNotFollowed() async throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try fixture.directory.write("conf/job.env", Data("GREETING=hi\n".utf8))
        try FileManager.default.createDirectory(at: fixture.directory.url.appendingPathComponent("mal/reports"), withIntermediateDirectories: true)
        let job = try fixture.job("""
            envFile: conf/job.env
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { output: mal/reports/conf }
            hooks:
              - inline: |
                  function on_job_start(job) log.warn(tostring(select(2, pcall(hoist.append_file, "job.env", "STORAGE_EMULATOR_HOST=evil:1\\n")))) end
            """)
        let log = HookLog()
        let bus = try HookBus(job: job, storage: try job.makeStorage()) { line in log.append(line.message) }
        let mal = fixture.directory.url.appendingPathComponent("mal")
        try FileManager.default.moveItem(at: mal.appendingPathComponent("reports"), to: mal.appendingPathComponent("reports.old"))
        try FileManager.default.createSymbolicLink(atPath: mal.appendingPathComponent("reports").path, withDestinationPath: fixture.directory.url.path)
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [], hooks: bus).run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 1)
        #expect(try String(contentsOf: fixture.directory.url.appendingPathComponent("conf/job.env"), encoding: .utf8) == "GREETING=hi\n")
        #expect(log.all.contains { $0.contains("symbolic link on the way to the output folder") }, "\(log.all)")
    }

    /// System folders (the CA store libcurl reads, cron's tables) and home folders are no
    /// output folder, whatever the manifest says; nor is HOME when the job moves its own state.
    @Test(arguments: ["/etc/ssl/certs", "/etc/cron.d", "/usr/lib/ssl", "HOME", "HOME/.ssh", "/"])
    func anOutputFolderInASystemOrHomeFolderIsRefused(output: String) throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let home = fixture.directory.url.appendingPathComponent("home").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let job = try fixture.job("""
            env: { XDG_STATE_HOME: \(fixture.directory.url.appendingPathComponent("state").path) }
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { output: '\(output.replacingOccurrences(of: "HOME", with: home))' }
            """, environment: ["HOME": home])
        #expect {
            try job.checkRoots()
        } throws: { error in
            "\(error)".contains("the hook output folder") && ("\(error)".contains("system folder") || "\(error)".contains("home folder")
                || "\(error)".contains("every user"))
        }
    }

    /// A PostgreSQL journal's `sslrootcert=` decides which server is trusted as the journal.
    @Test func anOutputFolderHoldingTheJournalsCAFileIsRefused() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let logs = fixture.directory.url.appendingPathComponent("logs").path
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try """
            version: 1
            name: pgca
            journal: "postgres://hoist@localhost:55432/hoist?sslmode=verify-full&sslrootcert=\(logs)/pg-ca.pem"
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { output: logs }

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let job = try Job(file: manifest, environment: ["HOME": "/root"])
        #expect { try job.checkRoots() } throws: { "\($0)".contains("sslrootcert") }
    }

    /// `followSymlinks: true` and a link in the root to the output folder: the next run
    /// uploaded what the hook wrote. A followed link into the output folder or the local bucket
    /// is skipped.
    @Test func aFollowedLinkIntoTheOutputFolderIsNotWalked() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try fixture.directory.write("out/planted.txt", Data("from a hook".utf8))
        try FileManager.default.createSymbolicLink(atPath: fixture.directory.url.appendingPathComponent("src/l").path,
                                                   withDestinationPath: fixture.directory.url.appendingPathComponent("out").path)
        try FileManager.default.createSymbolicLink(atPath: fixture.directory.url.appendingPathComponent("src/f.txt").path,
                                                   withDestinationPath: fixture.directory.url.appendingPathComponent("out/planted.txt").path)
        let items = try fixture.plan("storage: { url: 'file:bucket' }\nfiles: [{ root: src, followSymlinks: true }]\nlua: { output: out }\n")
        #expect(items.map(\.file.relativePath) == ["a.txt"])
    }

    /// The journal's shared-memory file hard-linked to another user's file: SQLite wrote its
    /// index there and root took the file over. Every journal file another user owns is refused.
    @Test func aJournalsSharedMemoryFileAnotherUserOwnsIsRefused() throws {
        guard geteuid() == 0 else { return }
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture, extra: "journal: journal.sqlite\n")
        let victim = try fixture.directory.write("victim", Data("precious\n".utf8))
        chown(victim.path, 65534, 65534)
        chmod(victim.path, 0o600)
        #expect(link(victim.path, fixture.directory.url.appendingPathComponent("journal.sqlite-shm").path) == 0)
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("journal.sqlite-shm belongs to another user"), "\(run.stderr)")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
        var info = stat()
        #expect(stat(victim.path, &info) == 0 && info.st_uid == 65534)
    }

    /// A newline or an escape sequence in a manifest's value (a job's name, a root's path) printed
    /// raw by `validate`, `run` and `plan`, and a source's name by `cp`: a line of its own on the
    /// operator's terminal. Each is escaped; Hoist's lines are the only lines.
    @Test func manifestValuesAndArgumentsPrintAsOneLine() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let forged = "photos: 12 uploaded (3.4 MiB), 0 failed in 1.2 s"
        let named = fixture.directory.url.appendingPathComponent("named.yaml").path
        try "version: 1\nname: \"x\\n\(forged)\"\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n".write(toFile: named, atomically: true, encoding: .utf8)
        let rooted = fixture.directory.url.appendingPathComponent("rooted.yaml").path
        try "version: 1\nname: r\nstorage: { url: 'file:bucket' }\nfiles: [{ root: \"d\\e[2J\\rhoist: plan ok\\u202ERTL\" }]\n".write(toFile: rooted, atomically: true, encoding: .utf8)
        var outputs: [String] = []
        for arguments in [["validate", named], ["run", named], ["plan", named], ["validate", rooted], ["run", rooted], ["plan", rooted],
                          ["cp", "gone\n\(forged)\u{1B}[2J", "file:" + fixture.directory.url.appendingPathComponent("bucket").path + "/x"]] {
            let run = try runProcess(hoist, arguments, environment: ["HOME": "/root", "PATH": "/usr/bin:/bin"])
            #expect(run.status != 0, "\(arguments)")
            outputs.append(run.stdout + run.stderr)
        }
        for output in outputs {
            #expect(!output.split(separator: "\n").contains { $0.hasPrefix("photos:") || $0.hasPrefix("hoist: plan ok") }, "\(output)")
            #expect(!output.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || $0.value == 0x202E }, "\(output.debugDescription)")
        }
        #expect(outputs.allSatisfy { $0.contains("\\u{A}") || $0.contains("\\u{1B}") }, "\(outputs)")
    }

    /// A journal someone else made (or may write) decides what a run skips: refused.
    @Test(arguments: ["owner", "mode"])
    func aJournalAnotherUserControlsIsRefused(how: String) throws {
        guard geteuid() == 0 || how == "mode" else { return }
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture, extra: "journal: journal.sqlite\n")
        #expect(try runProcess(hoist, ["run", manifest], environment: environment).status == 0)
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        if how == "owner" { chown(journal, 65534, 65534) } else { chmod(journal, 0o666) }
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains(how == "owner" ? "belongs to another user" : "may be written by other users"), "\(run.stderr)")
    }

    /// `--log-file` at a name where another user planted a link: root appended to its target.
    @Test func theLogFileIsNotOpenedThroughALink() throws {
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture)
        let victim = try fixture.directory.write("victim.txt", Data("precious\n".utf8))
        let log = fixture.directory.url.appendingPathComponent("hoist.log").path
        try FileManager.default.createSymbolicLink(atPath: log, withDestinationPath: victim.path)
        let run = try runProcess(hoist, ["run", "--log-file", log, manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains("the log file \(log) is a symbolic link, not a regular file"), "\(run.stderr)")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
    }

    /// What others wrote, printed by `hoist plugins` (a plugin's header) and `hoist validate`
    /// (a hook's syntax error quoting its text): escaped.
    @Test func pluginHeadersAndHookSyntaxErrorsArePrintedEscaped() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let plugins = fixture.directory.url.appendingPathComponent("more-plugins")
        try fixture.directory.write("more-plugins/evil.lua", Data("-- evil.lua: \u{1B}]0;PWNED\u{7}\u{1B}[2J cleared\u{202E}\nreturn 1\n".utf8))
        var environment = ["HOME": "/root", "PATH": "/usr/bin:/bin", "HOIST_PLUGIN_PATH": plugins.path]
        let listed = try runProcess(hoist, ["plugins"], environment: environment)
        #expect(listed.stdout.contains("evil"), "\(listed.stdout)")
        #expect(!listed.stdout.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x202E }, "\(listed.stdout)")
        try fixture.directory.write("h1.lua", Data("x = \"\u{1B}]0;PWNED\u{7}\u{1B}[2J\n".utf8))
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try "version: 1\nname: esc\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nhooks: [h1.lua]\n".write(
            toFile: manifest, atomically: true, encoding: .utf8)
        environment["HOIST_PLUGIN_PATH"] = nil
        let validated = try runProcess(hoist, ["validate", manifest], environment: environment)
        #expect(validated.status == 2)
        #expect(validated.stderr.contains("h1.lua:1:"), "\(validated.stderr)")
        #expect(!validated.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(validated.stderr)")
    }

    /// The lock's text is another process's (or user's): only a process id is shown from it.
    @Test func aLockHoldersTextCannotForgeALine() throws {
        let fixture = try JobFixture()
        let (manifest, environment) = try job(fixture, extra: "journal: journal.sqlite\n")
        let lock = fixture.directory.url.appendingPathComponent("journal.sqlite.lock").path
        try "666\nhoist: fake message\n".write(toFile: lock, atomically: false, encoding: .utf8)
        chmod(lock, 0o600)
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = ["-x", lock, "sleep", "5"]
        try holder.run()
        defer { holder.terminate() }
        // Once flock holds the lock (a try of it fails), not after a guessed time.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try runProcess("/usr/bin/flock", ["-n", lock, "true"]).status == 0 { usleep(20_000) }
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains("is already running (pid unknown)"), "\(run.stderr)")
        #expect(!run.stderr.contains("fake message"), "\(run.stderr)")
    }

    /// One set of counts: two files a hook failed before their upload and one it cancelled are
    /// 3 failed in the run's summary and in `hoist status` (which said 0 failed); files a Ctrl-C
    /// cancelled are cancelled for the run and pending for status (which listed them failed).
    @Test func statusCountsWhatTheRunCounted() throws {
        let fixture = try JobFixture()
        for name in ["bad1.txt", "bad2.txt", "stop.bin"] { try fixture.file(name, name.hasSuffix(".bin") ? 4 << 20 : 10) }
        let (manifest, environment) = try job(fixture, extra: """
            journal: journal.sqlite
            upload: { bandwidth: 1MB/s }
            hooks:
              - inline: |
                  function before_upload(f) if f.relpath:sub(1, 3) == "bad" then error("refused by the hook") end end
                  function on_resume(s) if s.file.relpath == "stop.bin" then s.task:cancel() end end

            """)
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("readback: 1 uploaded (10 B), 3 failed"), "\(run.stdout)")
        let status = try runProcess(hoist, ["status", manifest], environment: environment)
        #expect(status.stdout.contains("files: 1 uploaded, 0 pending, 3 failed"), "\(status.stdout)")
        #expect(status.stdout.components(separatedBy: "refused by the hook").count - 1 == 2, "\(status.stdout)")

        // Ctrl-C while a file is being sent: cancelled, not failed, and pending for the next run.
        let slow = try JobFixture()
        try slow.file("big.bin", 8 << 20)
        let (slowManifest, slowEnvironment) = try job(slow, extra: "journal: journal.sqlite\nupload: { bandwidth: 1MB/s }\n")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", slowManifest]
        process.environment = slowEnvironment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Ctrl-C once big.bin's bytes are moving (its upload file in the bucket holds more than
        // a.txt could), not after a guessed time.
        let uploads = slow.directory.url.appendingPathComponent("bucket/.hoist/uploads")
        #expect(waitForAnUpload(by: process.processIdentifier, in: uploads, holdingMoreThan: 100_000))
        #expect(process.isRunning, "the run ended before its Ctrl-C")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 130)
        #expect(said.contains("1 cancelled") && !said.contains("failed"), "\(said)")
        let after = try runProcess(hoist, ["status", slowManifest], environment: slowEnvironment)
        #expect(after.stdout.contains(", 0 failed") && !after.stdout.contains("failed:  "), "\(after.stdout)")
        #expect(after.stdout.contains("1 pending") || after.stdout.contains("pending: "), "\(after.stdout)")
    }
}
