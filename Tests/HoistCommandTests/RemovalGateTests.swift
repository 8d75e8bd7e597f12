import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import Testing

/// Nothing is removed on Hoist's word alone. Each scenario here lost data before the
/// removal gate (`RemovalGate`): a file `move` removed whose bytes were stored nowhere, objects
/// `mirror` deleted that were not its own or whose files were not gone. Run through `hoist run`
/// as a user meets them, checked on the bucket through the server's own API.
@Suite(.serialized) struct RemovalGateTests {
    typealias Move = MirrorTests.Setup

    func move(_ target: MirrorTarget, set: String = "", upload: String = "") async throws -> Move {
        try await MirrorTests.setUp(target, files: [:], fileSet: "move: true" + set, upload: upload)
    }

    /// The `remove` events of a `--json` run (checked against the event schema).
    func removeEvents(_ output: String) throws -> [[String: Any]] { try MirrorTests.events("remove", in: output) }

    /// A new file at a path moved earlier, with other bytes but the same size and mtime (a tar
    /// extracted, `rsync -t`, a camera's reset clock): uploaded, then removed; before, it was
    /// "unchanged", removed, and the object still held the first version.
    @Test(arguments: MirrorTarget.allCases)
    func aNewFileWithAMovedOnesSizeAndMtimeIsUploadedBeforeItGoes(target: MirrorTarget) async throws {
        let job = try await move(target)
        let mtime = Date(timeIntervalSince1970: 1_700_000_000)
        try job.write("cam/IMG_0001.jpg", patternData(5000), mtime: mtime)
        let first = try job.run()
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        #expect(!job.hasFile("src/cam/IMG_0001.jpg"))
        let second = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        try job.write("cam/IMG_0001.jpg", second, mtime: mtime)
        let run = try job.run(["--json"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(!job.hasFile("src/cam/IMG_0001.jpg"))
        #expect(try await job.bytes("cam/IMG_0001.jpg") == second, "the object holds the second file's bytes")
        let removed = try removeEvents(run.stdout)
        #expect(removed.count == 1)
        #expect(removed.first?["evidence"] as? String == "uploaded", "\(removed)")
        #expect(removed.first?["object"] as? String == "cam/IMG_0001.jpg")
    }

    /// Files the journal holds done (uploaded by the job before it moved, or by a run killed
    /// before its unlink), one of whose objects was deleted from the bucket since (a lifecycle
    /// rule, an operator): that file is uploaded again before it goes; the other is removed on
    /// its object's word read now ("verified"). A moved file put back as it was (`cp -p`) is
    /// uploaded again (the journal marks it moved, not done), never removed as unchanged.
    @Test(arguments: MirrorTarget.allCases)
    func aFileWhoseObjectWasDeletedIsUploadedAgainBeforeItGoes(target: MirrorTarget) async throws {
        let job = try await move(target)
        let text = try String(contentsOfFile: job.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "move: true", with: "move: false").write(toFile: job.manifest, atomically: true, encoding: .utf8)
        let mtime = Date(timeIntervalSince1970: 1_700_000_000)
        try job.write("a.log", patternData(3000), mtime: mtime)
        try job.write("b.log", patternData(4000), mtime: mtime)
        #expect(try job.run().status == 0)
        try await job.bucket.reference(withPath: "a.log").delete()
        #expect(try await job.bytes("a.log") == nil)
        try text.write(toFile: job.manifest, atomically: true, encoding: .utf8)
        let run = try job.run(["--json"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(!job.hasFile("src/a.log") && !job.hasFile("src/b.log"))
        #expect(try await job.bytes("a.log") == patternData(3000), "a copy exists: the object")
        let evidence = Dictionary(try removeEvents(run.stdout).map { ($0["object"] as? String ?? "", $0["evidence"] as? String ?? "") },
                                  uniquingKeysWith: { a, _ in a })
        #expect(evidence == ["a.log": "uploaded", "b.log": "verified"], "\(run.stdout)")
        // Put back after it was moved, its object deleted: uploaded, then removed.
        try await job.bucket.reference(withPath: "b.log").delete()
        try job.write("b.log", patternData(4000), mtime: mtime)
        let again = try job.run(["--json"])
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        #expect(!job.hasFile("src/b.log"))
        #expect(try await job.bytes("b.log") == patternData(4000))
        #expect(try removeEvents(again.stdout).map { $0["evidence"] as? String } == ["uploaded"])
    }

    /// A file rewritten in place while it uploads, its mtime put back: the size and mtime the
    /// walk saw, but not the ctime. It is not removed; the next run stores its new bytes whole.
    @Test func aFileRewrittenDuringItsUploadWithItsMtimePutBackIsKept() async throws {
        let job = try await move(.local, upload: ", bandwidth: 2MB/s, retries: 0")
        let size = 4 << 20
        let mtime = Date(timeIntervalSince1970: 1_700_000_000)
        try job.write("data.bin", patternData(size), mtime: mtime)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--json", job.manifest]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Rewritten once the upload is under way: a `progress` event with some bytes sent.
        let seen = readUntilUploadUnderway(output.fileHandleForReading, size: size)
        #expect(process.isRunning, "the upload was under way when the file was rewritten: \(seen)")
        let rewritten = Data(repeating: 0x5A, count: size)
        let handle = try FileHandle(forWritingTo: job.fixture.directory.url.appendingPathComponent("src/data.bin"))
        try handle.write(contentsOf: rewritten)
        try handle.close()
        try FileManager.default.setAttributes([.modificationDate: mtime], ofItemAtPath: job.fixture.directory.url.appendingPathComponent("src/data.bin").path)
        _ = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(job.hasFile("src/data.bin"), "the file's only whole copy")
        #expect(try Data(contentsOf: job.fixture.directory.url.appendingPathComponent("src/data.bin")) == rewritten)
        // The next run: whatever the first left, the object ends byte-exact and the file goes.
        let text = try String(contentsOfFile: job.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: ", bandwidth: 2MB/s", with: "").write(toFile: job.manifest, atomically: true, encoding: .utf8)
        let next = try job.run()
        #expect(next.status == 0, "\(next.stdout)\(next.stderr)")
        #expect(!job.hasFile("src/data.bin"))
        #expect(try await job.bytes("data.bin") == rewritten)
    }

    /// Two files a template maps to one object (`logs/{name}`): the run stops at the collision
    /// before either is removed; later, a file at another path is never written over an object
    /// the journal records as another file's upload.
    @Test func twoFilesForOneObjectLoseNeither() async throws {
        let job = try await move(.local, set: ", destination: 'logs/{name}'")
        let mtime = Date(timeIntervalSince1970: 1_700_000_000)
        try job.write("d1/x.log", patternData(1000), mtime: mtime)
        try job.write("d2/x.log", patternData(2000), mtime: mtime)
        for _ in 0..<20 { try job.write("d0/f\(UUID().uuidString.prefix(6)).log", patternData(100), mtime: mtime) }
        let collided = try job.run()
        #expect(collided.status != 0, "\(collided.stdout)")
        #expect(collided.stderr.contains("both go to 'logs/x.log'"), "\(collided.stderr)")
        #expect(job.hasFile("src/d1/x.log") && job.hasFile("src/d2/x.log"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: job.fixture.directory.url.appendingPathComponent("src/d0").path).count == 20, "nothing removed in that run")
        // d2's file taken away for now: d1's is moved.
        try FileManager.default.moveItem(at: job.fixture.directory.url.appendingPathComponent("src/d2"), to: job.fixture.directory.url.appendingPathComponent("d2-aside"))
        let moved = try job.run()
        #expect(moved.status == 0, "\(moved.stdout)\(moved.stderr)")
        #expect(!job.hasFile("src/d1/x.log"))
        #expect(try await job.bytes("logs/x.log") == patternData(1000))
        // d2's comes back: refused, kept, and d1's bytes stay in the bucket.
        try FileManager.default.moveItem(at: job.fixture.directory.url.appendingPathComponent("d2-aside"), to: job.fixture.directory.url.appendingPathComponent("src/d2"))
        let refused = try job.run()
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stderr.contains("d1/x.log's upload (the journal): not overwritten"), "\(refused.stderr)")
        #expect(job.hasFile("src/d2/x.log"))
        #expect(try await job.bytes("logs/x.log") == patternData(1000))
    }

    /// Found by attack: a local bucket's object overwritten with other bytes of the
    /// same size, its sidecar left: the object's bytes are hashed, not the sidecar's checksum
    /// believed; and a compressed file is never removed on the journal's word of what its object
    /// was made from. Both are uploaded again before they go.
    @Test func aLocalObjectOverwrittenInPlaceAndACompressedFileAreUploadedAgainBeforeTheyGo() async throws {
        for compressed in [false, true] {
            let job = try await move(.local, set: compressed ? ", compress: gzip" : "")
            let text = try String(contentsOfFile: job.manifest, encoding: .utf8)
            try text.replacingOccurrences(of: "move: true", with: "move: false").write(toFile: job.manifest, atomically: true, encoding: .utf8)
            try job.write("a.txt", Data("precious original\n".utf8), mtime: Date(timeIntervalSince1970: 1_700_000_000))
            #expect(try job.run().status == 0)
            if !compressed {
                try Data("garbage garbage!!\n".utf8).write(to: job.fixture.directory.url.appendingPathComponent("bucket/a.txt"))
            }
            try text.write(toFile: job.manifest, atomically: true, encoding: .utf8)
            let run = try job.run(["--json"])
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            #expect(try removeEvents(run.stdout).map { $0["evidence"] as? String } == ["uploaded"], "compressed: \(compressed)")
            let stored = try #require(try await job.bytes("a.txt"))
            #expect(compressed ? stored.count > 0 : stored == Data("precious original\n".utf8))
        }
    }

    /// Found by attack: the objects of moved files are their only copies. A mirror
    /// set's listing does not take one for a stray (here under a prefix spelled with `//`, which
    /// object names fold), and a job changed from `move` to `mirror` does not take the moved
    /// files for files that are gone.
    @Test func aMovedFilesObjectIsNeverAMirrorsToDelete() async throws {
        let job = try await move(.local, set: ", destination: 'site//archive/{name}'")
        try job.write("app.log.1", Data("the only copy of this log\n".utf8), mtime: Date())
        let manifest = try String(contentsOfFile: job.manifest, encoding: .utf8)
        try manifest.replacingOccurrences(of: "files: [{ root: src, move: true, destination: 'site//archive/{name}' }]", with: """
            files:
              - { root: src, move: true, destination: 'site//archive/{name}' }
              - { root: site, destination: 'site/{relpath}', mirror: listed }
            """).write(toFile: job.manifest, atomically: true, encoding: .utf8)
        for name in ["index.html", "a.css"] {
            let url = job.fixture.directory.url.appendingPathComponent("site/" + name)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(name.utf8).write(to: url)
        }
        let first = try job.run()
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        #expect(!job.hasFile("src/app.log.1"))
        let second = try job.run(["--json"])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        #expect(try MirrorTests.events("delete", in: second.stdout).isEmpty, "\(second.stdout)")
        #expect(try await job.bytes("site/archive/app.log.1") == Data("the only copy of this log\n".utf8))

        // The same job, its set changed from move to mirror: the moved file is not "gone".
        let other = try await move(.local, set: ", destination: 'archive/{name}'")
        for name in ["a.log", "b.log"] { try other.write(name, Data(name.utf8), mtime: Date()) }
        #expect(try other.run().status == 0)
        #expect(!other.hasFile("src/a.log"))
        let text = try String(contentsOfFile: other.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "move: true", with: "mirror: true")
            .replacingOccurrences(of: "concurrency: 8", with: "concurrency: 8, maxDelete: 100%")
            .write(toFile: other.manifest, atomically: true, encoding: .utf8)
        for name in ["c.log", "d.log"] { try other.write(name, Data(name.utf8), mtime: Date()) }
        let mirrored = try other.run(["--json"])
        #expect(mirrored.status == 0, "\(mirrored.stdout)\(mirrored.stderr)")
        #expect(try MirrorTests.events("delete", in: mirrored.stdout).isEmpty, "\(mirrored.stdout)")
        for name in ["a.log", "b.log"] { #expect(try await other.bytes("archive/" + name) == Data(name.utf8)) }
    }

    // MARK: mirror

    func mirror(_ target: MirrorTarget, files: [String: Int], upload: String = "", storage: String? = nil) async throws -> Move {
        try await MirrorTests.setUp(target, files: files, fileSet: "destination: 'site/{relpath}', mirror: true", upload: upload, storage: storage)
    }

    /// A root that is a mount point whose volume is not mounted (an empty folder), no
    /// `maxDelete`: nothing deleted, exit 1, and why; before, every object went, exit 0.
    @Test func anEmptyRootTheJournalHeldFilesInDeletesNothing() async throws {
        let files = Dictionary(uniqueKeysWithValues: (0..<10).map { ("f\($0).txt", 100 + $0) })
        let job = try await mirror(.local, files: files)
        #expect(try job.run().status == 0)
        for name in files.keys { try job.removeFile(name) }
        let run = try job.run()
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("is empty, but the journal records 10 objects stored from it"), "\(run.stderr)")
        for name in files.keys { #expect(try await job.bytes("site/" + name) != nil, "\(name)") }
        // A mount point holding what the set leaves out (a hidden `.keep`, `lost+found`) is as empty.
        let root = job.fixture.directory.url.appendingPathComponent("src")
        try Data().write(to: root.appendingPathComponent(".keep"))
        try FileManager.default.createDirectory(at: root.appendingPathComponent("lost+found"), withIntermediateDirectories: true)
        let text = try String(contentsOfFile: job.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "concurrency: 8", with: "concurrency: 8, maxDelete: 100%")
            .write(toFile: job.manifest, atomically: true, encoding: .utf8)
        let kept = try job.run()
        #expect(kept.status == 1, "\(kept.stdout)\(kept.stderr)")
        #expect(kept.stderr.contains("is empty, but the journal records 10 objects stored from it"), "\(kept.stderr)")
        for name in files.keys { #expect(try await job.bytes("site/" + name) != nil, "\(name)") }
    }

    /// A root on another file system than when the job last mirrored it (`st_dev`: a volume
    /// gone, the mount point's own folder holding a stale copy): nothing deleted, exit 1, and
    /// why; `--force` (uploading everything again) takes the new file system for the root's.
    @Test func aRootOnAnotherFileSystemDeletesNothing() async throws {
        let files = Dictionary(uniqueKeysWithValues: (0..<6).map { ("f\($0).txt", 100 + $0) })
        let job = try await mirror(.local, files: files)
        #expect(try job.run().status == 0)
        let root = job.fixture.directory.url.appendingPathComponent("src").path
        let journal = try SQLiteJournal(path: job.fixture.directory.url.appendingPathComponent("journal.sqlite").path)
        let device = try #require(try journal.rootDevice(root), "the run recorded its root's file system")
        try journal.recordRoot(root, device: device &+ 1)
        try job.removeFile("f0.txt")
        let run = try job.run()
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("is on another file system than when this job last mirrored it"), "\(run.stderr)")
        #expect(try await job.bytes("site/f0.txt") != nil)
        let forced = try job.run(["--force"])
        #expect(forced.status == 0, "\(forced.stdout)\(forced.stderr)")
        #expect(try await job.bytes("site/f0.txt") == nil)
        #expect(try journal.rootDevice(root) == device)
    }

    /// Without `upload.maxDelete` a run deletes at most half of the objects the journal records
    /// (refused: its own outcome, exit 1); `maxDelete: 100%` lifts it.
    @Test func withoutMaxDeleteAtMostHalfTheObjectsGo() async throws {
        let files = Dictionary(uniqueKeysWithValues: (0..<8).map { ("f\($0).txt", 100 + $0) })
        let job = try await mirror(.local, files: files)
        #expect(try job.run().status == 0)
        for index in 0..<5 { try job.removeFile("f\(index).txt") }
        let refused = try job.run(["--json"])
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        let end = try #require(try MirrorTests.events("job_end", in: refused.stdout).last)
        #expect(end["deleteRefused"] as? Int == 5, "\(end)")
        #expect(end["failed"] as? Int == 0, "a refusal is not a failed file: \(end)")
        let said = try job.run()
        #expect(said.status == 1)
        #expect(said.stdout.contains("5 deletions refused by maxDelete"), "\(said.stdout)")
        #expect(said.stderr.contains("more than half of the 8 the journal records"), "\(said.stderr)")
        #expect(!said.stderr.contains("invalidArgument"), "\(said.stderr)")
        let status = try runProcess(hoist, ["status", job.manifest], environment: job.environment)
        #expect(status.stdout.contains("failed") && status.stdout.contains("0 failed, 0 B") && status.stdout.contains(": 5 deletions refused by maxDelete"),
                "\(status.stdout)")
        for index in 0..<8 { #expect(try await job.bytes("site/f\(index).txt") != nil) }
        let text = try String(contentsOfFile: job.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "concurrency: 8", with: "concurrency: 8, maxDelete: 100%")
            .write(toFile: job.manifest, atomically: true, encoding: .utf8)
        let allowed = try job.run()
        #expect(allowed.status == 0, "\(allowed.stdout)\(allowed.stderr)")
        for index in 0..<5 { #expect(try await job.bytes("site/f\(index).txt") == nil) }
        for index in 5..<8 { #expect(try await job.bytes("site/f\(index).txt") == patternData(100 + index)) }
    }

    /// A hostile listing (moto behind the fault proxy): keys repeated ten times do not inflate
    /// what `maxDelete: 10%` is taken of, and a listing whose page token never changes ends,
    /// deleting nothing.
    @Test func aHostileListingNeitherInflatesTheLimitNorRunsForEver() async throws {
        for mode in ["repeat", "endless"] {
            let server = S3TestServer.moto
            let name = try await server.makeBucket()
            let proxy = try FaultProxy(upstreamPort: try server.port(), ["--listing", mode])
            let files = Dictionary(uniqueKeysWithValues: (0..<10).map { ("f\($0).txt", 100 + $0) })
            let job = try await mirror(.moto, files: files, upload: ", maxDelete: 10%", storage: """
                { url: 's3://\(name)', endpoint: 'http://127.0.0.1:\(proxy.port)', region: us-east-1, pathStyle: true }
                """)
            let bucket = try s3Storage(server, bucket: name)
            #expect(try job.run().status == 0)
            let text = try String(contentsOfFile: job.manifest, encoding: .utf8)
            try text.replacingOccurrences(of: "mirror: true", with: "mirror: listed").write(toFile: job.manifest, atomically: true, encoding: .utf8)
            for index in 0..<6 { _ = try await bucket.reference(withPath: "site/stray\(index).txt").putDataAsync(Data("stray".utf8)) }
            let started = Date()
            let run = try job.run()
            #expect(Date().timeIntervalSince(started) < 60, "\(mode)")
            #expect(run.status == 1, "\(mode): \(run.stdout)\(run.stderr)")
            for index in 0..<6 {
                #expect(try await server.storedBytes(bucket: name, key: "site/stray\(index).txt") != nil, "\(mode): nothing deleted")
            }
        }
    }
}

extension MirrorTests.Setup {
    func hasFile(_ path: String) -> Bool { FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent(path).path) }

    /// Writes `data` at `path` below the root with the modification time `mtime`.
    func write(_ path: String, _ data: Data, mtime: Date) throws {
        let url = fixture.directory.url.appendingPathComponent("src/" + path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
        try FileManager.default.setAttributes([.modificationDate: mtime], ofItemAtPath: url.path)
    }
}
