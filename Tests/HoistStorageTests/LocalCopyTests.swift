import Foundation
import HoistHTTP
import HoistTestSupport
import Testing
@testable import HoistStorage

/// A local bucket's copy (`LocalBucket.copy(from:to:ifSourceGeneration:)`): a file of its own,
/// never a rename nor a link to the source's, checked against the source's sidecar; and a
/// backend that cannot copy, which says so.
@Suite struct LocalCopyTests {
    /// A backend without `copiesObjects` (the protocol's default `copy`) fails `invalidArgument`
    /// saying to upload instead: what a caller falls back on.
    @Test func aBackendThatCannotCopySaysSo() async throws {
        let backend = UnsupportedBackend(url: "other://bkt", bucket: "bkt")
        #expect(!backend.capabilities.copiesObjects)
        #expect(LocalBucket.capabilities.copiesObjects && GCSBackend.capabilities(HTTPTransports.standard, caBundle: nil).copiesObjects
                && S3Backend.capabilities.copiesObjects)
        do {
            _ = try await backend.copy(from: "a", to: "b", ifSourceGeneration: nil)
            Issue.record("a backend that cannot copy copied")
        } catch let failure as StorageFailure {
            #expect(failure.code == .invalidArgument)
            #expect(failure.message.contains("cannot copy objects: upload the file instead"), "\(failure.message)")
        }
    }

    @Test func aCopyIsANewFileWithAGenerationOfItsOwn() async throws {
        let fixture = try LocalBucketFixture()
        let source = fixture.storage.reference(withPath: "a/src.txt")
        let stored = try await source.putDataAsync(Data("the bytes".utf8))
        let copy = try await source.copy(to: fixture.storage.reference(withPath: "b/dst.txt"))
        #expect(copy.generation != stored.generation)
        #expect(try await source.getMetadata().generation == stored.generation)
        var from = stat(), to = stat()
        #expect(stat(fixture.bucketPath + "/a/src.txt", &from) == 0 && stat(fixture.bucketPath + "/b/dst.txt", &to) == 0)
        #expect(from.st_ino != to.st_ino)
        #expect(from.st_nlink == 1 && to.st_nlink == 1)
        // Written over in place, the copy changes alone.
        try Data("other one".utf8).write(to: URL(fileURLWithPath: fixture.bucketPath + "/b/dst.txt"))
        #expect(try fixture.storedBytes("a/src.txt") == Data("the bytes".utf8))
        // Nothing left in the bucket's uploads folder.
        #expect(fixture.allFiles().filter { $0.hasPrefix(".hoist/uploads/") } == [])
    }

    /// A source whose bytes were changed in place (same size) is not its sidecar's: the copy
    /// fails `nonMatchingChecksum` and is deleted.
    @Test func aSourceThatIsNotItsSidecarsBytesIsNotCopied() async throws {
        let fixture = try LocalBucketFixture()
        let source = fixture.storage.reference(withPath: "src.txt")
        _ = try await source.putDataAsync(Data("the bytes".utf8))
        try Data("THE BYTES".utf8).write(to: URL(fileURLWithPath: fixture.bucketPath + "/src.txt"))
        do {
            _ = try await fixture.storage.backend.copy(from: "src.txt", to: "dst.txt", ifSourceGeneration: nil)
            Issue.record("a copy of bytes that are not the source's was kept")
        } catch let failure as StorageFailure {
            #expect(failure.code == .nonMatchingChecksum)
            #expect(failure.message.contains("The copy was deleted"), "\(failure.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.bucketPath + "/dst.txt"))
    }

    /// A destination of another storage is `bucketMismatch`; nothing is written anywhere.
    @Test func aCopyToAnotherStorageIsRefused() async throws {
        let one = try LocalBucketFixture(), other = try LocalBucketFixture()
        let source = one.storage.reference(withPath: "src.txt")
        _ = try await source.putDataAsync(Data("x".utf8))
        do {
            _ = try await source.copy(to: other.storage.reference(withPath: "dst.txt"))
            Issue.record("copied to another storage")
        } catch let error as StorageError {
            #expect(error.code == .bucketMismatch)
        }
        #expect(!FileManager.default.fileExists(atPath: one.bucketPath + "/dst.txt"))
        #expect(!FileManager.default.fileExists(atPath: other.bucketPath + "/dst.txt"))
    }
}
