import Foundation
import HoistTestSupport
@testable import HoistStorage
import Testing

/// The local bucket reads back its own files (session descriptors, part files, sidecars): each
/// test plants what someone with write access to `.hoist/` could, and checks what a user would:
/// no byte written outside the bucket, no file a link points at changed, the upload still right.
@Suite struct LocalBucketAttackTests {
    struct Bucket {
        let folder = try! TemporaryDirectory()
        var path: String { folder.url.appendingPathComponent("bucket").path }
        var uploads: String { path + "/.hoist/uploads" }
        var storage: Storage { Storage(url: "file://" + path, backend: LocalBucket(directory: path)) }
    }

    /// Custom metadata over any file system's limit for an attribute's value (64 KiB): the
    /// object's metadata goes to a sidecar, the layout whose files these tests attack.
    static let inSidecar = ["k": "v", "big": String(repeating: "x", count: 70_000)]

    /// The red team's attack: a session descriptor whose `path` climbs out of the bucket made a
    /// resumed upload write its bytes there, journaled done.
    @Test func aSessionDescriptorWhosePathLeavesTheBucketIsNotResumed() async throws {
        let bucket = Bucket()
        let backend = LocalBucket(directory: bucket.path)
        let data = patternData(9 << 20, seed: 3)
        let session = try await backend.startUpload(to: "a.bin", attributes: ObjectResource(), size: Int64(data.count))
        let descriptor = bucket.uploads + "/\(session.id).json"
        var fields = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: descriptor))) as? [String: Any])
        #expect(fields["path"] as? String == "a.bin")
        for hostile in ["../../escaped/../ESCAPED.bin", "/tmp/ESCAPED.bin", ".hoist/meta/x.json", "a/../../ESCAPED.bin"] {
            fields["path"] = hostile
            try JSONSerialization.data(withJSONObject: fields).write(to: URL(fileURLWithPath: descriptor))
            await #expect(throws: StorageFailure.self, "\(hostile)") { _ = try await backend.resumeUpload(id: session.id) }
        }
        // The upload that names that session still stores its own object, and nothing else.
        let file = try bucket.folder.write("a.bin", data)
        let last = await EventRecorder(bucket.storage.reference(withPath: "a.bin").putFile(from: file, metadata: nil,
                                                                                          resumingSession: session.id)).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: bucket.path + "/a.bin")) == data)
        for escaped in [bucket.folder.url.deletingLastPathComponent().appendingPathComponent("ESCAPED.bin").path, "/tmp/ESCAPED.bin",
                        bucket.folder.path + "/ESCAPED.bin"] {
            #expect(!FileManager.default.fileExists(atPath: escaped), "\(escaped)")
        }
    }

    /// A descriptor naming another valid object of the bucket: the upload that resumes it
    /// would have stored its bytes there (and the journal said done for its own). Not resumed;
    /// a descriptor whose metadata holds a control character is not either.
    @Test(arguments: ["path", "contentType"])
    func aSessionDescriptorForAnotherObjectOrHeaderIsNotResumed(field: String) async throws {
        let bucket = Bucket()
        let backend = LocalBucket(directory: bucket.path)
        _ = try await bucket.storage.reference(withPath: "other.txt").putDataAsync(Data("keep me".utf8))
        let data = patternData(9 << 20, seed: 5)
        let session = try await backend.startUpload(to: "big.bin", attributes: ObjectResource(), size: Int64(data.count))
        let descriptor = bucket.uploads + "/\(session.id).json"
        var fields = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: descriptor))) as? [String: Any])
        if field == "path" {
            fields["path"] = "other.txt"
        } else {
            fields["attributes"] = ["contentType": "text/html\r\nX-Injected: yes"]
        }
        try JSONSerialization.data(withJSONObject: fields).write(to: URL(fileURLWithPath: descriptor))
        let file = try bucket.folder.write("big.bin", data)
        let last = await EventRecorder(bucket.storage.reference(withPath: "big.bin").putFile(from: file, metadata: nil,
                                                                                            resumingSession: session.id)).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: bucket.path + "/big.bin")) == data)
        #expect(try Data(contentsOf: URL(fileURLWithPath: bucket.path + "/other.txt")) == Data("keep me".utf8))
        let stored = try #require(LocalBucketFiles.attribute(of: "big.bin", in: bucket.path))
        #expect(!"\(stored)".contains("X-Injected"), "\(stored)")
    }

    /// A sidecar replaced by a link to a victim file: the victim was truncated and overwritten
    /// with the object's JSON. Whether each object is synced (the library) or the journal syncs
    /// them in batches (a job), the link is replaced, not followed.
    @Test(arguments: [true, false])
    func aSymlinkedMetadataSidecarIsReplacedNotFollowed(syncsEachObject: Bool) async throws {
        let bucket = Bucket()
        let victim = try bucket.folder.write("victim.txt", Data("precious\n".utf8))
        try FileManager.default.createDirectory(atPath: bucket.path + "/.hoist/meta", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/.hoist/meta/a.txt.json", withDestinationPath: victim.path)
        let backend = LocalBucket(directory: bucket.path)
        if !syncsEachObject { backend.deferPersistence() }
        let storage = Storage(url: "file://" + bucket.path, backend: backend)
        let metadata = StorageMetadata()
        metadata.customMetadata = Self.inSidecar
        _ = try await storage.reference(withPath: "a.txt").putDataAsync(Data("hello".utf8), metadata: metadata)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
        let sidecar = try FileManager.default.attributesOfItem(atPath: bucket.path + "/.hoist/meta/a.txt.json")
        #expect(sidecar[.type] as? FileAttributeType == .typeRegular)
        #expect(try await storage.reference(withPath: "a.txt").getMetadata().customMetadata == Self.inSidecar)
    }

    /// A sidecar that links to another JSON file is not read as the object's metadata.
    @Test func aSymlinkedSidecarIsNotReadAsMetadata() async throws {
        let bucket = Bucket()
        let storage = bucket.storage
        let metadata = StorageMetadata()
        metadata.customMetadata = Self.inSidecar
        _ = try await storage.reference(withPath: "a.txt").putDataAsync(Data("hello".utf8), metadata: metadata)
        let forged = try bucket.folder.write("forged.json", Data(#"{"name":"a.txt","size":"5","contentType":"text/x-forged"}"#.utf8))
        try FileManager.default.removeItem(atPath: bucket.path + "/.hoist/meta/a.txt.json")
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/.hoist/meta/a.txt.json", withDestinationPath: forged.path)
        #expect(try await storage.reference(withPath: "a.txt").getMetadata().contentType != "text/x-forged")
    }

    /// A resumed session's part file replaced by a link: its bytes would be appended to the
    /// victim. The session is not resumed through it; the upload starts again and succeeds.
    @Test func aSymlinkedPartFileIsNotWrittenThrough() async throws {
        let bucket = Bucket()
        let backend = LocalBucket(directory: bucket.path)
        let data = patternData(9 << 20, seed: 4)
        let session = try await backend.startUpload(to: "p.bin", attributes: ObjectResource(), size: Int64(data.count))
        let victim = try bucket.folder.write("victim.bin", Data("precious\n".utf8))
        try? FileManager.default.removeItem(atPath: bucket.uploads + "/\(session.id).part")
        try FileManager.default.createSymbolicLink(atPath: bucket.uploads + "/\(session.id).part", withDestinationPath: victim.path)
        await #expect(throws: StorageFailure.self) { _ = try await backend.resumeUpload(id: session.id) }
        let file = try bucket.folder.write("p.bin", data)
        let last = await EventRecorder(bucket.storage.reference(withPath: "p.bin").putFile(from: file, metadata: nil,
                                                                                          resumingSession: session.id)).finished()
        #expect(last.status == .success, "\(String(describing: last.error))")
        #expect(try Data(contentsOf: victim) == Data("precious\n".utf8))
        #expect(try Data(contentsOf: URL(fileURLWithPath: bucket.path + "/p.bin")) == data)
    }

    /// `.hoist/uploads` replaced by a link to another folder: nothing is written there.
    @Test func aBucketWhoseStateFolderIsALinkStoresNothingThrough() async throws {
        let bucket = Bucket()
        let elsewhere = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: bucket.path + "/.hoist", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bucket.uploads, withDestinationPath: elsewhere.path)
        let result = await EventRecorder(bucket.storage.reference(withPath: "big.bin")
            .putData(patternData(9 << 20))).finished()
        #expect(result.status == .failure)
        #expect((result.error as NSError?)?.localizedDescription.contains("symbolic link") == true, "\(String(describing: result.error))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
    }

    /// A folder outside the bucket holding `shadow` (a file someone else owns), and a sidecar
    /// forged for `PATH` with that file's size and generation `forged`.
    struct Outside {
        let folder = try! TemporaryDirectory()
        let bytes = Data("root:*:19000:0:99999:7:::\n".utf8)
        var shadow: String { folder.url.appendingPathComponent("shadow").path }
        static let forged: Int64 = 1_700_000_000_000_000

        init() throws { try bytes.write(to: URL(fileURLWithPath: shadow)) }

        /// Writes the forged sidecar of object `path` in `bucket` (its folders made as needed).
        func forgeSidecar(of path: String, in bucket: Bucket) throws {
            let sidecar = URL(fileURLWithPath: bucket.path + "/.hoist/meta/" + path + ".json")
            try FileManager.default.createDirectory(at: sidecar.deletingLastPathComponent(), withIntermediateDirectories: true)
            try ObjectResource(name: path, size: Int64(bytes.count), generation: Self.forged).jsonData().write(to: sidecar)
        }

        /// The outside file is there with its bytes, untouched.
        func expectUntouched(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect((try? Data(contentsOf: URL(fileURLWithPath: shadow))) == bytes, comment, sourceLocation: sourceLocation)
        }
    }

    /// An attack on the removal gate, found by a red team: `dir -> OUTSIDE` in the bucket's folder and a sidecar
    /// `dir/shadow.json` forged with the generation a mirror would delete. Removing
    /// `DIR/dir/shadow` by path followed the link: the file outside went. Now there is no object
    /// through a link: nothing is read, listed or removed there, and the link stays.
    @Test func aDeleteThroughALinkedFolderRemovesNothingOutsideTheBucket() async throws {
        let bucket = Bucket()
        let outside = try Outside()
        let backend = LocalBucket(directory: bucket.path)
        _ = try await bucket.storage.reference(withPath: "kept.txt").putDataAsync(Data("mine".utf8))
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/dir", withDestinationPath: outside.folder.path)
        try outside.forgeSidecar(of: "dir/shadow", in: bucket)

        await #expect(throws: StorageFailure.self) { _ = try await backend.metadata(of: "dir/shadow") }
        #expect(try await backend.deleteObject("dir/shadow", generation: Outside.forged) == .absent)
        outside.expectUntouched("deleteObject")
        try await backend.delete("dir/shadow", generation: Outside.forged)
        try await backend.delete("dir/shadow", generation: nil)
        outside.expectUntouched("delete")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: bucket.path + "/dir") == outside.folder.path)
        #expect(try await backend.list(prefix: "dir/", page: nil).objects.isEmpty)
        #expect(try await backend.list(prefix: "", page: nil).objects.map(\.path) == ["kept.txt"])
    }

    /// A link as the object itself (`alias -> OUTSIDE/shadow`), with a forged sidecar: it is no
    /// object; deleting it removes nothing, neither the file it points at nor the link.
    @Test func aDeleteOfALinkRemovesNeitherItNorWhatItPointsAt() async throws {
        let bucket = Bucket()
        let outside = try Outside()
        let backend = LocalBucket(directory: bucket.path)
        _ = try await bucket.storage.reference(withPath: "kept.txt").putDataAsync(Data("mine".utf8))
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/alias", withDestinationPath: outside.shadow)
        try outside.forgeSidecar(of: "alias", in: bucket)
        #expect(try await backend.deleteObject("alias", generation: Outside.forged) == .absent)
        try await backend.delete("alias", generation: nil)
        outside.expectUntouched()
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: bucket.path + "/alias") == outside.shadow)
    }

    /// The sidecars' folder `.hoist/meta/d` swapped for a link to a folder outside holding
    /// `f.txt.json`: deleting object `d/f.txt` removed that file too, and its metadata was read
    /// from there. Now the object goes and the file outside stays; the forged JSON is not read.
    @Test func aLinkedSidecarFolderIsNeitherReadNorRemovedThrough() async throws {
        let bucket = Bucket()
        let outside = try TemporaryDirectory()
        let storage = bucket.storage
        let backend = LocalBucket(directory: bucket.path)
        let metadata = StorageMetadata()
        metadata.customMetadata = Self.inSidecar
        _ = try await storage.reference(withPath: "d/f.txt").putDataAsync(Data("hello".utf8), metadata: metadata)
        let forged = Data(#"{"name":"d/f.txt","size":"5","contentType":"text/x-forged"}"#.utf8)
        try forged.write(to: outside.url.appendingPathComponent("f.txt.json"))
        try FileManager.default.removeItem(atPath: bucket.path + "/.hoist/meta/d")
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/.hoist/meta/d", withDestinationPath: outside.path)
        #expect(try await backend.metadata(of: "d/f.txt").contentType != "text/x-forged")
        try await backend.delete("d/f.txt", generation: nil)
        #expect(!FileManager.default.fileExists(atPath: bucket.path + "/d/f.txt"))
        #expect(try Data(contentsOf: outside.url.appendingPathComponent("f.txt.json")) == forged)
    }

    /// A listing of a prefix whose folder is reached through a link (`site/dir -> OUTSIDE`)
    /// listed the files outside, for `mirror: listed` to delete. It lists nothing there.
    @Test func aListingDoesNotFollowALinkToItsFolder() async throws {
        let bucket = Bucket()
        let outside = try Outside()
        try FileManager.default.createDirectory(at: outside.folder.url.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try outside.bytes.write(to: outside.folder.url.appendingPathComponent("sub/shadow"))
        let backend = LocalBucket(directory: bucket.path)
        _ = try await bucket.storage.reference(withPath: "site/kept.txt").putDataAsync(Data("mine".utf8))
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/site/dir", withDestinationPath: outside.folder.path)
        for prefix in ["site/dir/sub/", "site/dir/", "site/dir/sub/sh", "site/"] {
            #expect(try await backend.list(prefix: prefix, page: nil).objects.map(\.path) == (prefix == "site/" ? ["site/kept.txt"] : []),
                    "\(prefix)")
        }
    }

    /// A file put in the bucket by hand (no sidecar), read through the no-link walk: its
    /// generation is still its modification time in microseconds as Foundation gives it, to the
    /// microsecond, so a generation a journal recorded before still matches.
    @Test func aFilePutThereByHandKeepsItsGeneration() async throws {
        let bucket = Bucket()
        let file = try bucket.folder.write("bucket/by/hand.txt", Data("by hand".utf8))
        let backend = LocalBucket(directory: bucket.path)
        // Times where adding the nanoseconds in another order gives a microsecond less or more.
        for (seconds, nanoseconds) in [(1_700_023_757, 144_813), (1_700_934_442, 5_695_978), (1_701_140_336, 6_951_024),
                                       (1_701_219_526, 7_433_734), (1_701_425_420, 8_688_780), (1_700_000_000, 999_999_999)] {
            var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
            #expect(utimensat(AT_FDCWD, file.path, &times, 0) == 0)
            let modified = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date)
            let stored = try await backend.metadata(of: "by/hand.txt")
            #expect(stored.generation == Int64(modified.timeIntervalSince1970 * 1_000_000), "\(seconds).\(nanoseconds)")
            #expect(stored.size == 7)
        }
    }

    /// The walk without `openat2` (an old kernel, a seccomp filter): one `openat(O_NOFOLLOW)` a
    /// folder. A link on the way or at the end removes nothing; a file below real folders goes.
    @Test(arguments: [false, true])
    func theRootFoldersRemovalFollowsNoLinkEitherWay(walkingFolderByFolder: Bool) throws {
        let bucket = Bucket()
        let outside = try Outside()
        let real = try bucket.folder.write("bucket/a/b/real.txt", Data("real".utf8))
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/a/dir", withDestinationPath: outside.folder.path)
        try FileManager.default.createSymbolicLink(atPath: bucket.path + "/a/alias", withDestinationPath: outside.shadow)
        let root = try #require(RootFolder(bucket.path, walkingFolderByFolder: walkingFolderByFolder))
        #expect(try root.removeFile("a/dir/shadow") == .gone)
        #expect(try root.removeFile("a/alias") == .changed)
        #expect(root.status(of: "a/dir/shadow") == nil && root.contents(of: "a/dir/shadow", limit: 1 << 20) == nil)
        #expect(!root.holdsFolder("a/dir") && root.holdsFolder("a/b"))
        outside.expectUntouched()
        #expect(FileManager.default.fileExists(atPath: bucket.path + "/a/alias"))
        #expect(root.contents(of: "a/b/real.txt", limit: 1 << 20) == Data("real".utf8))
        #expect(try root.removeFile("a/b/real.txt") == .removed)
        #expect(!FileManager.default.fileExists(atPath: real.path))
    }
}
