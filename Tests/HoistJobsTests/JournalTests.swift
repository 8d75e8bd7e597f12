import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import Testing

/// The journal and cron features, through the `hoist` command as cron would run it.
@Suite struct JournalTests {
    func run(_ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProcess(hoist, arguments, environment: environment)
    }

    /// Starts `hoist run --quiet MANIFEST` and kills it with SIGKILL once `ready` holds (or after 20 s).
    func runAndKill(_ manifest: String, when ready: () -> Bool) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--quiet", manifest]
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !ready() { usleep(20_000) }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Starts `hoist` and kills it with SIGKILL after a random number of microseconds in `after`.
    func runAndKill(_ arguments: [String], environment: [String: String]? = nil, after: ClosedRange<UInt32>) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(UInt32.random(in: after))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    @Test func incrementalRuns() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        let b = try fixture.file("b.txt", 200)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path

        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 2 uploaded (300 B) in"))
        // Nothing changed: nothing goes up, and plan says why.
        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 0 uploaded (0 B), 2 unchanged in"))
        #expect(try run(["plan", manifest]).stdout.contains("skip    b.txt (unchanged since the last upload)"))
        // A touched file goes up again; so does everything with --force.
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 5)], ofItemAtPath: b.path)
        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 1 uploaded (200 B), 1 unchanged in"))
        #expect(try run(["run", "--force", manifest]).stdout.hasPrefix("test: 2 uploaded (300 B) in"))
        // New metadata is a change too.
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, metadata: { cacheControl: no-cache } }]\n")
        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 2 uploaded (300 B) in"))

        let status = try run(["status", manifest])
        #expect(status.status == 0)
        #expect(status.stdout.contains("files: 2 uploaded, 0 pending, 0 failed"))
        #expect(status.stdout.components(separatedBy: " ok ").count - 1 == 5)
    }

    @Test func remoteCheckAsksTheServerInsteadOfTrustingTheJournal() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        try fixture.file("b.txt", 100)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        #expect(try run(["run", manifest]).status == 0)
        // Someone deletes an object behind the journal's back.
        try FileManager.default.removeItem(at: fixture.directory.url.appendingPathComponent("bucket/a.txt"))
        #expect(try run(["run", manifest]).stdout.hasPrefix("test: 0 uploaded (0 B), 2 unchanged in"))
        #expect(try run(["run", "--remote-check", manifest]).stdout.hasPrefix("test: 1 uploaded (100 B), 1 unchanged in"))
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/a.txt")) == patternData(100))
    }

    /// A large file half-written to a local bucket when its run was killed is continued by the
    /// next run from the bytes the bucket holds: its `resume` event says it continues a session,
    /// its first progress is past that offset, and no part file is left.
    @Test func aKilledLargeUploadToALocalBucketContinues() throws {
        let fixture = try JobFixture()
        let size = 24 << 20
        try fixture.file("big.bin", size)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 8MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let uploads = fixture.directory.url.appendingPathComponent("bucket/.hoist/uploads").path
        let partSize = { () -> Int in
            let part = (try? FileManager.default.contentsOfDirectory(atPath: uploads))?.first { $0.hasSuffix(".part") }
            return part.flatMap { try? FileManager.default.attributesOfItem(atPath: uploads + "/" + $0)[.size] as? Int } ?? 0
        }
        try runAndKill(manifest) { partSize() >= 4 << 20 }
        let held = partSize()
        #expect(held >= 4 << 20 && held < size, "\(held)")

        let again = try run(["run", "--json", manifest])
        #expect(again.status == 0, "\(again.stderr)")
        _ = try validateEvents(again.stdout)
        let events = again.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        let resume = events.first { $0["event"] as? String == "resume" }
        #expect(resume?["continuing"] as? Bool == true, "\(again.stdout)")
        let firstProgress = events.first { $0["event"] as? String == "progress" }?["completed"] as? Int ?? 0
        #expect(firstProgress > held, "\(again.stdout)")
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/big.bin")) == patternData(size))
        #expect(try FileManager.default.contentsOfDirectory(atPath: uploads) == [])
    }

    /// Small uploads to a local bucket are written to unnamed files (`O_TMPFILE`), so a run
    /// killed while they are open leaves nothing behind: no part file, no partial object, and
    /// the next run uploads every file. (Named part files of large uploads and of file systems
    /// without unnamed files are cleared by the sweep: VerificationTests.)
    @Test func aKilledRunsSmallUploadsLeaveNothing() throws {
        let fixture = try JobFixture()
        var sources: [String: Data] = [:]
        for index in 0..<6 { sources["s\(index).bin"] = try Data(contentsOf: fixture.file("s\(index).bin", 3_000_000)) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 4MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        let uploads = bucket.appendingPathComponent(".hoist/uploads").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--quiet", manifest]
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        var seen: [String] = []
        while Date() < deadline, seen.count < 2 { seen = openFiles(of: process.processIdentifier, under: uploads).map(\.path); usleep(20_000) }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(seen.count >= 2 && seen.allSatisfy { $0.hasPrefix(uploads + "/#") && $0.hasSuffix(" (deleted)") }, "\(seen)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: uploads) == [])
        for (name, data) in sources {
            let object = bucket.appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: object.path) { #expect(try Data(contentsOf: object) == data, "\(name)") }
        }

        try unthrottle(manifest, "4MB/s")   // the next run only finishes: at full speed
        let again = try run(["run", manifest])
        #expect(again.status == 0 && again.stdout.hasPrefix("test: 6 uploaded"), "\(again.stdout)\(again.stderr)")
        for (name, data) in sources { #expect(try Data(contentsOf: bucket.appendingPathComponent(name)) == data, "\(name)") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: uploads) == [])
    }

    @Test func runsNeverOverlap() throws {
        let fixture = try JobFixture()
        try fixture.file("slow.bin", 4_000_000)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 2MB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let first = Process()
        first.executableURL = URL(fileURLWithPath: hoist)
        first.arguments = ["run", "--quiet", manifest]
        try first.run()
        let lock = fixture.directory.url.appendingPathComponent("journal.sqlite.lock").path
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, ((try? String(contentsOfFile: lock, encoding: .utf8)) ?? "").isEmpty { usleep(20_000) }

        let started = Date()
        let second = try run(["run", manifest])
        #expect(second.status == 2)
        #expect(second.stderr == "hoist: test is already running (pid \(first.processIdentifier)); use --wait to wait for it\n")
        #expect(Date().timeIntervalSince(started) < 1.5)

        let waited = try run(["run", "--wait", manifest])
        #expect(waited.status == 0)
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)
        #expect(waited.stdout.hasPrefix("test: 0 uploaded (0 B), 1 unchanged in"))
    }

    @Test func corruptJournalGivesTheWayBack() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: journal))
        let broken = try run(["run", manifest])
        #expect(broken.status == 2)
        #expect(broken.stderr.contains("the journal \(journal) is damaged"), "\(broken.stderr)")
        #expect(broken.stderr.contains("To start over, move it aside (mv \(journal) \(journal).bad)"))
        try FileManager.default.moveItem(atPath: journal, toPath: journal + ".bad")
        #expect(try run(["run", manifest]).status == 0)
    }

    @Test func cronLinesAndMetrics() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nschedule: '*/10 * * * *'\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let cron = try run(["cron", manifest])
        #expect(cron.status == 0)
        #expect(cron.stdout == "# test\n*/10 * * * * \(hoist) run --quiet \(manifest)\n")

        let metrics = fixture.directory.url.appendingPathComponent("hoist.prom").path
        #expect(try run(["run", "--quiet", "--metrics-file", metrics, manifest]).status == 0)
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("hoist_last_run_success{job=\"test\"} 1\n"))
        #expect(text.contains("hoist_last_run_files{job=\"test\",outcome=\"uploaded\"} 1\n"))
        #expect(text.contains("# TYPE hoist_last_run_bytes gauge\nhoist_last_run_bytes{job=\"test\"} 10\n"))

        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let unscheduled = try run(["cron", manifest])
        #expect(unscheduled.status == 2)
        #expect(unscheduled.stderr.contains("no schedule"))
    }

    /// Twenty `kill -9`s at random moments of a large upload to gcp-storage-emulator, each
    /// followed by a run that resumes from the offset the server confirms.
    @Test func killLoopOnALargeUpload() async throws {
        try await ExclusiveTests.shared.run { try await killLoop() }
    }

    func killLoop() async throws {
        let fixture = try JobFixture()
        let size = 48 << 20
        try fixture.file("big.bin", size)
        let prefix = "kill-\(UUID().uuidString.prefix(8))"
        let object = prefix + "/big.bin"
        let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "3MB/s")
        let (port, proxy, manifest, environment) = (job.port, job.proxy, job.manifest, job.environment)
        var kills = 0
        var resumedFrom: [Int] = []
        while kills < 20 {
            try runAndKill(["run", "--quiet", manifest], environment: environment, after: 250_000...900_000)
            kills += 1
        }
        // The last run only finishes what the killed ones left: at full speed (at 3 MB/s it was
        // half of the test's time).
        try unthrottle(manifest, "3MB/s")
        let last = try runProcess(hoist, ["run", manifest], environment: environment)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: object, port: port) == patternData(size))

        // Each resumed run asked the server first and went on from exactly what it held.
        let log = proxy.log
        var resent = 0
        for resume in proxy.resumes {
            #expect(resume.start == resume.confirmed)
            resumedFrom.append(resume.start)
        }
        let forwarded = log.filter { ($0["event"] as? String == "partial" || $0["event"] as? String == "answer") && $0["method"] as? String == "PUT" }
            .compactMap { $0["forwarded"] as? Int }.reduce(0, +)
        resent = forwarded - size
        print("kill loop: \(kills) kills, \(resumedFrom.count) resumes from the server's offset, \(resent) bytes sent twice in all, "
              + "\(kills > 0 ? resent / kills : 0) per interruption")
        #expect(resumedFrom.count >= 10)
        #expect(resumedFrom.filter { $0 > 0 }.count >= 10)
        // At most one piece per interruption is sent again (what was in flight when the process died).
        #expect(resent <= kills * (1 << 20))
    }

    /// A tree of small files, killed repeatedly: nothing lost, nothing uploaded again after its
    /// success was journaled (journal writes are batched: what counts is the committed `done` row).
    @Test func killLoopOnManySmallFiles() throws {
        let fixture = try JobFixture(inMemory: true)
        for index in 0..<300 { try fixture.file("d\(index % 10)/f\(index).txt", 2000 + index) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 4, bandwidth: 200KB/s }\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        let events = fixture.directory.url.appendingPathComponent("events.jsonl")
        /// The files the journal holds done, as the next run will read it.
        func journaledDone() throws -> Set<String> {
            guard FileManager.default.fileExists(atPath: journal) else { return [] }
            let rows = try python("""
                import sqlite3
                c = sqlite3.connect('\(journal)')
                # A run killed while it made the journal may leave it without its tables: nothing done.
                if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'file'").fetchone():
                    for (d,) in c.execute("SELECT destination FROM file WHERE state = 'done'"): print(d)
                """)
            return Set(rows.split(separator: "\n").map(String.init))
        }
        /// The objects a run's events report uploaded (each run logs to a fresh file).
        func successes() throws -> [String] {
            let text = (try? String(contentsOf: events, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(at: events)
            return text.split(separator: "\n").compactMap { line in
                guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      event["event"] as? String == "success" else { return nil }
                return event["object"] as? String
            }
        }
        var uploadedAgain: [String] = []
        var done = Set<String>()
        for run in 0..<7 {
            if run < 6 {
                try runAndKill(["run", "--quiet", "--log-file", events.path, manifest], after: 200_000...600_000)
            } else {
                try unthrottle(manifest, "200KB/s")   // the last run only finishes: at full speed
                let final = try runProcess(hoist, ["run", "--log-file", events.path, manifest])
                #expect(final.status == 0, "\(final.stderr)")
                // The last run uploaded only what the killed ones had not finished.
                #expect(!final.stdout.hasPrefix("test: 300 uploaded"))
            }
            uploadedAgain += try successes().filter { done.contains($0) }
            done = try journaledDone()
        }
        // Nothing lost: every file is in the bucket, byte for byte, and journaled done.
        for index in 0..<300 {
            let path = "d\(index % 10)/f\(index).txt"
            #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/" + path)) == patternData(2000 + index))
        }
        #expect(done.count == 300)
        // Nothing the journal held done was uploaded again.
        #expect(uploadedAgain.isEmpty, "\(uploadedAgain)")
    }
}
