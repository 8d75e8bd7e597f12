import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

@Suite struct ReferenceTests {
    let storage = Storage.storage(url: "file:///tmp/hoist-ref-tests/my-bucket")

    @Test func childFoldsAndTrimsSlashes() {
        let root = storage.reference()
        #expect(root.child("/foo/bar").fullPath == "foo/bar")
        #expect(root.child("foo/bar/").fullPath == "foo/bar")
        #expect(root.child("foo///bar").fullPath == "foo/bar")
        #expect(root.child("foo").child("bar").child("baz").fullPath == "foo/bar/baz")
        #expect(root.child("").fullPath == "")
        #expect(root.child("///").fullPath == "")
        #expect(storage.reference(withPath: "//images//stars.jpg/").fullPath == "images/stars.jpg")
    }

    @Test func namesParentsAndRoot() {
        let spaceRef = storage.reference().child("images/space.jpg")
        #expect(spaceRef.name == "space.jpg")
        #expect(spaceRef.fullPath == "images/space.jpg")
        #expect(spaceRef.bucket == "my-bucket")
        #expect(spaceRef.parent()?.fullPath == "images")
        #expect(spaceRef.parent()?.parent()?.fullPath == "")
        #expect(spaceRef.parent()?.parent()?.parent() == nil)
        #expect(spaceRef.root().fullPath == "")
        #expect(spaceRef.root().parent() == nil)
        #expect(spaceRef.parent()?.child("earth.jpg").fullPath == "images/earth.jpg")
        #expect(storage.reference().name == "")
    }

    @Test func descriptionAndEquality() {
        let a = storage.reference().child("images/space.jpg")
        #expect(a.description == "gs://my-bucket/images/space.jpg")
        #expect(storage.reference().description == "gs://my-bucket/")
        #expect(a == storage.reference(withPath: "images//space.jpg"))
        #expect(a != storage.reference(withPath: "images/earth.jpg"))
        #expect(Set([a, storage.reference(withPath: "images/space.jpg")]).count == 1)
    }

    @Test func sameURLSameStorage() {
        #expect(Storage.storage(url: "file:///tmp/hoist-ref-tests/my-bucket") === storage)
        #expect(Storage.storage(url: "file:///tmp/hoist-ref-tests/other") !== storage)
    }

    @Test func referencesFromURLs() throws {
        #expect(try storage.reference(for: "gs://my-bucket/images/stars.jpg").fullPath == "images/stars.jpg")
        #expect(try storage.reference(for: "gs://my-bucket").fullPath == "")
        let https = try storage.reference(
            for: "https://firebasestorage.googleapis.com/v0/b/my-bucket/o/images%2Fstars%20x.jpg?alt=media&token=abc")
        #expect(https.fullPath == "images/stars x.jpg")
        #expect(storage.reference(forURL: "gs://my-bucket/a/b").name == "b")
    }

    @Test func badURLsAreErrors() {
        #expect { try storage.reference(for: "gs://another-bucket/x") } throws: { error in
            (error as NSError).code == StorageErrorCode.bucketMismatch.rawValue
                && "\(error.localizedDescription)".contains("another-bucket")
        }
        #expect { try storage.reference(for: "ftp://x/y") } throws: { error in
            (error as NSError).code == StorageErrorCode.pathError.rawValue
        }
    }

    @Test func localBucketURLs() throws {
        #expect(try StorageLocation(parsing: "file:///srv/b/").directory() == "/srv/b")
        #expect(try StorageLocation(parsing: "file:/srv/b").directory() == "/srv/b")
        let cwd = FileManager.default.currentDirectoryPath
        #expect(try StorageLocation(parsing: "file:.hoist/bucket").directory()
            == URL(fileURLWithPath: cwd + "/.hoist/bucket").standardizedFileURL.path)
        #expect(try StorageLocation(parsing: "file:rel/b").directory(relativeTo: "/jobs/site") == "/jobs/site/rel/b")
        #expect(Storage.storage(url: "file:///srv/my%20bucket").reference().bucket == "my bucket")
    }

    @Test func storageLocationsParseOnce() throws {
        let gs = try StorageLocation(parsing: "gs://my-app.appspot.com/photos//2024/")
        #expect(gs.scheme == "gs" && gs.bucket == "my-app.appspot.com" && gs.path == "photos/2024")
        #expect(try StorageLocation(parsing: "gs://b").path == "")
        let local = try StorageLocation(parsing: "FILE:///srv/my%20bucket/")
        #expect(local.scheme == "file" && local.bucket == "my bucket" && local.path == "/srv/my bucket")
        let other = try StorageLocation(parsing: "s3://bucket/key")
        #expect(other.scheme == "s3" && other.bucket == "bucket" && other.path == "key")
        for bad in ["bucket", "gs://", "gs:bucket", "file:", "://x"] {
            #expect(throws: StorageFailure.self, "\(bad)") { try StorageLocation(parsing: bad) }
        }
    }

    /// A backend per scheme: a URL no factory serves fails every operation with a clear message,
    /// and a registered factory serves its scheme.
    @Test func backendsAreMadeByScheme() async throws {
        #expect(BackendRegistry.backend(for: "file:///tmp/x") is LocalBucket)
        #expect(BackendRegistry.backend(for: "s3://bucket") is S3Backend)
        let unsupported = BackendRegistry.backend(for: "\(unservedScheme)://bucket")
        #expect(unsupported.bucket == "bucket")
        await #expect { _ = try await unsupported.metadata(of: "x") } throws: { error in
            StorageErrorCode(of: error) == .invalidArgument && "\(error)".contains("No storage backend for \(unservedScheme)://bucket")
        }
        let directory = try TemporaryDirectory()
        let scheme = "test\(UUID().uuidString.prefix(8).lowercased())"
        BackendRegistry.register(scheme: scheme) { location in LocalBucket(directory: directory.path + "/" + location.bucket) }
        let backend = try #require(BackendRegistry.backend(for: "\(scheme)://made") as? LocalBucket)
        #expect(backend.directory.path == directory.path + "/made")
    }
}
