import Foundation
import HoistTestSupport
import Testing

/// `hoist watch` operated as a service: stopped by SIGTERM or killed mid-upload and
/// started again, told to reload its manifest, seen by `hoist status` and its metrics file. On
/// real inotify, the local bucket and gcp-storage-emulator (whose resumable sessions answer
/// status queries truthfully: fake-gcs-server finalizes a truncated object on any).
extension WatchTests {
    /// The JSON events of an event log file.
    func events(_ log: URL) -> [[String: Any]] {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// The events of `kind` for files whose path ends with `suffix`.
    func events(_ log: URL, _ kind: String, file suffix: String) -> [[String: Any]] {
        events(log).filter { $0["event"] as? String == kind && ($0["file"] as? String)?.hasSuffix(suffix) == true }
    }

    /// The most bytes a `progress` event of `suffix`'s upload has said sent.
    func sent(_ log: URL, file suffix: String) -> Int {
        events(log, "progress", file: suffix).compactMap { $0["completed"] as? Int }.max() ?? 0
    }

    /// The sources the journal holds done, as the next start reads it.
    func journaledDone(_ fixture: JobFixture) throws -> Set<String> {
        let journal = fixture.directory.url.appendingPathComponent("journal.sqlite").path
        let rows = try python("""
            import sqlite3
            c = sqlite3.connect('\(journal)')
            for (s,) in c.execute("SELECT source FROM file WHERE state = 'done'"): print(s)
            """)
        return Set(rows.split(separator: "\n").map(String.init))
    }

    /// Interrupts `watcher` with `signal` once `ready` holds: SIGTERM must end it with 0 within 10 s.
    func interrupt(_ watcher: StartedProcess, with signal: Int32, when ready: () -> Bool) throws {
        let underway = waitFor(seconds: 30, ready)
        if !underway { kill(watcher.pid, SIGKILL) }
        try #require(underway, "the upload never got under way: \(watcher.finish().output.suffix(800))")
        if signal == SIGTERM {
            _ = stop(watcher)
        } else {
            kill(watcher.pid, signal)
            _ = watcher.finish()
        }
    }

    /// A large file written while watched, its upload (to a local bucket) interrupted by SIGTERM
    /// or kill -9 halfway, then the watcher started again: the part file the bucket holds is
    /// continued, not sent anew; nothing the journal held done is uploaded again; nothing is lost.
    @Test(arguments: [SIGTERM, SIGKILL])
    func anUploadInterruptedInAPassContinuesAtTheNextStart(signal: Int32) throws {
        let fixture = try JobFixture()
        for index in 0..<5 { try fixture.file("small\(index).txt", 1000 + index) }
        let first = fixture.directory.url.appendingPathComponent("first.jsonl")
        let watcher = try startWatcher(fixture, settle: "300ms", extra: "upload: { bandwidth: 8MB/s }", arguments: ["--log-file", first.path])
        #expect(waitFor(seconds: 10) { (0..<5).allSatisfy { stored(fixture, "small\($0).txt") != nil } })
        let size = 24 << 20
        try patternData(size, seed: 4).write(to: source(fixture, "big.bin"))
        let uploads = fixture.directory.url.appendingPathComponent("bucket/.hoist/uploads").path
        let partSize = { () -> Int in
            let part = (try? FileManager.default.contentsOfDirectory(atPath: uploads))?.first { $0.hasSuffix(".part") }
            return part.flatMap { try? FileManager.default.attributesOfItem(atPath: uploads + "/" + $0)[.size] as? Int } ?? 0
        }
        try interrupt(watcher, with: signal) { sent(first, file: "/src/big.bin") >= 4 << 20 && partSize() >= 4 << 20 }
        let held = partSize()
        #expect(held >= 4 << 20 && held < size, "the bucket holds \(held) bytes of the interrupted upload")
        let done = try journaledDone(fixture)
        #expect(done.count == 6, "\(done)")

        // Started again at full speed: it only has to finish (at 8 MB/s that was a third of the test).
        try unthrottle(manifest(fixture), "8MB/s")
        let second = fixture.directory.url.appendingPathComponent("second.jsonl")
        let again = try StartedProcess(hoist, ["watch", "--log-file", second.path, manifest(fixture)])
        let finished = waitFor(seconds: 30) { stored(fixture, "big.bin")?.count == size }
        let output = stop(again)
        #expect(finished, "\(output.suffix(800))")
        #expect(stored(fixture, "big.bin") == patternData(size, seed: 4))
        let resume = events(second, "resume", file: "/src/big.bin").first
        #expect(resume?["continuing"] as? Bool == true, "\(events(second, "resume", file: "/src/big.bin"))")
        let firstProgress = events(second, "progress", file: "/src/big.bin").first?["completed"] as? Int ?? 0
        #expect(firstProgress >= held, "continued from \(firstProgress), the bucket held \(held)")
        let uploadedAgain = events(second).filter { $0["event"] as? String == "success" && done.contains($0["file"] as? String ?? "") }
        #expect(uploadedAgain.isEmpty, "\(uploadedAgain)")
        for index in 0..<5 { #expect(stored(fixture, "small\(index).txt") == patternData(1000 + index)) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: uploads) == [])
    }

    /// The same on gcp-storage-emulator, interrupted in the catch-up pass: the next start asks
    /// the server how much it holds and sends only the rest of the session it kept.
    @Test(arguments: [SIGTERM, SIGKILL])
    func anUploadInterruptedInTheCatchUpContinuesOnGCS(signal: Int32) async throws {
        let fixture = try JobFixture()
        for index in 0..<5 { try fixture.file("small\(index).txt", 1000 + index) }
        let size = 24 << 20
        try fixture.file("big.bin", size)
        let prefix = "watch-\(UUID().uuidString.prefix(8))"
        let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "4MB/s")
        let first = fixture.directory.url.appendingPathComponent("first.jsonl")
        let watcher = try StartedProcess(hoist, ["watch", "--log-file", first.path, job.manifest], environment: job.environment)
        try interrupt(watcher, with: signal) { sent(first, file: "/src/big.bin") >= 3 << 20 }
        let done = try journaledDone(fixture)

        try unthrottle(job.manifest, "4MB/s")   // started again at full speed: it only has to finish
        let second = fixture.directory.url.appendingPathComponent("second.jsonl")
        let again = try StartedProcess(hoist, ["watch", "--log-file", second.path, job.manifest], environment: job.environment)
        let deadline = Date().addingTimeInterval(30)
        var finished = false
        while !finished, Date() < deadline {
            finished = true
            for name in ["big.bin"] + (0..<5).map({ "small\($0).txt" }) where finished {
                finished = try await FakeGCS.exists(bucket: StorageEmulator.bucket, object: prefix + "/" + name, port: job.port)
            }
            if !finished { try await Task.sleep(for: .milliseconds(100)) }
        }
        let output = stop(again)
        #expect(finished, "\(output.suffix(800))")
        #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: prefix + "/big.bin", port: job.port) == patternData(size))
        for index in 0..<5 {
            #expect(try await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/small\(index).txt", port: job.port)
                        == patternData(1000 + index))
        }
        // The session was continued from what the server confirmed, not begun anew.
        let resumes = job.proxy.resumes
        #expect(resumes.contains { $0.confirmed > 0 && $0.start == $0.confirmed }, "\(resumes)")
        #expect(events(second, "resume", file: "/src/big.bin").first?["continuing"] as? Bool == true)
        let uploadedAgain = events(second).filter { $0["event"] as? String == "success" && done.contains($0["file"] as? String ?? "") }
        #expect(uploadedAgain.isEmpty, "\(uploadedAgain)")
    }

    /// SIGHUP reads the manifest again: a new destination applies to the full pass that follows
    /// and to later files; a manifest that no longer loads is said (file, line, column) and the
    /// one loaded stays.
    @Test func sighupReloadsTheManifestAndKeepsTheOldOneWhenTheNewOneIsBad() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "300ms")
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src, destination: 'new/{relpath}' }]
            watch: { settle: 300ms }
            """)
        kill(watcher.pid, SIGHUP)
        let moved = waitFor(seconds: 10) { stored(fixture, "new/ready.txt") == patternData(5) }
        let bad = "version: 1\nname: test\njournal: journal.sqlite\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src, destinaton: x }]\n"
        try bad.write(toFile: manifest(fixture), atomically: true, encoding: .utf8)
        kill(watcher.pid, SIGHUP)
        try patternData(300, seed: 8).write(to: source(fixture, "later.txt"))
        let later = waitFor(seconds: 10) { stored(fixture, "new/later.txt") == patternData(300, seed: 8) }
        let output = stop(watcher)
        #expect(moved, "\(output.suffix(800))")
        #expect(later, "\(output.suffix(800))")
        #expect(output.contains("was not reloaded, the manifest loaded stays"), "\(output.suffix(800))")
        #expect(output.contains("job.yaml:5:"), "\(output.suffix(800))")
        #expect(stored(fixture, "later.txt") == nil)
    }

    /// `hoist status` shows the watcher holding the job: its pid, since when, what waits to
    /// settle, its last upload; a forged state file naming another process is not believed.
    @Test func statusShowsTheWatchersState() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "30s")
        let state = fixture.directory.url.appendingPathComponent("journal.sqlite.watch")
        #expect(waitFor(seconds: 10) { (try? String(contentsOf: state, encoding: .utf8))?.contains("ready.txt") == true })
        try patternData(10).write(to: source(fixture, "waiting.txt"))
        #expect(waitFor(seconds: 10) { (try? String(contentsOf: state, encoding: .utf8))?.contains("\"queue\":1") == true })
        let status = try runProcess(hoist, ["status", manifest(fixture)])
        let output = stop(watcher)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("watcher: pid \(watcher.pid), watching since "), "\(status.stdout)\n\(output.suffix(500))")
        #expect(status.stdout.contains("1 file waiting to settle"), "\(status.stdout)")
        #expect(status.stdout.contains("last upload: \(source(fixture, "ready.txt").path)"), "\(status.stdout)")

        // Once it has stopped, the file names no live holder: no watcher is shown running.
        let after = try runProcess(hoist, ["status", manifest(fixture)])
        #expect(!after.stdout.contains("watcher: pid"), "\(after.stdout)")
        // A state file naming this test's process (alive, not the lock's holder) is not believed.
        try #"{"pid":\#(getpid()),"since":1,"queue":7}"#.write(to: state, atomically: true, encoding: .utf8)
        let forged = try runProcess(hoist, ["status", manifest(fixture)])
        #expect(!forged.stdout.contains("watcher: pid"), "\(forged.stdout)")
    }

    /// On a PostgreSQL journal the watcher keeps its state in the database: `hoist status` shows
    /// it while the watcher's session holds the job's lock, and no watcher once it stopped; a
    /// run of the job meanwhile says a watcher holds it.
    @Test func statusShowsTheWatchersStateFromAPostgreSQLJournal() throws {
        let url = try PostgresServer.shared().makeDatabase()
        let fixture = try JobFixture()
        try fixture.file("ready.txt", 5)
        let manifest = manifest(fixture)
        try """
            version: 1
            name: test
            journal: ${HOIST_PG}
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            watch: { settle: 30s }

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["HOIST_PG"] = url
        let watcher = try StartedProcess(hoist, ["watch", manifest], environment: environment)
        #expect(waitFor(seconds: 20) { stored(fixture, "ready.txt") == patternData(5) })
        try patternData(10).write(to: source(fixture, "waiting.txt"))
        var status = (status: Int32(0), stdout: "", stderr: "")
        let shown = waitFor(seconds: 10) {
            status = (try? runProcess(hoist, ["status", manifest], environment: environment)) ?? status
            return status.stdout.contains("1 file waiting to settle")
        }
        // A run of the job meanwhile (a cron run) is told a watcher holds it, and --wait does not wait.
        let run = try runProcess(hoist, ["run", "--wait", manifest], environment: environment)
        let output = stop(watcher)
        #expect(run.status == 2, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("test is being watched: a watcher (pid \(watcher.pid) on "), "\(run.stderr)")
        #expect(shown, "\(status.stdout)\(status.stderr)\n\(output.suffix(500))")
        #expect(status.stdout.contains("watcher: pid \(watcher.pid), watching since "), "\(status.stdout)")
        #expect(status.stdout.contains("last upload: \(source(fixture, "ready.txt").path)"), "\(status.stdout)")
        // Stopped: its session holds no lock, so its row is not believed.
        let after = try runProcess(hoist, ["status", manifest], environment: environment)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(!after.stdout.contains("watcher: pid"), "\(after.stdout)")
    }

    /// The metrics file is rewritten while watching (every 15 s), with the queue's length and
    /// the age of the oldest file waiting to settle.
    @Test func theMetricsFileIsRewrittenWhileWatching() throws {
        let fixture = try JobFixture()
        let metrics = fixture.directory.url.appendingPathComponent("hoist.prom")
        let watcher = try startWatcher(fixture, settle: "1m", maxWait: "5m", arguments: ["--metrics-file", metrics.path])
        try patternData(10).write(to: source(fixture, "waiting.txt"))
        let text = { (try? String(contentsOf: metrics, encoding: .utf8)) ?? "" }
        let written = waitFor(seconds: 25) { text().contains("hoist_watch_queue_files{job=\"test\"} 1\n") }
        let seen = text()
        let output = stop(watcher)
        #expect(written, "\(seen)\n\(output.suffix(500))")
        #expect(seen.contains("hoist_last_run_success{job=\"test\"} 1\n"), "\(seen)")
        let age = seen.split(separator: "\n").first { $0.hasPrefix("hoist_watch_oldest_unsettled_seconds{job=\"test\"} ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") } ?? -1
        #expect(age > 0 && age < 30, "\(seen)")
    }

    /// `on_settle(file)` is called for each settled file the job takes (its filters and
    /// template applied: not a hidden or excluded file), before that file's `before_upload`.
    @Test func onSettleHearsEachSettledFileTheJobTakesBeforeItsUpload() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "300ms", files: "[{ root: src, exclude: ['*.part'], destination: 'in/{relpath}' }]",
                                       extra: """
            hooks:
              - inline: |
                  function on_settle(file) log.info("settled " .. file.relpath .. " -> " .. file.destination .. " " .. file.size) end
                  function before_upload(file) log.info("before " .. file.relpath) end
            """, readyAs: "in/ready.txt")
        try patternData(1000, seed: 2).write(to: source(fixture, "scan.pdf.part"))
        try patternData(100, seed: 2).write(to: source(fixture, ".hidden.txt"))
        try FileManager.default.moveItem(at: source(fixture, "scan.pdf.part"), to: source(fixture, "scan.pdf"))
        let seen = waitFor(seconds: 10) { stored(fixture, "in/scan.pdf") == patternData(1000, seed: 2) }
        let output = stop(watcher)
        #expect(seen, "\(output.suffix(800))")
        let settled = output.range(of: "info: settled scan.pdf -> in/scan.pdf 1000\n")
        let before = output.range(of: "info: before scan.pdf\n")
        #expect(settled != nil && before != nil && settled!.lowerBound < before!.lowerBound, "\(output.suffix(1500))")
        #expect(!output.contains("settled .hidden.txt") && !output.contains("settled scan.pdf.part") && !output.contains("settled ready.txt"),
                "\(output.suffix(1500))")
    }

    /// A pass for settled files plans those files alone, through the set's filters and
    /// template: the tree's other files are not walked again (no `unchanged` among its counts),
    /// an excluded file is left out, and a file in a folder made since is found by a whole pass.
    @Test func aPassOfSettledFilesPlansThemAloneThroughTheFilters() throws {
        let fixture = try JobFixture()
        for index in 0..<20 { try fixture.file("old/f\(index).txt", 100 + index) }
        let watcher = try startWatcher(fixture, settle: "300ms", files: "[{ root: src, exclude: ['*.part'], destination: 'in/{relpath}' }]",
                                       arguments: [], readyAs: "in/ready.txt")
        #expect(waitFor(seconds: 10) { stored(fixture, "in/old/f19.txt") != nil })
        try patternData(500, seed: 3).write(to: source(fixture, "old/new.txt"))
        try patternData(500, seed: 4).write(to: source(fixture, "old/skip.part"))
        let seen = waitFor(seconds: 10) { stored(fixture, "in/old/new.txt") == patternData(500, seed: 3) }
        // A folder made since: a whole pass finds its file, written before the folder was watched or not.
        try FileManager.default.createDirectory(at: source(fixture, "made/later"), withIntermediateDirectories: true)
        try patternData(600, seed: 5).write(to: source(fixture, "made/later/deep.txt"))
        let deep = waitFor(seconds: 10) { stored(fixture, "in/made/later/deep.txt") == patternData(600, seed: 5) }
        let output = stop(watcher)
        #expect(seen && deep, "\(output.suffix(800))")
        #expect(stored(fixture, "in/old/skip.part") == nil)
        let ends = output.split(separator: "\n").compactMap { line -> [String: Any]? in
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  event["event"] as? String == "job_end" else { return nil }
            return event
        }
        // The catch-up walked 21 files; the pass for new.txt (with skip.part, excluded) planned two.
        #expect(ends.first?["uploaded"] as? Int == 21, "\(ends)")
        #expect(ends.contains { $0["uploaded"] as? Int == 1 && $0["unchanged"] as? Int == 0 && ($0["skipped"] as? Int ?? 9) <= 1 }, "\(ends)")
        #expect(successes(output, file: "/src/old/f3.txt") == 1)
    }
}

