import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// `move: true` and `removeEmptyFolders` (docs/manifest.md): a file goes only once its object is
/// stored, verified and recorded done, and only while it is the file that was read.
@Suite(.serialized) struct MoveTests {
    func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

    @Test func movedFilesAreInTheBucketByteForByteAndEmptiedFoldersGo() async throws {
        let fixture = try JobFixture()
        var files: [String: Int] = [:]
        for index in 0..<30 { files["logs/\(index % 3)/day\(index).log"] = 1000 + index * 37 }
        files["big/huge.log"] = 9 << 20   // a part-file upload, over 8 MiB
        for (path, size) in files { try fixture.file(path, size) }
        try FileManager.default.createDirectory(at: fixture.directory.url.appendingPathComponent("src/empty-before"),
                                                withIntermediateDirectories: true)
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src, destination: 'archive/{relpath}', move: true, removeEmptyFolders: true }]
            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(hoist, ["run", "--json", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        _ = try validateEvents(run.stdout)
        #expect(run.stdout.contains("\"moved\":31"), "\(run.stdout.suffix(400))")
        for (path, size) in files {
            #expect(!exists(fixture.directory.url.appendingPathComponent("src/" + path)), "\(path)")
            #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/archive/" + path)) == patternData(size))
        }
        // The folders moving emptied are gone; the root stays, and so does a folder that was
        // empty before (only folders that held moved files are removed).
        #expect(!exists(fixture.directory.url.appendingPathComponent("src/logs")))
        #expect(!exists(fixture.directory.url.appendingPathComponent("src/big")))
        #expect(exists(fixture.directory.url.appendingPathComponent("src")))
        #expect(exists(fixture.directory.url.appendingPathComponent("src/empty-before")))
    }

    /// A run killed after the journal recorded a file done but before its unlink: the next run
    /// removes it without uploading it again (here: a run without `move`, then one with it).
    @Test func aFileTheJournalHoldsDoneIsRemovedWithoutAnotherUpload() throws {
        let fixture = try JobFixture()
        try fixture.file("a.log", 100)
        try fixture.file("b.log", 200)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        #expect(try runProcess(hoist, ["run", manifest]).status == 0)
        // Changed after its upload: this one is uploaded again, then removed.
        try fixture.file("b.log", 250)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, move: true }]\n")
        let run = try runProcess(hoist, ["run", manifest])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("test: 1 uploaded (250 B), 1 unchanged, 2 moved in"), "\(run.stdout)")
        #expect(!exists(fixture.directory.url.appendingPathComponent("src/a.log")))
        #expect(!exists(fixture.directory.url.appendingPathComponent("src/b.log")))
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/b.log")) == patternData(250))
    }

    /// A file written to while it is uploaded is not removed: its upload fails (the file changed
    /// while it was read) or, changed after, the check before the unlink keeps it.
    @Test func aFileAppendedToDuringItsUploadIsKept() async throws {
        let fixture = try JobFixture()
        let size = 4 << 20
        let file = try fixture.file("growing.log", size)
        try fixture.file("still.log", 100)
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src, move: true }]
            upload: { bandwidth: 2MB/s, retries: 0 }
            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", "--json", manifest]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Appended to once its upload is under way (not after a fixed wait: a loaded machine may
        // not have opened the file yet).
        var said = readUntilUploadUnderway(output.fileHandleForReading, size: size)
        #expect(process.isRunning, "the upload was under way when the file grew: \(said)")
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("one more line\n".utf8))
        try handle.close()
        said += String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1, "\(said)")
        // Kept whole, appended line included; the other file moved.
        #expect(try Data(contentsOf: file) == patternData(size) + Data("one more line\n".utf8))
        #expect(!exists(fixture.directory.url.appendingPathComponent("src/still.log")))
        // The next run uploads it as it is now, then removes it.
        #expect(try runProcess(hoist, ["run", manifest]).status == 0)
        #expect(!exists(file))
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/growing.log"))
                == patternData(size) + Data("one more line\n".utf8))
    }

    /// A move whose root the job's user cannot remove files from (read-only to it: `nobody`
    /// here, as a unit under `ProtectSystem=strict` without the root writable) uploads every file
    /// and removes none: each unremovable file is a failure, said even with `-q`, and the run exits 1.
    @Test func aFileThatCannotBeRemovedFailsTheRunEvenQuietly() async throws {
        let fixture = try JobFixture()
        let file = try fixture.file("a.log", 300)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src, move: true }]\n")
        let folder = fixture.directory.url
        // The job's folder is writable to the user (journal, bucket); the root is read-only to it.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: folder.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: folder.appendingPathComponent("src").path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.appendingPathComponent("src").path) }
        // root removes any file: run as nobody, as the unit's user would be.
        let arguments = ["run", "-q", folder.appendingPathComponent("job.yaml").path]
        let run = getuid() == 0
            ? try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", hoist] + arguments,
                             environment: ["HOME": folder.path, "PATH": "/usr/bin:/bin"])
            : try runProcess(hoist, arguments)
        #expect(try Data(contentsOf: folder.appendingPathComponent("bucket/a.log")) == patternData(300))
        #expect(try Data(contentsOf: file) == patternData(300))
        #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
        let said = (run.stdout + run.stderr).split(separator: "\n")
        #expect(said.contains { $0.contains(file.path) && $0.contains("cannot remove it: Permission denied") }, "\(run.stdout)\(run.stderr)")
    }

    /// `kill -9` at random moments of move runs on gcp-storage-emulator: after every kill, each
    /// file that is gone has its object, byte for byte; the last run leaves no file and every object.
    @Test func killedMoveRunsNeverLoseAFile() async throws {
        try await ExclusiveTests.shared.run { try await killLoop() }
    }

    func killLoop() async throws {
        let fixture = try JobFixture()
        var files: [String: Int] = [:]
        for index in 0..<60 { files["d\(index % 4)/f\(index).log"] = 20_000 + index * 1001 }
        files["big/a.log"] = 3 << 20   // resumable (the threshold is 1 MiB)
        files["big/b.log"] = 2 << 20
        for (path, size) in files { try fixture.file(path, size) }
        let prefix = "move-\(UUID().uuidString.prefix(8))"
        let job = try EmulatorJob(fixture, prefix: prefix, bandwidth: "2MB/s", files: ", move: true, removeEmptyFolders: true",
                                  upload: ", concurrency: 4")
        /// Each file that is gone has its object, byte for byte; how many are gone.
        func checkNothingLost() async throws -> Int {
            var gone = 0
            for (path, size) in files where !exists(fixture.directory.url.appendingPathComponent("src/" + path)) {
                gone += 1
                let stored = try? await FakeGCS.download(bucket: StorageEmulator.bucket, object: "\(prefix)/\(path)", port: job.port)
                #expect(stored == patternData(size), "\(path) is gone without its object")
            }
            return gone
        }
        var goneAfterKills: [Int] = []
        for _ in 0..<10 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: hoist)
            process.arguments = ["run", "--quiet", job.manifest]
            process.environment = job.environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32.random(in: 150_000...900_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            goneAfterKills.append(try await checkNothingLost())
        }
        print("move kill loop: files gone after each kill: \(goneAfterKills)")
        // The kills fell while files were being moved, not all before or after.
        #expect(goneAfterKills.contains { $0 > 0 && $0 < files.count })
        try unthrottle(job.manifest, "2MB/s")   // the last run only finishes: at full speed
        let last = try runProcess(hoist, ["run", job.manifest], environment: job.environment)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try await checkNothingLost() == files.count)
        for path in files.keys { #expect(!exists(fixture.directory.url.appendingPathComponent("src/" + path)), "\(path)") }
        #expect(!exists(fixture.directory.url.appendingPathComponent("src/d0")))
        #expect(exists(fixture.directory.url.appendingPathComponent("src")))
    }
}
