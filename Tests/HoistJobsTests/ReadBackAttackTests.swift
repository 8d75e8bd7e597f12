import Foundation
@testable import HoistJobs
import HoistTestSupport
import HoistYAML
import Testing

/// What Hoist writes beside a job (lock, journal, metrics) and what it prints from what it
/// reads back (journal rows, manifest lines, paths): each test is one attack of the red team's
/// third pass, checked by what a user would see.
@Suite struct ReadBackAttackTests {
    let hoist = productsDirectory.appendingPathComponent("hoist").path

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
}
