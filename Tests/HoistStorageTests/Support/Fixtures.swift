import Foundation
import HoistStorage
import HoistTestSupport

/// A fresh local bucket in its own temporary directory.
final class LocalBucketFixture: Sendable {
    let directory: TemporaryDirectory
    let storage: Storage
    var bucketPath: String { directory.url.appendingPathComponent("bucket").path }

    init() throws {
        directory = try TemporaryDirectory()
        storage = Storage.storage(url: "file://" + directory.url.appendingPathComponent("bucket").path)
    }

    /// The bytes stored for `object`, read straight from the bucket's directory.
    func storedBytes(_ object: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: bucketPath).appendingPathComponent(object))
    }

    /// Every file under the bucket's directory, relative paths, sorted (Hoist's state included).
    func allFiles() -> [String] {
        let root = URL(fileURLWithPath: bucketPath)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        var files: [String] = []
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            files.append(String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1)))
        }
        return files.sorted()
    }
}


/// Uploads `data` through the completion handler and returns its error: the `NSError` form,
/// which keeps Hoist's details (the last error before `retryLimitExceeded`, the checksums of
/// `nonMatchingChecksum`) that the `StorageError` the async API throws has no room for.
func putDataError(_ ref: StorageReference, _ data: Data) async -> NSError? {
    await withCheckedContinuation { continuation in
        ref.putData(data, metadata: nil) { _, error in continuation.resume(returning: error as NSError?) }
    }
}
