import Foundation
import HoistTestSupport
import Testing

/// `hoist watch` on real inotify and the local bucket: the binary started as a child
/// process, files changed beside it, the bucket polled with a deadline, then SIGTERM.
@Suite(.serialized) struct WatchTests {
    /// A watcher of `fixture`'s `src` into `bucket`, once its catch-up pass has stored a first
    /// file (its folders are watched before that pass begins).
    /// - Parameters: files: the manifest's file sets; extra: more of the manifest; arguments: more
    ///   of the command line; object: where `files` stores ready.txt.
    func startWatcher(_ fixture: JobFixture, settle: String, maxWait: String = "1m", window: String = "1m", files: String = "[{ root: src }]",
                      extra: String = "", arguments: [String] = [], readyAs object: String = "ready.txt",
                      environment: [String: String]? = nil) throws -> StartedProcess {
        try fixture.file("ready.txt", 5)
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: \(files)
            watch: { settle: \(settle), maxWait: \(maxWait), window: \(window) }
            """ + (extra.isEmpty ? "" : "\n" + extra))
        let watcher = try StartedProcess(hoist, ["watch", "--json"] + arguments + [manifest(fixture)], environment: environment)
        let ready = waitFor(seconds: 20) { stored(fixture, object) == patternData(5) }
        if !ready { _ = stop(watcher) }
        try #require(ready, "the catch-up pass did not store ready.txt")
        return watcher
    }

    func manifest(_ fixture: JobFixture) -> String { fixture.directory.url.appendingPathComponent("job.yaml").path }

    func stored(_ fixture: JobFixture, _ object: String) -> Data? {
        try? Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/" + object))
    }

    func source(_ fixture: JobFixture, _ path: String) -> URL { fixture.directory.url.appendingPathComponent("src/" + path) }

    /// Polls `condition` every 20 ms until it holds or `seconds` pass.
    func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// SIGTERM, then the watcher must exit 0 within 10 s: its output (JSON events and stderr).
    func stop(_ watcher: StartedProcess) -> String {
        let started = Date()
        kill(watcher.pid, SIGTERM)
        let end = watcher.finish(within: 10)
        #expect(end.ended, "still running 10 s after SIGTERM")
        #expect(end.status == 0, "\(end.output.suffix(600))")
        #expect(Date().timeIntervalSince(started) < 10)
        return end.output
    }

    /// The `success` events of `--json` output for files whose path ends with `suffix`.
    func successes(_ output: String, file suffix: String) -> Int {
        output.split(separator: "\n").filter { line in
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
            return event["event"] as? String == "success" && (event["file"] as? String)?.hasSuffix(suffix) == true
        }.count
    }

    /// How many `success` events `--json` output has for each file.
    func successesByFile(_ output: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in output.split(separator: "\n") where line.contains("\"success\"") {
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  event["event"] as? String == "success", let file = event["file"] as? String else { continue }
            counts[file, default: 0] += 1
        }
        return counts
    }

    @Test func aFileWrittenAndClosedIsStoredWithinSettleAndTwoSeconds() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "300ms")
        let written = Date()
        try patternData(1000, seed: 3).write(to: source(fixture, "new.bin"))
        let seen = waitFor(seconds: 10) { stored(fixture, "new.bin") == patternData(1000, seed: 3) }
        let latency = Date().timeIntervalSince(written)
        let output = stop(watcher)
        #expect(seen, "\(output.suffix(600))")
        #expect(latency < 0.3 + 2, "stored \(latency) s after it was closed")
        #expect(successes(output, file: "/src/new.bin") == 1)
    }

    @Test func aFileWrittenInPiecesIsUploadedOnceWithItsFinalBytes() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "1s")
        let whole = patternData(50_000, seed: 9)
        let path = source(fixture, "pieces.log")
        try Data().write(to: path)
        let handle = try FileHandle(forWritingTo: path)
        // Ten pieces over about 2 s, the file open throughout (a writer that keeps it open).
        for piece in 0..<10 {
            try handle.write(contentsOf: whole[(piece * 5000)..<((piece + 1) * 5000)])
            usleep(200_000)
        }
        try handle.close()
        let seen = waitFor(seconds: 10) { stored(fixture, "pieces.log") == whole }
        // A second past the settle: a pass for a piece would have shown by now.
        _ = waitFor(seconds: 1.5) { false }
        let output = stop(watcher)
        #expect(seen, "\(output.suffix(600))")
        #expect(successes(output, file: "/src/pieces.log") == 1, "\(output.suffix(1500))")
    }

    @Test func writeThenRenameStoresTheFinalNameOnly() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "300ms")
        try patternData(2000, seed: 5).write(to: source(fixture, "report.pdf.partial"))
        try FileManager.default.moveItem(at: source(fixture, "report.pdf.partial"), to: source(fixture, "report.pdf"))
        let seen = waitFor(seconds: 10) { stored(fixture, "report.pdf") == patternData(2000, seed: 5) }
        let output = stop(watcher)
        #expect(seen, "\(output.suffix(600))")
        #expect(stored(fixture, "report.pdf.partial") == nil)
        #expect(successes(output, file: "/src/report.pdf.partial") == 0)
        #expect(successes(output, file: "/src/report.pdf") == 1)
    }

    @Test func aFolderTreeMadeAfterTheStartIsWatchedAndUploaded() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "300ms")
        try FileManager.default.createDirectory(at: source(fixture, "a/b/c"), withIntermediateDirectories: true)
        try patternData(700, seed: 1).write(to: source(fixture, "a/b/c/deep.txt"))
        let first = waitFor(seconds: 10) { stored(fixture, "a/b/c/deep.txt") == patternData(700, seed: 1) }
        // And the new folders are watched: a later file in the deepest one is seen too.
        try patternData(800, seed: 2).write(to: source(fixture, "a/b/c/later.txt"))
        let later = waitFor(seconds: 10) { stored(fixture, "a/b/c/later.txt") == patternData(800, seed: 2) }
        let output = stop(watcher)
        #expect(first && later, "\(output.suffix(600))")
    }

    @Test func aRunOfTheJobWhileItIsWatchedExitsTwo() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "300ms")
        let run = try runProcess(hoist, ["run", manifest(fixture)])
        // --wait does not wait for a watcher, which never lets go by itself.
        let waiting = try StartedProcess(hoist, ["run", "--wait", manifest(fixture)])
        let waited = waiting.finish(within: 10)
        let output = stop(watcher)
        #expect(waited.ended && waited.status == 2, "\(waited.output)")
        #expect(waited.output.contains("a watcher (pid \(watcher.pid)) holds the job"), "\(waited.output)")
        #expect(run.status == 2, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("test is being watched: a watcher (pid \(watcher.pid)) holds the job"), "\(run.stderr)")
        #expect(output.contains("test: watching 1 folder"), "\(output.suffix(600))")
        // Let go: the next run takes the job.
        #expect(try runProcess(hoist, ["run", manifest(fixture)]).status == 0)
    }

    @Test func aFileThatSettlesIsNotHeldBackByOneThatKeepsChanging() throws {
        let fixture = try JobFixture()
        let watcher = try startWatcher(fixture, settle: "1s")
        let log = source(fixture, "app.log")
        try Data().write(to: log)
        let handle = try FileHandle(forWritingTo: log)
        var written: Date?
        var photoStored: Date?
        // The log appended to every 200 ms for 6 s, open throughout; the photo written once, 1 s in.
        for tick in 0..<30 {
            try handle.write(contentsOf: Data("line \(tick)\n".utf8))
            if tick == 5 {
                try patternData(3000, seed: 4).write(to: source(fixture, "photo.jpg"))
                written = Date()
            }
            if photoStored == nil, stored(fixture, "photo.jpg") == patternData(3000, seed: 4) { photoStored = Date() }
            usleep(200_000)
        }
        try handle.close()
        let logStored = waitFor(seconds: 10) { stored(fixture, "app.log").map { String(decoding: $0, as: UTF8.self) }?.hasSuffix("line 29\n") == true }
        let output = stop(watcher)
        let latency = written.flatMap { closed in photoStored.map { $0.timeIntervalSince(closed) } }
        #expect(latency.map { $0 < 1 + 1 } == true, "photo.jpg stored \(latency.map { "\($0) s" } ?? "not") after it was closed, while the log was written: \(output.suffix(600))")
        #expect(logStored, "\(output.suffix(600))")
        #expect(successes(output, file: "/src/photo.jpg") == 1)
    }

    @Test func aBurstOf50000FilesOverflowingTheQueueIsStoredExactlyOnce() throws {
        let fixture = try JobFixture(inMemory: true)
        // The test switch: the first read of events after the catch-up waits 4 s (the queue, 16,384 records by default, overflows).
        var environment = ProcessInfo.processInfo.environment
        environment["HOIST_TEST_WATCH_PAUSE"] = "4"
        let watcher = try startWatcher(fixture, settle: "300ms", environment: environment)
        let count = 50_000
        let folder = fixture.directory.url.appendingPathComponent("src").path
        let started = Date()
        for index in 0..<count {
            let descriptor = open(folder + "/b-\(index)", O_CREAT | O_WRONLY | O_TRUNC, 0o644)
            try #require(descriptor >= 0)
            var bytes = Array("\(index)\n".utf8)
            #expect(write(descriptor, &bytes, bytes.count) == bytes.count)
            close(descriptor)
        }
        let created = Date().timeIntervalSince(started)
        let bucket = fixture.directory.url.appendingPathComponent("bucket").path
        func storedCount() -> Int { ((try? FileManager.default.contentsOfDirectory(atPath: bucket)) ?? []).filter { $0.hasPrefix("b-") }.count }
        var all = false
        let deadline = Date().addingTimeInterval(90)
        while !all, Date() < deadline {
            usleep(500_000)
            all = storedCount() == count
        }
        let stored = Date().timeIntervalSince(started)
        // A second past the settle: a pass storing a file again would have shown by now.
        usleep(1_300_000)
        let output = stop(watcher)
        let parsing = Date()
        let counts = successesByFile(output).filter { ($0.key as NSString).lastPathComponent.hasPrefix("b-") }
        print("burst: \(count) files made in \(created) s, all stored \(stored) s after the first; "
              + "the output (\(output.utf8.count) bytes) read in \(Date().timeIntervalSince(parsing)) s")
        #expect(all, "\(storedCount()) of \(count) stored: \(output.suffix(600))")
        #expect(output.contains("the kernel dropped file events (its queue overflowed): a full pass follows"), "\(output.suffix(600))")
        #expect(counts.count == count, "\(counts.count) files uploaded")
        #expect(counts.values.allSatisfy { $0 == 1 }, "uploaded more than once: \(counts.filter { $0.value > 1 }.keys.sorted().prefix(5))")
        // The bytes of one from the start, the middle and the end of the burst.
        for index in [0, count / 2, count - 1] {
            #expect((try? String(contentsOfFile: bucket + "/b-\(index)", encoding: .utf8)) == "\(index)\n")
        }
    }
}
