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

    @Test func localBucketURLs() {
        #expect(BackendRegistry.localPath(of: "file:///srv/b/") == "/srv/b")
        #expect(BackendRegistry.localPath(of: "file:/srv/b") == "/srv/b")
        let cwd = FileManager.default.currentDirectoryPath
        #expect(BackendRegistry.localPath(of: "file:.hoist/bucket") == URL(fileURLWithPath: cwd + "/.hoist/bucket").standardizedFileURL.path)
        #expect(Storage.storage(url: "file:///srv/my%20bucket").reference().bucket == "my bucket")
    }
}
