import Foundation
import HoistHTTP
import HoistTestSupport
import Testing
@testable import HoistStorage

/// A copy on the server (`StorageBackend.copy(from:to:ifSourceGeneration:)`, `StorageReference.copy(to:)`)
/// on every conformance backend: what a watcher's rename relies on.
@Suite struct CopyConformanceTests {
    /// Metadata a copy must carry over (ASCII custom metadata: gcp-storage-emulator serves custom
    /// metadata as headers, and cannot serve an object whose values are not Latin-1).
    private static func metadata() -> StorageMetadata {
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-test"
        metadata.cacheControl = "public, max-age=60"
        metadata.contentDisposition = "attachment; filename=\"r.bin\""
        metadata.contentLanguage = "de"
        metadata.customMetadata = ["owner": "ada"]
        return metadata
    }

    @Test(arguments: ConformanceBackend.all)
    func aCopyHoldsTheSourcesBytesAndMetadataAndLeavesTheSource(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        #expect(target.backend.capabilities.copiesObjects)
        let data = patternData(300_000)
        let source = target.storage.reference(withPath: target.object("in/r.bin"))
        let stored = try await source.putDataAsync(data, metadata: Self.metadata())
        let copy = try await source.copy(to: target.storage.reference(withPath: target.object("out/deep/r.bin")))

        #expect(try await target.storedBytes("out/deep/r.bin") == data)
        #expect(try await target.storedBytes("in/r.bin") == data)
        let fetched = try await target.storage.reference(withPath: target.object("out/deep/r.bin")).getMetadata()
        for object in [copy, fetched] {
            #expect(object.path == target.object("out/deep/r.bin"))
            #expect(object.size == 300_000)
            #expect(object.md5Hash == md5Base64(data))
            #expect(object.contentType == "application/x-test")
            #expect(object.cacheControl == "public, max-age=60")
            #expect(object.contentDisposition == "attachment; filename=\"r.bin\"")
            #expect(object.contentLanguage == "de")
            // rclone serve s3 adds an `mtime` key to a copy's metadata, of its own.
            let added: Set<String> = backend.name.hasPrefix("s3-rclone") ? [GCSBackend.downloadTokensKey, "mtime"] : [GCSBackend.downloadTokensKey]
            #expect((object.customMetadata ?? [:]).filter { !added.contains($0.key) } == ["owner": "ada"])
        }
        #expect(fetched.generation == copy.generation)
        #expect(copy.resource.crc32c == backend.reportedCRC32C(of: data))
        #expect(try await target.backend.metadata(of: target.object("out/deep/r.bin")).crc32c == backend.reportedCRC32C(of: data))
        // The source is as it was: same generation, same metadata.
        let after = try await source.getMetadata()
        #expect(after.generation == stored.generation)
        #expect(after.contentType == "application/x-test")
    }

    @Test(arguments: ConformanceBackend.all)
    func aStaleSourceGenerationCopiesNothing(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let source = target.storage.reference(withPath: target.object("page.html"))
        let destination = target.storage.reference(withPath: target.object("renamed.html"))
        let first = try await source.putDataAsync(Data("first".utf8))
        let second = try await source.putDataAsync(Data("second, by another writer".utf8))
        #expect(first.generation != second.generation)

        #expect(try await source.copy(to: destination, ifSourceGeneration: first.generation) == .sourceChanged)
        #expect(try await target.storedBytes("renamed.html") == nil)

        guard case .copied(let copied) = try await source.copy(to: destination, ifSourceGeneration: second.generation) else {
            Issue.record("the copy of the current generation was refused")
            return
        }
        #expect(copied.md5Hash == md5Base64(Data("second, by another writer".utf8)))
        #expect(try await target.storedBytes("renamed.html") == Data("second, by another writer".utf8))
        #expect(try await target.storedBytes("page.html") == Data("second, by another writer".utf8))
    }

    @Test(arguments: ConformanceBackend.all)
    func aMissingSourceIsObjectNotFound(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        _ = try await target.storage.reference(withPath: target.object("other.txt")).putDataAsync(Data("x".utf8))
        do {
            _ = try await target.backend.copy(from: target.object("nothing.txt"), to: target.object("copy.txt"), ifSourceGeneration: nil)
            Issue.record("a copy of nothing succeeded")
        } catch let failure as StorageFailure {
            #expect(failure.code == .objectNotFound, "\(failure)")
        }
        do {
            _ = try await target.storage.reference(withPath: target.object("nothing.txt"))
                .copy(to: target.storage.reference(withPath: target.object("copy.txt")))
            Issue.record("a copy of nothing succeeded")
        } catch let error as StorageError {
            #expect(error.code == .objectNotFound, "\(error)")
        }
        #expect(try await target.storedBytes("copy.txt") == nil)
    }

    @Test(arguments: ConformanceBackend.all)
    func keysWithSpacesAndUnicodeAreCopied(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let data = Data("Grüße".utf8)
        let from = "a folder/Grüße 🎉 +&=%.txt"
        let to = "other folder/naïve café (2).txt"
        _ = try await target.storage.reference(withPath: target.object(from)).putDataAsync(data)
        let copy = try await target.storage.reference(withPath: target.object(from))
            .copy(to: target.storage.reference(withPath: target.object(to)))
        #expect(copy.path == target.object(to))
        #expect(try await target.storedBytes(to) == data)
        #expect(try await target.storedBytes(from) == data)
    }
}

/// What each server does with a copy's condition on its source, sent by hand with a generation
/// (an ETag) the source is not: recorded, since `copy(from:to:ifSourceGeneration:)` reads the
/// source's generation first and relies on the server's check only where it makes it.
@Suite struct CopyPreconditionTests {
    @Test(arguments: S3TestServer.plain)
    func copySourceIfMatchOnS3(server: S3TestServer) async throws {
        let bucket = try await server.makeBucket()
        let storage = try s3Storage(server, bucket: bucket)
        _ = try await storage.reference(withPath: "x.txt").putDataAsync(Data("x".utf8))
        let answer = try await server.request("PUT", "/\(bucket)/y.txt", headers: [
            ("x-amz-copy-source", "/\(bucket)/x.txt"), ("x-amz-copy-source-if-match", "\"00000000000000000000000000000000\""),
        ])
        let written = try await server.storedBytes(bucket: bucket, key: "y.txt") != nil
        print("S3 CopyObject x-amz-copy-source-if-match on \(server): HTTP \(answer.status), copy \(written ? "written" : "not written")")
        // AWS refuses it (412); moto 5.2, rclone serve s3 1.75 and radosgw 16.2 ignore it and copy.
        #expect(answer.status == 200)
        #expect(written)
    }

    @Test(arguments: ["fake-gcs-server", "gcp-storage-emulator"])
    func ifSourceGenerationMatchOnGCS(emulator: String) async throws {
        let (bucket, port) = emulator == "fake-gcs-server"
            ? (try await FakeGCS.makeBucket(), try FakeGCS.port()) : (StorageEmulator.bucket, try StorageEmulator.port())
        let prefix = "p-\(UUID().uuidString.prefix(8).lowercased())/"
        let storage = gcsStorage(bucket: bucket, port: port)
        let stored = try await storage.reference(withPath: prefix + "x.txt").putDataAsync(Data("x".utf8))
        let url = "http://127.0.0.1:\(port)/storage/v1/b/\(bucket)/o/\(GCSBackend.encode(prefix + "x.txt"))/rewriteTo/b/\(bucket)/o/"
            + "\(GCSBackend.encode(prefix + "y.txt"))?ifSourceGenerationMatch=\(stored.generation + 1)"
        let answer = try await CurlEngine.shared.perform(HTTPRequest(method: "POST", url: url))
        let written = try await FakeGCS.exists(bucket: bucket, object: prefix + "y.txt", port: port)
        print("GCS rewrite ifSourceGenerationMatch on \(emulator): HTTP \(answer.status), copy \(written ? "written" : "not written")")
        // Cloud Storage refuses it (412); both emulators ignore it and copy.
        #expect(answer.status == 200)
        #expect(written)
    }
}

extension CopyConformanceTests {
    /// 20 MiB: a local bucket's session file, a GCS resumable upload, an S3 multipart upload.
    /// An S3 multipart object carries no MD5 (its ETag is the parts'); where the server keeps no
    /// CRC32C of it either (radosgw ignores `FULL_OBJECT`) a copy could not be checked: refused,
    /// nothing written. moto keeps the whole object's CRC32C and `rclone serve s3` reads it with
    /// the MD5 of its bytes: both copy it.
    @Test(arguments: ConformanceBackend.all)
    func aLargeObjectIsCopiedWhereItCanBeChecked(_ backend: ConformanceBackend) async throws {
        let target = try await backend.makeTarget([])
        let data = patternData(20 << 20)
        let source = target.storage.reference(withPath: target.object("big.bin"))
        _ = try await source.putDataAsync(data)
        let destination = target.storage.reference(withPath: target.object("big copy.bin"))
        if backend.name == "s3-ceph" {
            do {
                _ = try await target.backend.copy(from: target.object("big.bin"), to: target.object("big copy.bin"), ifSourceGeneration: nil)
                Issue.record("an unverifiable copy was made")
            } catch let failure as StorageFailure {
                #expect(failure.code == .invalidArgument)
                #expect(failure.message.contains("multipart upload's"), "\(failure.message)")
            }
            #expect(try await target.storedBytes("big copy.bin") == nil)
            return
        }
        let copy = try await source.copy(to: destination)
        #expect(copy.md5Hash == md5Base64(data))
        #expect(try await target.storedBytes("big copy.bin") == data)
    }
}
