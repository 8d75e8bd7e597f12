import Foundation
import HoistTestSupport
@testable import HoistStorage
import Testing

/// One inode per object: a local bucket keeps an object's metadata in its file's extended
/// attribute `user.hoist.object`, a sidecar only for an object whose metadata the file system
/// does not take; a bucket of sidecars (the layout before) is read, overwritten and deleted
/// from alike; an attribute is read as hostile input, as a sidecar is.
@Suite struct LocalBucketLayoutTests {
    let folder = try! TemporaryDirectory()
    var path: String { folder.url.appendingPathComponent("bucket").path }

    /// Every regular file below the bucket's folder (its state included), sorted.
    func files() -> [String] {
        let walker = FileManager.default.enumerator(atPath: path)
        var found: [String] = []
        while let relative = walker?.nextObject() as? String {
            if walker?.fileAttributes?[.type] as? FileAttributeType == .typeRegular { found.append(relative) }
        }
        return found.sorted()
    }

    func put(_ backend: LocalBucket, _ object: String, _ data: Data, metadata: [String: String]? = nil) async throws -> StorageMetadata {
        let storage = Storage(url: "file://" + path, backend: backend)
        let attributes = StorageMetadata()
        attributes.customMetadata = metadata
        return try await storage.reference(withPath: object).putDataAsync(data, metadata: attributes)
    }

    /// Writes object `object` as the layout before this one did: the file, and its resource's
    /// JSON in `.hoist/meta/<object>.json` (bucket, name, size, checksums, generation, times, type).
    func writeSidecarObject(_ object: String, _ data: Data, generation: Int64) throws {
        let file = URL(fileURLWithPath: path + "/" + object)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
        var sums = Checksums()
        sums.update(data)
        let stamp = Date(timeIntervalSince1970: Double(generation / 1000) / 1000)
        let resource = ObjectResource(
            bucket: "bucket", name: object, size: Int64(data.count), md5Hash: sums.md5Base64(), crc32c: sums.crc32cBase64(),
            generation: generation, metageneration: 1, timeCreated: stamp, updated: stamp, contentType: "text/x-sidecar")
        let sidecar = URL(fileURLWithPath: path + "/.hoist/meta/" + object + ".json")
        try FileManager.default.createDirectory(at: sidecar.deletingLastPathComponent(), withIntermediateDirectories: true)
        try resource.jsonData().write(to: sidecar)
    }

    /// Sets the object file's attribute to `value`, as anyone who may write the file could.
    func forgeAttribute(_ object: String, _ value: String) throws {
        let descriptor = open(path + "/" + object, O_WRONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        #expect(try ExtendedAttribute.set(LocalBucket.metadataAttribute, to: Array(value.utf8), on: descriptor) == .set)
    }

    @Test func anObjectIsOneFileWithItsMetadataInItsAttribute() async throws {
        let backend = LocalBucket(directory: path)
        let stored = try await put(backend, "a/b.txt", Data("hello".utf8), metadata: ["team": "web"])
        #expect(files() == ["a/b.txt"])
        let attribute = try #require(LocalBucketFiles.attribute(of: "a/b.txt", in: path))
        #expect(attribute["generation"] as? String == String(stored.generation))
        #expect(attribute["md5Hash"] as? String == stored.md5Hash)
        #expect(attribute["metadata"] as? [String: String] == ["team": "web"])
        let read = try await backend.metadata(of: "a/b.txt")
        #expect(read.generation == stored.generation && read.metadata == ["team": "web"] && read.size == 5)
        #expect(backend.notes.isEmpty)
        #expect(try await backend.deleteObject("a/b.txt", generation: stored.generation) == .deleted)
        #expect(files().isEmpty)
    }

    /// Metadata the file system does not take as an attribute goes to that object's sidecar,
    /// and only that object's: over 64 KiB everywhere, over about 4 KiB on ext4 (one block per
    /// inode). Each reads back whole; the run is told once.
    @Test func metadataTheFileSystemRefusesGoesToThatObjectsSidecar() async throws {
        let backend = LocalBucket(directory: path)
        backend.deferPersistence()
        let huge = ["big": String(repeating: "h", count: 70_000)]
        let large = ["big": String(repeating: "l", count: 8_000)]
        let first = try await put(backend, "d/huge.txt", Data("one".utf8), metadata: huge)
        let second = try await put(backend, "d/large.txt", Data("two".utf8), metadata: large)
        let small = try await put(backend, "d/small.txt", Data("three".utf8), metadata: ["k": "v"])
        #expect(LocalBucketFiles.attribute(of: "d/huge.txt", in: path) == nil)
        #expect(LocalBucketFiles.sidecar(of: "d/huge.txt", in: path)?["generation"] as? String == String(first.generation))
        // Where the file system took 8 KiB (tmpfs) it is the attribute, where not (ext4) the sidecar: never both.
        let largeInAttribute = LocalBucketFiles.attribute(of: "d/large.txt", in: path) != nil
        #expect(largeInAttribute != (LocalBucketFiles.sidecar(of: "d/large.txt", in: path) != nil))
        #expect(LocalBucketFiles.attribute(of: "d/small.txt", in: path) != nil)
        #expect(LocalBucketFiles.sidecar(of: "d/small.txt", in: path) == nil)
        for (object, stored, metadata) in [("d/huge.txt", first, huge), ("d/large.txt", second, large), ("d/small.txt", small, ["k": "v"])] {
            let read = try await backend.metadata(of: object)
            #expect(read.generation == stored.generation && read.metadata == metadata, "\(object)")
        }
        #expect(backend.notes.count == 1)
        #expect(backend.notes.first?.contains("d/huge.txt") == true, "\(backend.notes)")
        // Overwritten with small metadata: the attribute speaks, and the sidecar is gone.
        let again = try await put(backend, "d/huge.txt", Data("one again".utf8))
        #expect(LocalBucketFiles.sidecar(of: "d/huge.txt", in: path) == nil)
        #expect(try await backend.metadata(of: "d/huge.txt").generation == again.generation)
        #expect(try await backend.deleteObject("d/large.txt", generation: second.generation) == .deleted)
        #expect(!files().contains { $0.hasSuffix("large.txt.json") || $0 == "d/large.txt" })
    }

    /// A bucket written before (a sidecar per object) is read, listed, overwritten and deleted
    /// from; a removal still goes only at the generation its sidecar says, and takes the sidecar.
    @Test func aBucketOfSidecarsIsReadOverwrittenAndDeletedFrom() async throws {
        try writeSidecarObject("site/old.txt", Data("old bytes".utf8), generation: 1_700_000_000_000_001)
        try writeSidecarObject("site/kept.txt", Data("kept".utf8), generation: 1_700_000_000_000_002)
        try writeSidecarObject("top.txt", Data("top".utf8), generation: 1_700_000_000_000_003)
        let backend = LocalBucket(directory: path)
        let old = try await backend.metadata(of: "site/old.txt")
        #expect(old.generation == 1_700_000_000_000_001 && old.contentType == "text/x-sidecar" && old.size == 9)
        let listed = try await backend.list(prefix: "", page: nil).objects
        #expect(listed.map(\.path) == ["site/kept.txt", "site/old.txt", "top.txt"])
        #expect(listed.map(\.generation) == [1_700_000_000_000_002, 1_700_000_000_000_001, 1_700_000_000_000_003])

        // Overwritten: the new object's attribute speaks, its old sidecar goes.
        let new = try await put(backend, "site/old.txt", Data("new".utf8))
        #expect(new.generation != 1_700_000_000_000_001)
        #expect(LocalBucketFiles.sidecar(of: "site/old.txt", in: path) == nil)
        #expect(try await backend.metadata(of: "site/old.txt").generation == new.generation)
        #expect(try await backend.deleteObject("site/old.txt", generation: 1_700_000_000_000_001) == .changed)
        #expect(FileManager.default.fileExists(atPath: path + "/site/old.txt"))

        // Deleted at its sidecar's generation: the object and its sidecar go, not before.
        #expect(try await backend.deleteObject("site/kept.txt", generation: 1) == .changed)
        #expect(try await backend.deleteObject("site/kept.txt", generation: 1_700_000_000_000_002) == .deleted)
        try await backend.delete("top.txt", generation: 1_700_000_000_000_003)
        try await backend.delete("site/old.txt", generation: new.generation)
        #expect(files().isEmpty, "\(files())")
    }

    /// An attribute anyone who can write the file could set, with a generation a journal might
    /// hold: one that is not what Hoist writes (another object's name, another size, digests of
    /// the wrong length, a control character in a header, not JSON, trailing bytes) describes
    /// nothing. The file is described by the file system, and no removal at the forged
    /// generation goes; nor does a sidecar beside it speak for it.
    @Test(arguments: [
        #"{"name":"other.txt","size":"5","generation":"77"}"#, #"{"name":"f.txt","size":"6","generation":"77"}"#,
        #"{"name":"f.txt","size":"5","generation":"77","md5Hash":"AAAA"}"#,
        #"{"name":"f.txt","size":"5","generation":"77","crc32c":"AAAAAAAAAAA="}"#,
        #"{"name":"f.txt","size":"5","generation":"77","contentType":"text/html\r\nX-Injected: 1"}"#,
        #"{"name":"f.txt","size":"5","generation":"77"} trailing"#, "generation=77", #"{"name":"f.txt","size":"5","generation":"-77"}"#,
    ])
    func aForgedAttributeDescribesNothing(forged: String) async throws {
        try writeSidecarObject("f.txt", Data("hello".utf8), generation: 77)
        try forgeAttribute("f.txt", forged)
        let backend = LocalBucket(directory: path)
        let read = try await backend.metadata(of: "f.txt")
        #expect(read.generation != 77 && read.generation != -77)
        #expect(read.size == 5 && read.contentType != "text/x-sidecar")
        #expect(try await backend.deleteObject("f.txt", generation: 77) == .changed)
        #expect(FileManager.default.fileExists(atPath: path + "/f.txt"))
    }

    /// The attribute Hoist writes, read back from a file put in the object's place since (a
    /// rename over it: another inode, no attribute) is not read: the removal at the old
    /// generation leaves the file that is there now.
    @Test func aFileRenamedOverAnObjectIsNotRemovedAtItsGeneration() async throws {
        let backend = LocalBucket(directory: path)
        let stored = try await put(backend, "r.txt", Data("mine!".utf8))
        let other = try folder.write("other.txt", Data("yours".utf8))
        #expect(rename(other.path, path + "/r.txt") == 0)
        #expect(try await backend.deleteObject("r.txt", generation: stored.generation) == .changed)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/r.txt")) == Data("yours".utf8))
    }
}
