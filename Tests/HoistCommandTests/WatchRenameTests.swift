import Foundation
import HoistHTTP
import HoistTestSupport
import Testing

/// `hoist watch` and renames: a file renamed within its root is stored under its new
/// name by a copy on the server of its earlier name's object, no byte sent, when that object
/// holds the file's bytes now; else it is uploaded. The earlier name's object goes only when the
/// set mirrors. On real inotify, the local bucket and fake-gcs-server (behind the fault proxy,
/// whose log shows every request and its body's length).
extension WatchTests {
    /// The `--json` events of `kind` in `output` for files whose path ends with `suffix`.
    func events(in output: String, _ kind: String, file suffix: String = "") -> [[String: Any]] {
        output.split(separator: "\n").compactMap { line -> [String: Any]? in
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  event["event"] as? String == kind else { return nil }
            return suffix.isEmpty || (event["file"] as? String)?.hasSuffix(suffix) == true ? event : nil
        }
    }

    static let renamedSize = 5 << 20

    /// A watcher whose catch-up stored `big.bin` (5 MiB) to the local bucket, then the file renamed.
    /// - Parameter prefix: where `files` stores them.
    /// - Parameter gone: the earlier name's object is awaited gone (a set that mirrors, whose window is 1 s).
    func renameWatched(files: String = "[{ root: src }]", prefix: String = "", to name: String = "photos/renamed.bin", change: Bool = false,
                       gone: Bool = false, extra: String = "") throws
        -> (fixture: JobFixture, output: String) {
        let fixture = try JobFixture()
        try fixture.file("big.bin", Self.renamedSize)
        // Renamed into a folder there from the start (a folder made owes a whole pass).
        try FileManager.default.createDirectory(at: source(fixture, "photos"), withIntermediateDirectories: true)
        let watcher = try startWatcher(fixture, settle: "300ms", window: "1s", files: files, extra: extra, readyAs: prefix + "ready.txt")
        #expect(waitFor(seconds: 20) { stored(fixture, prefix + "big.bin") == patternData(Self.renamedSize) })
        if change {
            // The same size, other bytes at the start: only a hash tells them apart.
            let handle = try FileHandle(forWritingTo: source(fixture, "big.bin"))
            try handle.write(contentsOf: Data(repeating: 0x55, count: 4096))
            try handle.close()
        }
        try FileManager.default.moveItem(at: source(fixture, "big.bin"), to: source(fixture, name))
        let seen = waitFor(seconds: 20) { stored(fixture, prefix + name)?.count == Self.renamedSize }
        // A second past the settle: an upload of it would have shown by now.
        usleep(1_000_000)
        if gone { #expect(waitFor(seconds: 10) { stored(fixture, prefix + "big.bin") == nil }) }
        let output = stop(watcher)
        #expect(seen, "\(output.suffix(800))")
        return (fixture, output)
    }

    @Test func aRenamedFileIsCopiedOnTheServerWithNoByteSent() throws {
        let (renamed, output) = try renameWatched(extra: """
            hooks:
              - inline: |
                  function on_copy(file) log.info("copied " .. file.relpath .. " from " .. file.from .. " " .. file.size) end
            """)
        #expect(output.contains("info: copied photos/renamed.bin from big.bin \(Self.renamedSize)"), "\(output.suffix(1500))")
        #expect(stored(renamed, "photos/renamed.bin") == patternData(Self.renamedSize))
        let copies = events(in: output, "copy", file: "/src/photos/renamed.bin")
        #expect(copies.count == 1 && copies.first?["from"] as? String == "big.bin", "\(output.suffix(1500))")
        #expect(copies.first?["size"] as? Int == Self.renamedSize)
        // No byte of it was sent: no progress or success of an upload, and the pass sent none.
        #expect(events(in: output, "progress", file: "/src/photos/renamed.bin").isEmpty)
        #expect(successes(output, file: "/src/photos/renamed.bin") == 0)
        let ends = events(in: output, "job_end")
        #expect(ends.contains { $0["copied"] as? Int == 1 && $0["bytes"] as? Int == 0 && $0["uploaded"] as? Int == 0 }, "\(ends)")
        // Without mirror, the earlier name's object stays.
        #expect(stored(renamed, "big.bin") == patternData(Self.renamedSize))
        // The journal holds the new name done: a run finds it unchanged.
        let run = try runProcess(hoist, ["run", "--json", manifest(renamed)])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(events(in: run.stdout, "job_end").first?["uploaded"] as? Int == 0, "\(run.stdout)")
    }

    @Test func aRenamedFileOfASetThatMirrorsIsCopiedAndItsEarlierNameDeleted() throws {
        let (fixture, output) = try renameWatched(files: "[{ root: src, mirror: true, destination: 'in/{relpath}' }]", prefix: "in/", gone: true)
        #expect(stored(fixture, "in/photos/renamed.bin") == patternData(Self.renamedSize))
        #expect(events(in: output, "copy", file: "/src/photos/renamed.bin").count == 1, "\(output.suffix(1500))")
        #expect(successes(output, file: "/src/photos/renamed.bin") == 0)
        let deletions = events(in: output, "delete").filter { $0["object"] as? String == "in/big.bin" }
        #expect(deletions.count == 1 && deletions.first?["outcome"] as? String == "deleted", "\(output.suffix(1500))")
        #expect(stored(fixture, "in/big.bin") == nil)
    }

    @Test func aFileChangedAsItWasRenamedIsUploaded() throws {
        let (fixture, output) = try renameWatched(change: true)
        var changed = patternData(Self.renamedSize)
        changed.replaceSubrange(0..<4096, with: Data(repeating: 0x55, count: 4096))
        #expect(stored(fixture, "photos/renamed.bin") == changed)
        #expect(events(in: output, "copy").isEmpty, "\(output.suffix(1500))")
        #expect(successes(output, file: "/src/photos/renamed.bin") == 1, "\(output.suffix(1500))")
        #expect(stored(fixture, "big.bin") == patternData(Self.renamedSize))
    }

    /// Renamed to a name whose content type is another (`.bin` to `.txt`): a copy would keep the
    /// earlier type, so it is uploaded, and stored with the new name's.
    @Test func aRenamedFileWhoseContentTypeChangesIsUploaded() throws {
        let (fixture, output) = try renameWatched(to: "photos/renamed.txt")
        #expect(events(in: output, "copy").isEmpty, "\(output.suffix(1500))")
        #expect(successes(output, file: "/src/photos/renamed.txt") == 1, "\(output.suffix(1500))")
        let bucket = fixture.directory.url.appendingPathComponent("bucket").path
        let metadata = LocalBucketFiles.attribute(of: "photos/renamed.txt", in: bucket) ?? LocalBucketFiles.sidecar(of: "photos/renamed.txt", in: bucket)
        #expect(metadata?["contentType"] as? String == "text/plain", "\(String(describing: metadata))")
    }

    /// A watcher of `src` into a new fake-gcs-server bucket through the fault proxy, once its
    /// catch-up stored `big.bin`.
    func startGCSWatcher(_ fixture: JobFixture, files: String, readyAs ready: String = "big.bin") async throws -> (watcher: StartedProcess, bucket: String, proxy: FaultProxy) {
        try fixture.file("big.bin", Self.renamedSize)
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), [])
        _ = try fixture.job("""
            storage: { url: 'gs://\(bucket)' }
            files: \(files)
            watch: { settle: 300ms, window: 1s }
            """)
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(proxy.port)"
        let watcher = try StartedProcess(hoist, ["watch", "--json", manifest(fixture)], environment: environment)
        let stored = await poll(seconds: 20) { try await FakeGCS.exists(bucket: bucket, object: ready) }
        if !stored { _ = stop(watcher) }
        try #require(stored, "the catch-up pass did not store \(ready)")
        return (watcher, bucket, proxy)
    }

    func poll(seconds: Double, _ condition: () async throws -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if (try? await condition()) == true { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return (try? await condition()) == true
    }

    /// The requests the proxy saw that send an object's bytes (uploads), and the bytes they carried.
    func uploadRequests(_ proxy: FaultProxy) -> (count: Int, bytes: Int) {
        let uploads = proxy.requests.filter { ($0["target"] as? String ?? "").contains("/upload/storage/") }
        return (uploads.count, uploads.reduce(0) { $0 + ($1["length"] as? Int ?? 0) })
    }

    @Test func aRenamedFileIsCopiedByCloudStorageAndItsEarlierNameDeletedWhenMirrored() async throws {
        let fixture = try JobFixture()
        let (watcher, bucket, proxy) = try await startGCSWatcher(fixture, files: "[{ root: src, mirror: true, destination: 'in/{relpath}' }]",
                                                                readyAs: "in/big.bin")
        let before = uploadRequests(proxy)
        try FileManager.default.moveItem(at: source(fixture, "big.bin"), to: source(fixture, "renamed.bin"))
        let copied = await poll(seconds: 20) { try await FakeGCS.exists(bucket: bucket, object: "in/renamed.bin") }
        let gone = await poll(seconds: 10) { try await !FakeGCS.exists(bucket: bucket, object: "in/big.bin") }
        try await Task.sleep(for: .seconds(1))
        let output = stop(watcher)
        #expect(copied && gone, "\(output.suffix(1500))")
        #expect(try await FakeGCS.download(bucket: bucket, object: "in/renamed.bin") == patternData(Self.renamedSize))
        let after = uploadRequests(proxy)
        #expect(before.bytes >= Self.renamedSize, "the catch-up sent \(before)")
        // Zero upload requests and bytes since the rename: one rewrite did it.
        #expect(after.count == before.count && after.bytes == before.bytes, "\(before) then \(after)")
        #expect(proxy.requests.contains { ($0["target"] as? String ?? "").contains("/rewriteTo/") }, "\(proxy.requests.suffix(10))")
        #expect(events(in: output, "copy", file: "/src/renamed.bin").first?["from"] as? String == "in/big.bin", "\(output.suffix(1500))")
    }

    /// The object replaced on the server with the same bytes after the journal recorded it (a new
    /// generation): the copy, conditional on the journal's generation, is refused and the file uploaded.
    @Test func aRenamedFileWhoseObjectChangedOnTheServerIsUploaded() async throws {
        let fixture = try JobFixture()
        let (watcher, bucket, proxy) = try await startGCSWatcher(fixture, files: "[{ root: src }]")
        // Another writer stores the same bytes again: the object's generation moves on.
        var request = HTTPRequest(method: "POST", url: "http://127.0.0.1:\(try FakeGCS.port())/upload/storage/v1/b/\(bucket)/o?uploadType=media&name=big.bin",
                                  headers: [("Content-Type", "application/octet-stream")])
        request.body = [.data(patternData(Self.renamedSize))]
        let response = try await CurlEngine.shared.perform(request)
        try #require(response.status == 200, "\(response.bodyText)")
        let before = uploadRequests(proxy)
        try FileManager.default.moveItem(at: source(fixture, "big.bin"), to: source(fixture, "renamed.bin"))
        let stored = await poll(seconds: 20) { try await FakeGCS.exists(bucket: bucket, object: "renamed.bin") }
        // The object is visible before the watcher has read the server's answer: its success comes after.
        try await Task.sleep(for: .seconds(1))
        let output = stop(watcher)
        #expect(stored, "\(output.suffix(1500))")
        #expect(try await FakeGCS.download(bucket: bucket, object: "renamed.bin") == patternData(Self.renamedSize))
        #expect(events(in: output, "copy").isEmpty, "\(output.suffix(1500))")
        #expect(successes(output, file: "/src/renamed.bin") == 1, "\(output.suffix(1500))")
        #expect(output.contains("changed on the server since the journal recorded it"), "\(output.suffix(1500))")
        #expect(uploadRequests(proxy).bytes - before.bytes >= Self.renamedSize)
        // No mirror: the earlier name's object stays.
        #expect(try await FakeGCS.exists(bucket: bucket, object: "big.bin"))
    }
}
