import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import Testing

/// Failures are loud and fast: a run that cannot do its work says why in one line and exits 2
/// within seconds, the metrics and `hoist status` say it failed, and a run that died is shown
/// as interrupted. Each test is named after the failure it prevents.
@Suite struct TrustTests {
    /// The environment of a machine with no Google credentials and no emulator.
    var bareEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix("GOOGLE_") && !key.hasPrefix("HOIST_") && key != "STORAGE_EMULATOR_HOST"
        }
    }

    /// Runs `hoist` and measures how long it took.
    func timed(_ arguments: [String], environment: [String: String]? = nil) throws
        -> (status: Int32, stdout: String, stderr: String, seconds: Double)
    {
        let started = Date()
        let run = try runProcess(hoist, arguments, environment: environment)
        return (run.status, run.stdout, run.stderr, Date().timeIntervalSince(started))
    }

    @Test func missingRootIsAnErrorNotAnEmptySuccess() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let metrics = fixture.directory.url.appendingPathComponent("hoist.prom").path
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles:\n  - root: src\n  - root: photos-mount\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try FileManager.default.createDirectory(at: fixture.directory.url.appendingPathComponent("photos-mount"),
                                                withIntermediateDirectories: true)
        #expect(try runProcess(hoist, ["run", "--metrics-file", metrics, manifest]).status == 0)
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains("hoist_last_run_success{job=\"test\"} 1"))

        // The mount goes away.
        try FileManager.default.removeItem(at: fixture.directory.url.appendingPathComponent("photos-mount"))
        let missing = fixture.directory.url.appendingPathComponent("photos-mount").path
        let expected = "job.yaml:7:11: root \(missing) does not exist"
        let validate = try runProcess(hoist, ["validate", manifest])
        #expect(validate.status == 2)
        #expect(validate.stderr.contains(expected), "\(validate.stderr)")
        let plan = try runProcess(hoist, ["plan", manifest])
        #expect(plan.status == 2)
        #expect(plan.stderr.contains(expected), "\(plan.stderr)")
        let run = try runProcess(hoist, ["run", "--metrics-file", metrics, manifest])
        #expect(run.status == 2)
        #expect(run.stderr.contains(expected), "\(run.stderr)")
        #expect(!run.stdout.contains("uploaded"))
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains("hoist_last_run_success{job=\"test\"} 0"))
        let status = try runProcess(hoist, ["status", manifest])
        let lastRun = status.stdout.split(separator: "\n").first { $0.hasPrefix("  ") } ?? ""
        #expect(lastRun.contains("failed") && lastRun.contains("does not exist"), "\(status.stdout)")
    }

    @Test func optionalMissingRootIsSkippedWithANote() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles:\n  - root: src\n  - { root: usb-stick, optional: true }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(hoist, ["run", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("test: 1 uploaded"))
        #expect(run.stderr.contains("usb-stick does not exist; file set 2 is optional and was skipped"))
    }

    @Test func noCredentialsFailsAtOnceSayingWhatToSet() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        _ = try fixture.job("storage: { url: 'gs://my-app.appspot.com' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        for arguments in [["run", manifest], ["cp", fixture.directory.url.appendingPathComponent("src/a.txt").path, "gs://my-app.appspot.com/a.txt"]] {
            let run = try timed(arguments, environment: bareEnvironment)
            #expect(run.status == 2, "\(arguments[0]): \(run.stderr)")
            #expect(run.seconds < 10)
            #expect(run.stderr.contains("No credentials for gs://my-app.appspot.com: set GOOGLE_APPLICATION_CREDENTIALS"), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
        }
    }

    @Test func unreachableHostFailsAtOnce() throws {
        let fixture = try JobFixture()
        for index in 0..<3 { try fixture.file("f\(index).txt") }
        _ = try fixture.job("storage: { url: 'gs://bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let closed = try freePort()
        for host in ["127.0.0.1:\(closed)", "no-such-host.invalid:4443"] {
            var environment = bareEnvironment
            environment["STORAGE_EMULATOR_HOST"] = host
            let run = try timed(["run", manifest], environment: environment)
            #expect(run.status == 2)
            #expect(run.seconds < 10)
            #expect(run.stderr.contains("Cannot reach Cloud Storage at http://\(host)"), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
        }
    }

    @Test func missingBucketFailsOnceWithExitTwo() throws {
        let fixture = try JobFixture()
        for index in 0..<5 { try fixture.file("f\(index).txt") }
        _ = try fixture.job("storage: { url: 'gs://no-such-bucket-here' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        var environment = bareEnvironment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(try FakeGCS.port())"
        let run = try timed(["run", manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.seconds < 10)
        #expect(run.stderr == "hoist: Bucket no-such-bucket-here does not exist at http://127.0.0.1:\(try FakeGCS.port()): "
            + "check storage.url (gs://BUCKET).\n")
    }

    @Test func badCredentialsFileIsAPlainSentence() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        _ = try fixture.job("storage: { url: 'gs://bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        var environment = bareEnvironment
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = "/nonexistent/key.json"
        let run = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr == "hoist: Cannot read the credentials file /nonexistent/key.json.\n", "\(run.stderr)")
    }

    @Test func lockFileThatCannotBeOpenedIsNotCalledAlreadyRunning() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        // The lock file's name is taken by a folder: it cannot be opened (even by root).
        try FileManager.default.createDirectory(atPath: fixture.directory.url.appendingPathComponent("state/journal.sqlite.lock").path,
                                                withIntermediateDirectories: true)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let journal = fixture.directory.url.appendingPathComponent("state/journal.sqlite").path
        let run = try runProcess(hoist, ["run", "--journal", journal, manifest])
        #expect(run.status == 2)
        #expect(!run.stderr.contains("already running"))
        #expect(run.stderr.contains("the lock file \(journal).lock is a folder, not a regular file"), "\(run.stderr)")
    }

    @Test func killedRunIsShownInterrupted() throws {
        let fixture = try JobFixture()
        try fixture.file("big.bin", 4 << 20)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 1MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--quiet", manifest]
        try process.run()
        // Killed once its upload is under way (bytes in the bucket's unnamed upload file), not
        // after a guessed time.
        let uploads = fixture.directory.url.appendingPathComponent("bucket/.hoist/uploads")
        #expect(waitForAnUpload(by: process.processIdentifier, in: uploads, holdingMoreThan: 0))
        #expect(process.isRunning, "the run ended before it was killed")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(try runProcess(hoist, ["run", manifest]).status == 0)
        let status = try runProcess(hoist, ["status", manifest]).stdout
        let runs = status.split(separator: "\n").filter { $0.hasPrefix("  ") }
        #expect(runs.count == 2, "\(status)")
        #expect(runs.first?.contains(" ok ") == true, "\(status)")
        #expect(runs.last?.contains(" interrupted ") == true, "\(status)")
        #expect(!status.contains(" running "))
    }

    @Test func damagedJournalPagesStopTheRunWithTheWayBack() throws {
        let fixture = try JobFixture(inMemory: true)
        for index in 0..<400 { try fixture.file("d\(index % 4)/a-long-file-name-to-fill-pages-\(index).txt", 10) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        #expect(try runProcess(hoist, ["run", manifest]).status == 0)
        // Fold the WAL into the file, then overwrite pages in the middle of it.
        _ = try python("""
            import sqlite3
            c = sqlite3.connect('\(journal)'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()
            with open('\(journal)', 'r+b') as f:
                f.seek(3 * 4096); f.write(b'\\xa5' * 8192)
            """)
        try fixture.file("new.txt")
        let run = try runProcess(hoist, ["run", manifest])
        #expect(run.status == 2)
        #expect(run.stderr.contains("the journal \(journal) is damaged"), "\(run.stderr)")
        #expect(run.stderr.contains("mv \(journal) \(journal).bad"))
        #expect(!run.stdout.contains("uploaded"))
    }

    @Test func copyCancelsCleanlyOnSIGINTAndSIGTERM() async throws {
        for signal in [SIGINT, SIGTERM] {
            let bucket = try await FakeGCS.makeBucket()
            // The data PUT of the resumable session stalls: the upload is in flight when the signal comes.
            let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--stall", "20:1:PUT"])
            let directory = try TemporaryDirectory()
            let file = try directory.write("big.bin", patternData(9 << 20))
            var environment = bareEnvironment
            environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(proxy.port)"
            let process = Process()
            process.executableURL = URL(fileURLWithPath: hoist)
            process.arguments = ["cp", file.path, "gs://\(bucket)/big.bin"]
            process.environment = environment
            process.standardError = FileHandle.nullDevice
            try process.run()
            while !proxy.requests.contains(where: { $0["method"] as? String == "PUT" }) { try await Task.sleep(for: .milliseconds(50)) }
            let started = Date()
            kill(process.processIdentifier, signal)
            process.waitUntilExit()
            #expect(process.terminationStatus == 130)
            #expect(Date().timeIntervalSince(started) < 5)
            #expect(try await !FakeGCS.exists(bucket: bucket, object: "big.bin"))
            // The session was given up, not left open.
            #expect(proxy.requests.contains { $0["method"] as? String == "DELETE" })
        }
    }

    /// fake-gcs-server finalizes a truncated object whenever a resumed run asks a session's
    /// status; killed runs must still end in byte-exact objects, never a short one journaled done.
    @Test func killedRunsOnFakeGCSLeaveEveryObjectByteExact() async throws {
        try await ExclusiveTests.shared.run {
            let bucket = try await FakeGCS.makeBucket()
            let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
            let fixture = try JobFixture()
            try fixture.file("big.bin", 20 << 20)
            for index in 0..<40 { try fixture.file("small/f\(index).txt", 5000 + index) }
            _ = try fixture.job("""
                storage: { url: 'gs://\(bucket)', multipartThreshold: 1MiB }
                files: [{ root: src }]
                upload: { bandwidth: 8MB/s, concurrency: 4 }
                """)
            let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
            var environment = bareEnvironment
            environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(proxy.port)"
            for _ in 0..<5 {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: hoist)
                process.arguments = ["run", "--quiet", manifest]
                process.environment = environment
                try process.run()
                usleep(UInt32.random(in: 600_000...1_500_000))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            try unthrottle(manifest, "8MB/s")   // the last run only finishes: at full speed
            let last = try runProcess(hoist, ["run", manifest], environment: environment)
            #expect(last.status == 0, "\(last.stderr)")
            #expect(try await FakeGCS.download(bucket: bucket, object: "big.bin") == patternData(20 << 20))
            for index in 0..<40 {
                #expect(try await FakeGCS.download(bucket: bucket, object: "small/f\(index).txt") == patternData(5000 + index))
            }
            // A status query made the server finalize a short object at least once; it was taken back.
            #expect(proxy.requests.contains { $0["method"] as? String == "DELETE" })
            // And nothing is left to do: the next run skips everything.
            let again = try runProcess(hoist, ["run", manifest], environment: environment)
            #expect(again.stdout.hasPrefix("test: 0 uploaded (0 B), 41 unchanged"), "\(again.stdout)")
        }
    }
}
