import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// `StorageError`, the Swift enum FirebaseStorage throws: its NSError form, and which API
/// gives which form (async and `Result`: the enum; completion handlers and snapshots: NSError).
@Suite struct StorageErrorTests {
    static let unreachableSuffix = " is not reachable. Ensure file URL is not a directory, symbolic link, or invalid url."

    @Test func casesBridgeToTheSDKsNSError() {
        let cases: [(StorageError, Int, String)] = [
            (.unknown(message: "m", serverError: [:]), -13000, "m"),
            (.objectNotFound(object: "a/b", serverError: [:]), -13010, "Object a/b does not exist."),
            (.bucketNotFound(bucket: "b"), -13011, "Bucket b does not exist."),
            (.projectNotFound(project: "p"), -13012, "Project p does not exist."),
            (.quotaExceeded(bucket: "b", serverError: [:]), -13013,
             "Quota for bucket b exceeded, please view quota on firebase.google.com."),
            (.unauthenticated(serverError: [:]), -13020,
             "User is not authenticated, please authenticate using Firebase Authentication and try again."),
            (.unauthorized(bucket: "b", object: "o", serverError: [:]), -13021, "User does not have permission to access gs://b/o."),
            (.retryLimitExceeded, -13030, "Max retry time for operation exceeded, please try again."),
            (.downloadSizeExceeded(total: 10, maxSize: 5), -13032,
             "Attempted to download object with size of 10 bytes, which exceeds the maximum size of 5 bytes. "
                + "Consider raising the maximum download maxSize, or using StorageReference.write"),
            (.cancelled, -13040, "User cancelled the upload/download."),
            (.invalidArgument(message: "i"), -13050, "i"),
            (.bucketMismatch(message: "bm"), -13051, "bm"),
            (.internalError(message: "ie"), -13052, "ie"),
            (.pathError(message: "pe"), -13053, "pe"),
        ]
        for (error, code, message) in cases {
            let nsError = error as NSError
            #expect(nsError.domain == "FIRStorageErrorDomain")
            #expect(nsError.code == code)
            #expect(nsError.localizedDescription == message)
            #expect(error.localizedDescription == message)
        }
        #expect((StorageError.nonMatchingChecksum as NSError).code == -13031)
        // The server's entries travel in userInfo; the description is the case as Swift prints it.
        let withServer = StorageError.unauthorized(bucket: "b", object: "o", serverError: ["ResponseErrorCode": 403]) as NSError
        #expect(withServer.userInfo["ResponseErrorCode"] as? Int == 403)
        #expect("\(StorageError.bucketMismatch(message: "x"))" == "bucketMismatch(message: \"x\")")
    }

    @Test func nsErrorsBecomeTheirCase() {
        let notFound = StorageErrorCode.objectNotFound.error("Object a does not exist.", userInfo: ["object": "a", "bucket": "b"])
        guard case .objectNotFound(let object, let serverError) = StorageError(notFound) else {
            Issue.record("not objectNotFound")
            return
        }
        #expect(object == "a")
        #expect(serverError["bucket"] as? String == "b")
        guard case .unknown(let message, let info) = StorageError(POSIXError(.EIO)) else {
            Issue.record("not unknown")
            return
        }
        #expect(!message.isEmpty)
        #expect(info["ResponseErrorDomain"] as? String == (POSIXError(.EIO) as NSError).domain)
        guard case .cancelled = StorageError(TransferControl.cancelledError) else {
            Issue.record("not cancelled")
            return
        }
    }

    @Test func missingFileFailsWithUnknownInEveryForm() async throws {
        let bucket = try LocalBucketFixture()
        let ref = bucket.storage.reference(withPath: "x.data")
        let relative = try #require(URL(string: "some_non_existing-folder/file.data"))
        let expected = "File at URL: some_non_existing-folder/file.data" + Self.unreachableSuffix

        // Completion handler: the NSError form.
        let error: (any Error)? = await withCheckedContinuation { continuation in
            ref.putFile(from: relative) { metadata, error in
                #expect(metadata == nil)
                continuation.resume(returning: error)
            }
        }
        let nsError = try #require(error as? NSError)
        #expect(nsError.domain == StorageErrorDomain)
        #expect(nsError.code == StorageErrorCode.unknown.rawValue)
        #expect(nsError.localizedDescription == expected)

        // Result: the StorageError form.
        let result: Result<StorageMetadata, any Error> = await withCheckedContinuation { continuation in
            ref.putFile(from: relative) { result in continuation.resume(returning: result) }
        }
        guard case .failure(StorageError.unknown(let message, _)) = result else {
            Issue.record("expected StorageError.unknown, got \(result)")
            return
        }
        #expect(message == expected)

        // async: throws StorageError.
        do {
            _ = try await ref.putFileAsync(from: URL(string: "bad-url")!)
            Issue.record("no error")
        } catch let error as StorageError {
            guard case .unknown(let message, _) = error else { Issue.record("\(error)"); return }
            #expect(message == "File at URL: bad-url" + Self.unreachableSuffix)
        }
        #expect(bucket.allFiles().filter { !$0.hasPrefix(".hoist/uploads") }.isEmpty)
    }

    @Test func directoryAndSymlinkFailWithUnknown() async throws {
        let bucket = try LocalBucketFixture()
        let folder = bucket.directory.url.appendingPathComponent("folder", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let target = try bucket.directory.write("target.txt", Data("t".utf8))
        let link = bucket.directory.url.appendingPathComponent("link.txt")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        for url in [folder, link, bucket.directory.url.appendingPathComponent("absent.jpg")] {
            let snapshot = await EventRecorder(bucket.storage.reference(withPath: "d").putFile(from: url)).finished()
            let error = try #require(snapshot.error as NSError?)
            #expect(error.code == StorageErrorCode.unknown.rawValue)
            #expect(error.localizedDescription == "File at URL: \(url.absoluteString)" + Self.unreachableSuffix)
        }
        #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: bucket.bucketPath).appendingPathComponent("d").path))
    }

    @Test func asyncAPIsThrowStorageError() async throws {
        let bucket = try LocalBucketFixture()
        let ghost = bucket.storage.reference(withPath: "ghost")
        await #expect { try await ghost.getMetadata() } throws: { error in
            guard case StorageError.objectNotFound(let object, _) = error else { return false }
            return object == "ghost" && error.localizedDescription == "Object ghost does not exist."
        }
        await #expect { try await ghost.downloadURL() } throws: { error in
            if case StorageError.objectNotFound = error { return true }
            return false
        }
        // Cancelling the calling Task: StorageError.cancelled.
        let task = Task { try await bucket.storage.reference(withPath: "big").putDataAsync(patternData(64 << 20)) }
        task.cancel()
        await #expect { try await task.value } throws: { error in
            if case StorageError.cancelled = error { return true }
            return false
        }
    }
}
