import Foundation
import HoistTestSupport
import Testing

/// The `hoist` command as a user meets it: help texts, exit statuses, output, signals.
@Suite struct CommandTests {
    @Test(arguments: ["hoist", "run", "watch", "validate", "plan", "cp", "status", "cron", "systemd", "plugins"])
    func helpMatchesGoldenText(command: String) throws {
        let golden = try String(contentsOf: packageRoot.appendingPathComponent("Tests/golden/help-\(command).txt"), encoding: .utf8)
        let run = try runProcess(hoist, command == "hoist" ? ["--help"] : [command, "--help"])
        #expect(run.status == 0)
        #expect(run.stdout == golden)
    }

    @Test func everyJobInTheRepositoryValidates() throws {
        let jobs = try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent("jobs").path)
            .filter { $0.hasSuffix(".yaml") }.sorted().map { packageRoot.appendingPathComponent("jobs/\($0)").path }
        #expect(jobs.count >= 4)
        // They describe other machines' folders (/var/photos...): check them, not this machine.
        let run = try runProcess(hoist, ["validate", "--syntax-only"] + jobs)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.split(separator: "\n").count == jobs.count)
        // And against the JSON Schema editors use.
        let schema = packageRoot.appendingPathComponent("schema/job.schema.json").path
        let check = try runProcess(testPython, testPythonArguments + ["-c", """
            import json, sys, yaml, jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            for path in sys.argv[2:]:
                jsonschema.validate(yaml.safe_load(open(path)), schema)
                print("valid", path)
            """, schema] + jobs)
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.split(separator: "\n").count == jobs.count)
    }

    @Test func badManifestExitsTwoWithTheLocatedError() throws {
        let directory = try TemporaryDirectory()
        let job = try directory.write("job.yaml", Data("version: 1\nname: x\nstorage: { url: 'file:b' }\nfiles: [{ root: src }]\nupload: { concurency: 2 }\n".utf8))
        for command in ["run", "plan", "validate"] {
            let run = try runProcess(hoist, [command, job.path])
            #expect(run.status == 2)
            #expect(run.stderr == """
                \(job.path):5:11: unknown key 'concurency' (did you mean 'concurrency'?)
                    upload: { concurency: 2 }
                              ^

                """)
        }
    }

    @Test func runPrintsASummaryAndJSONEvents() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        try fixture.file("b.txt", 200)
        try fixture.file("skip.tmp", 5)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, exclude: '*.tmp' }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let log = fixture.directory.url.appendingPathComponent("events.log").path

        let plain = try runProcess(hoist, ["run", "--log-file", log, manifest])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdout.hasPrefix("test: 2 uploaded (300 B), 1 not included in "))

        let json = try runProcess(hoist, ["run", "--json", "--force", manifest])
        let events = json.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
        let names = events.compactMap { $0["event"] as? String }
        #expect(names.first == "job_start" && names.last == "job_end")
        #expect(names.filter { $0 == "success" }.count == 2)
        #expect(names.contains("skip"))
        for file in ["a.txt", "b.txt"] {
            let mine = events.filter { ($0["file"] as? String)?.hasSuffix(file) == true }.compactMap { $0["event"] as? String }
            #expect(mine.first == "resume" && mine.last == "success")
        }
        #expect(events.last?["uploaded"] as? Int == 2)
        let logged = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(logged.first?.contains(#""event":"job_start""#) == true)
        #expect(logged.last?.contains(#""event":"job_end""#) == true)
    }

    @Test func someFailedExitsOne() throws {
        let fixture = try JobFixture()
        try fixture.directory.write("one/x", Data("file".utf8))
        try fixture.directory.write("two/x/y", Data("below".utf8))
        // Objects 'x' and 'x/y': a local bucket cannot hold a file and a folder of one name.
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: one }, { root: two }]\nupload: { concurrency: 1 }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(hoist, ["run", "--quiet", manifest])
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.hasSuffix("two/x/y: Object x/y cannot be stored: object x exists, and a local bucket cannot hold both.\n"))
    }

    /// `-q` from cron: a successful run prints nothing (cron mails any output), not even a
    /// hook's `log.info` or `print`; its warnings and errors still show.
    @Test func quietSilencesHooksInfoButNotTheirWarnings() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }, { root: gone, optional: true }]
            hooks:
              - inline: |
                  function on_success(s) log.info("stored " .. s.reference.name); print("printed"); log.debug("debug") end
                  function on_job_end(summary) log.warn("warned") end
            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let quiet = try runProcess(hoist, ["run", "--quiet", manifest], environment: ["HOME": fixture.directory.url.path])
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(quiet.stdout.isEmpty, "\(quiet.stdout)")
        #expect(quiet.stderr.hasPrefix("hoist: [") && quiet.stderr.hasSuffix("job.yaml#hooks[0]] warn: warned\n"), "\(quiet.stderr)")
        #expect(quiet.stderr.split(separator: "\n").count == 1, "\(quiet.stderr)")
        try fixture.file("b.txt")
        let loud = try runProcess(hoist, ["run", manifest], environment: ["HOME": fixture.directory.url.path])
        #expect(loud.stderr.contains("info: stored b.txt") && loud.stderr.contains("info: printed") && loud.stderr.contains("note: "),
                "\(loud.stderr)")
    }

    /// `run --json` of a manifest that does not load printed nothing on stdout, though
    /// docs/events.md promises a `job_end` with `fatal`; JSON wrote `/` as `\/`; bidirectional
    /// overrides went out raw (valid JSON, but a terminal showing it obeys them).
    @Test func jsonOutputForABrokenManifestAndHostileNames() throws {
        let fixture = try JobFixture()
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try "version: 1\nname: broken\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src, maxSize: huge }]\n".write(
            toFile: manifest, atomically: true, encoding: .utf8)
        let broken = try runProcess(hoist, ["run", "--json", manifest])
        #expect(broken.status == 2)
        let end = try #require(try JSONSerialization.jsonObject(with: Data(broken.stdout.utf8)) as? [String: Any], "\(broken.stdout)")
        #expect(end["event"] as? String == "job_end" && end["job"] as? String == "broken")
        #expect((end["fatal"] as? String)?.contains("job.yaml:4:") == true, "\(end)")
        #expect(try validateEvents(broken.stdout) == ["job_end"])

        try fixture.file("dir/evil\u{202E}txt.exe")
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let run = try runProcess(hoist, ["run", "--json", manifest], environment: ["HOME": fixture.directory.url.path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stdout.contains("\\/"), "\(run.stdout)")
        #expect(run.stdout.contains("dir/evil\\u202Etxt.exe"), "\(run.stdout)")
        #expect(!run.stdout.unicodeScalars.contains { $0.value == 0x202E })
        #expect(try validateEvents(run.stdout).contains("success"))
    }

    @Test func planSaysWhatAndWhy() throws {
        let fixture = try JobFixture()
        try fixture.file("a.jpg", 2048)
        try fixture.file("b.txt", 10)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, include: '*.jpg', destination: 'img/{name}' }]\n")
        let run = try runProcess(hoist, ["plan", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(run.status == 0)
        #expect(run.stdout == """
            upload  a.jpg -> img/a.jpg (2.0 KiB)
            skip    b.txt (not included)
            test: 1 to upload (2.0 KiB), 1 to skip

            """)
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket").path))

        // With noClobber the plan cannot know which objects exist (it asks no server): it says so.
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, include: '*.jpg' }]\nupload: { noClobber: true }\n")
        let noClobber = try runProcess(hoist, ["plan", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(noClobber.stdout.hasSuffix("test: 1 to upload (2.0 KiB), 1 to skip, each upload unless its object exists (noClobber)\n"),
                "\(noClobber.stdout)")
    }

    @Test func sigusr1PausesAndResumesEveryUpload() async throws {
        try await ExclusiveTests.shared.run { try pauseBySignal() }
    }

    func pauseBySignal() throws {
        let fixture = try JobFixture()
        try fixture.file("big.bin", 6_000_000)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 3MB/s }\n")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--quiet", fixture.directory.url.appendingPathComponent("job.yaml").path]
        try process.run()
        // A small upload's bytes go to an unnamed file in the bucket's uploads folder.
        let uploads = fixture.directory.url.appendingPathComponent("bucket/.hoist/uploads").path
        func partSize() -> Int { openFiles(of: process.processIdentifier, under: uploads).first?.size ?? -1 }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, partSize() < 1_000_000 { usleep(20_000) }
        kill(process.processIdentifier, SIGUSR1)
        usleep(400_000)
        let held = partSize()
        usleep(800_000)
        #expect(partSize() == held, "the part file grew while paused")
        #expect(held > 0 && held < 6_000_000)
        kill(process.processIdentifier, SIGUSR1)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/big.bin")) == patternData(6_000_000))
    }

    @Test func sigintStopsCleanlyAndLeavesNoPartialObject() async throws {
        try await ExclusiveTests.shared.run { try sigintRun() }
    }

    func sigintRun() throws {
        let fixture = try JobFixture()
        try fixture.file("big.bin", 30_000_000)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 10MB/s }\n")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", fixture.directory.url.appendingPathComponent("job.yaml").path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        // Wait until bytes are moving into a part file, then interrupt.
        let uploads = bucket.appendingPathComponent(".hoist/uploads")
        waitForAPart(in: uploads, holdingMoreThan: 2_000_000)
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 130)
        #expect(text.contains("test: 0 uploaded (0 B), 1 cancelled in "))
        #expect(text.contains("(interrupted)"))
        #expect(!FileManager.default.fileExists(atPath: bucket.appendingPathComponent("big.bin").path))
        let left = (try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? []
        #expect(left.isEmpty, "\(left)")
    }
}
