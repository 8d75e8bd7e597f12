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
        let sidecar = try String(contentsOfFile: bucket.path + "/.hoist/meta/big.bin.json", encoding: .utf8)
        #expect(!sidecar.contains("X-Injected"), "\(sidecar)")
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
        metadata.customMetadata = ["k": "v"]
        _ = try await storage.reference(withPath: "a.txt").putDataAsync(Data("hello".utf8), metadata: metadata)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
        let sidecar = try FileManager.default.attributesOfItem(atPath: bucket.path + "/.hoist/meta/a.txt.json")
        #expect(sidecar[.type] as? FileAttributeType == .typeRegular)
        #expect(try await storage.reference(withPath: "a.txt").getMetadata().customMetadata == ["k": "v"])
    }

    /// A sidecar that links to another JSON file is not read as the object's metadata.
    @Test func aSymlinkedSidecarIsNotReadAsMetadata() async throws {
        let bucket = Bucket()
        let storage = bucket.storage
        _ = try await storage.reference(withPath: "a.txt").putDataAsync(Data("hello".utf8))
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
}
