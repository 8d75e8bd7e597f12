import Foundation
import HoistTestSupport
import Testing

/// `hoist cron` prints lines that work when cron runs them: quoted for the shell, `%` escaped,
/// and the job carrying the environment it needs (cron's is bare).
@Suite struct CronTests {
    /// What cron does to a line's command before `/bin/sh -c` gets it (Debian's cron, do_command.c):
    /// an unescaped `%` ends the command (the rest is standard input), `\%` becomes `%`.
    func cronCommand(_ line: String) -> String {
        let command = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)[5]
        var result = ""
        var escaped = false
        for character in command {
            if escaped {
                if character == "%" { result.removeLast() }
                escaped = false
                result.append(character)
                continue
            }
            if character == "\\" { escaped = true }
            if character == "%" { break }
            result.append(character)
        }
        return result
    }

    /// `scripts/install` lays out what a user gets (binary, man page, completions, plugins);
    /// `hoist cron` from a build folder warns that the crontab would name a binary a clean
    /// removes, and the installed one names itself, without the warning.
    @Test func theInstalledHoistSchedulesItselfAndABuildFolderOneWarns() throws {
        let prefix = try TemporaryDirectory()
        let install = try runProcess("/bin/bash", [packageRoot.appendingPathComponent("scripts/install").path,
                                                   "--prefix", prefix.path, "--binary", hoist])
        #expect(install.status == 0, "\(install.stderr)")
        for file in ["bin/hoist", "share/man/man1/hoist.1", "share/bash-completion/completions/hoist", "share/zsh/site-functions/_hoist",
                     "share/fish/vendor_completions.d/hoist.fish", "share/hoist/plugins/webhook.lua"] {
            let size = (try? FileManager.default.attributesOfItem(atPath: prefix.path + "/" + file)[.size] as? NSNumber)?.intValue ?? 0
            #expect(size > 0, "\(file)")
        }
        #expect(try String(contentsOfFile: prefix.path + "/share/bash-completion/completions/hoist", encoding: .utf8).contains("_hoist"))
        let installed = prefix.path + "/bin/hoist"
        let plugins = try runProcess(installed, ["plugins"], environment: ["HOME": prefix.path, "PATH": "/usr/bin:/bin"])
        #expect(plugins.stdout.contains(prefix.path + "/share/hoist/plugins/webhook.lua"), "\(plugins.stdout)")

        let manifest = try prefix.write("job.yaml", Data("version: 1\nname: nightly\nstorage: { url: 'file:bucket' }\nfiles: [{ root: ., optional: true }]\nschedule: '0 3 * * *'\n".utf8))
        let fromBuild = try runProcess(hoist, ["cron", manifest.path])
        #expect(fromBuild.status == 0)
        #expect(fromBuild.stderr.contains("is inside a build folder"), "\(fromBuild.stderr)")
        let fromInstall = try runProcess(installed, ["cron", manifest.path])
        #expect(fromInstall.status == 0)
        #expect(fromInstall.stderr.isEmpty, "\(fromInstall.stderr)")
        #expect(fromInstall.stdout.contains("0 3 * * * \(installed) run --quiet"), "\(fromInstall.stdout)")
    }

    /// Both install routes on one machine leave two `hoist`s (the package's `/usr/bin/hoist`,
    /// `scripts/install`'s `/usr/local/bin/hoist`), and `hoist cron` names whichever ran:
    /// `scripts/install` says so, naming both paths, for one earlier and one later in PATH.
    @Test func installNamesAnotherHoistInPath() throws {
        let folder = try TemporaryDirectory()
        let earlier = try folder.write("earlier/hoist", Data("#!/bin/sh\n".utf8)).path
        let later = try folder.write("later/hoist", Data("#!/bin/sh\n".utf8)).path
        for path in [earlier, later] { try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path) }
        let prefix = folder.path + "/prefix"
        let installed = prefix + "/bin/hoist"
        let path = [folder.path + "/earlier", prefix + "/bin", "/usr/bin", "/bin", folder.path + "/later"].joined(separator: ":")
        let install = try runProcess("/bin/bash", [packageRoot.appendingPathComponent("scripts/install").path, "--prefix", prefix, "--binary", hoist],
                                     environment: ["PATH": path, "HOME": folder.path])
        #expect(install.status == 0, "\(install.stderr)")
        let warnings = install.stderr.split(separator: "\n").filter { $0.hasPrefix("install: warning: ") }
        #expect(warnings == [
            "install: warning: \(earlier) comes before \(installed) in PATH, so `hoist` runs \(earlier) (and hoist cron/systemd name it): "
                + "remove one of them (README, \"Set up\", says which route to take)",
            "install: warning: \(later) is also in PATH, after \(installed): two installs of hoist; "
                + "remove one of them (README, \"Set up\", says which route to take)",
        ], "\(install.stderr)")
    }

    @Test func aCronLineRunsFromAQuotedPathUnderABareEnvironment() throws {
        let directory = try TemporaryDirectory()
        try directory.write("my jobs/it's 50% off/src/a.txt", Data("hello".utf8))
        let manifest = try directory.write("my jobs/it's 50% off/job $1.yaml", Data("""
            version: 1
            name: sale
            journal: journal.sqlite
            env:
              BUCKET_DIR: bucket
              PREFIX: from-env-section
            storage: { url: "file:${BUCKET_DIR}" }
            files: [{ root: src, destination: "{env:PREFIX}/{relpath}" }]
            schedule: "*/5 * * * *"

            """.utf8)).path
        let cron = try runProcess(hoist, ["cron", manifest])
        #expect(cron.status == 0, "\(cron.stderr)")
        let lines = cron.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines.first == "# sale")
        let line = try #require(lines.last)
        #expect(line.hasSuffix(" run --quiet '\(directory.path)/my jobs/it'\\''s 50\\% off/job $1.yaml'"), "\(line)")

        // As cron runs it: its % processing, then /bin/sh with an empty environment.
        let run = try runProcess("/usr/bin/env", ["-i", "/bin/sh", "-c", cronCommand(line)])
        #expect(run.status == 0, "\(run.stderr)")
        let object = directory.url.appendingPathComponent("my jobs/it's 50% off/bucket/from-env-section/a.txt").path
        #expect(FileManager.default.contents(atPath: object) == Data("hello".utf8))
    }

    @Test func anEnvFileGivesTheJobItsVariablesUnderEnvSection() throws {
        let directory = try TemporaryDirectory()
        try directory.write("src/a.txt", Data("hello".utf8))
        try directory.write("secrets/job.env", Data("""
            # for cron
            export PREFIX=from-file
            SUFFIX="quoted value"
            BUCKET_DIR=overridden-below

            """.utf8))
        let manifest = try directory.write("job.yaml", Data("""
            version: 1
            name: envfile
            journal: journal.sqlite
            envFile: secrets/job.env
            env: { BUCKET_DIR: bucket }
            storage: { url: "file:${BUCKET_DIR}" }
            files: [{ root: src, destination: "{env:PREFIX}/{env:SUFFIX}/{relpath}" }]

            """.utf8)).path
        let run = try runProcess("/usr/bin/env", ["-i", hoist, "run", "--quiet", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("bucket/from-file/quoted value/a.txt").path))

        try directory.write("secrets/job.env", Data("PREFIX=ok\nnot a variable\n".utf8))
        let bad = try runProcess(hoist, ["validate", manifest])
        #expect(bad.status == 2)
        #expect(bad.stderr.hasPrefix("\(directory.path)/secrets/job.env:2:1: expected KEY=VALUE"), "\(bad.stderr)")
        try FileManager.default.removeItem(at: directory.url.appendingPathComponent("secrets/job.env"))
        let missing = try runProcess(hoist, ["validate", manifest])
        #expect(missing.status == 2)
        #expect(missing.stderr.hasPrefix("\(manifest):4:10: envFile secrets/job.env does not exist (looked for \(directory.path)/secrets/job.env"),
                "\(missing.stderr)")
    }

    @Test func aJobWithoutScheduleAmongOthersIsSkippedWithANote() throws {
        let directory = try TemporaryDirectory()
        let body = "version: 1\nstorage: { url: 'file:b' }\nfiles: [{ root: src }]\n"
        let nightly = try directory.write("nightly.yaml", Data((body + "name: nightly\nschedule: '@daily'\n").utf8)).path
        let manual = try directory.write("manual.yaml", Data((body + "name: manual\n").utf8)).path
        let run = try runProcess(hoist, ["cron", manual, nightly])
        #expect(run.status == 0)
        #expect(run.stdout == "# nightly\n@daily \(hoist) run --quiet \(nightly)\n")
        // (After the warning that this test's hoist lives in a build folder.)
        #expect(run.stderr.hasSuffix("\nhoist: \(manual): skipped: it has no schedule; add one, such as schedule: \"0 3 * * *\"\n"))

        // Alone, a job without a schedule is a mistake; so is any invalid manifest among others.
        #expect(try runProcess(hoist, ["cron", manual]).status == 2)
        let broken = try directory.write("broken.yaml", Data("version: 1\n".utf8)).path
        let mixed = try runProcess(hoist, ["cron", nightly, broken])
        #expect(mixed.status == 2)
        #expect(mixed.stderr.contains("broken.yaml:1:1: missing required key 'name'"), "\(mixed.stderr)")
    }

    @Test func aRunThatCannotStartWritesTheFailureToTheMetrics() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let metrics = fixture.directory.url.appendingPathComponent("hoist.prom").path
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        #expect(try runProcess(hoist, ["run", "--metrics-file", metrics, manifest]).status == 0)
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains("hoist_last_run_success{job=\"test\"} 1"))
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nhooks: [{ inline: 'function on_success(s' }]\n")
        let broken = try runProcess(hoist, ["run", "--metrics-file", metrics, manifest])
        #expect(broken.status == 2)
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains("hoist_last_run_success{job=\"test\"} 0"))

        // A manifest that does not load at all, after a success.
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        #expect(try runProcess(hoist, ["run", "--metrics-file", metrics, manifest]).status == 0)
        try "version: 1\nname: test\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurency: 2 }\n"
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let invalid = try runProcess(hoist, ["run", "--metrics-file", metrics, manifest])
        #expect(invalid.status == 2)
        #expect(invalid.stderr.contains("unknown key 'concurency'"))
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains("hoist_last_run_success{job=\"test\"} 0"))
    }
}
