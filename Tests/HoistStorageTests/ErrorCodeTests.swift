import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// Every error a local bucket produces, with its code, domain and message.
@Suite struct ErrorCodeTests {
    func failure(_ task: StorageUploadTask) async -> NSError? {
        await EventRecorder(task).finished().error as NSError?
    }

    @Test func rawValuesMatchFirebase() {
        let expected: [StorageErrorCode: Int] = [
            .unknown: -13000, .objectNotFound: -13010, .bucketNotFound: -13011, .projectNotFound: -13012,
            .quotaExceeded: -13013, .unauthenticated: -13020, .unauthorized: -13021, .retryLimitExceeded: -13030,
            .nonMatchingChecksum: -13031, .downloadSizeExceeded: -13032, .cancelled: -13040, .invalidArgument: -13050,
            .bucketMismatch: -13051, .internalError: -13052, .pathError: -13053,
        ]
        #expect(StorageErrorCode.allCases.count == expected.count)
        for code in StorageErrorCode.allCases { #expect(code.rawValue == expected[code]) }
        #expect(StorageErrorDomain == "FIRStorageErrorDomain")
        #expect(StorageTaskStatus.allCases.map(\.rawValue) == [0, 1, 2, 3, 4, 5])
    }

    @Test func missingFileIsUnknownAsInFirebase() async throws {
        let bucket = try LocalBucketFixture()
        let path = bucket.directory.url.appendingPathComponent("absent.jpg")
        let error = try #require(await failure(bucket.storage.reference(withPath: "a").putFile(from: path)))
        #expect(error.domain == "FIRStorageErrorDomain")
        #expect(StorageErrorCode(rawValue: error.code) == .unknown)
        #expect(error.localizedDescription == "File at URL: \(path.absoluteString) is not reachable. Ensure file URL is not a directory, symbolic link, or invalid url.")
    }

    @Test func uploadToTheRootIsInvalidArgument() async throws {
        let bucket = try LocalBucketFixture()
        let error = try #require(await failure(bucket.storage.reference().putData(Data("x".utf8))))
        #expect(StorageErrorCode(rawValue: error.code) == .invalidArgument)
        #expect(error.localizedDescription.contains("Cannot upload to the root of bucket bucket"))
        await #expect(throws: (any Error).self) { try await bucket.storage.reference().downloadURL() }
    }

    @Test func directoryIsNotAFile() async throws {
        let bucket = try LocalBucketFixture()
        let error = try #require(await failure(bucket.storage.reference(withPath: "d").putFile(from: bucket.directory.url)))
        #expect(StorageErrorCode(rawValue: error.code) == .unknown)
        #expect(error.localizedDescription.hasSuffix("is not reachable. Ensure file URL is not a directory, symbolic link, or invalid url."))
    }

    @Test(arguments: ["a/../../escape", "..", "a/./b", ".hoist/meta/x"])
    func unsafeObjectPathsAreRefused(path: String) async throws {
        let bucket = try LocalBucketFixture()
        let error = try #require(await failure(bucket.storage.reference(withPath: path).putData(Data("x".utf8))))
        #expect(StorageErrorCode(rawValue: error.code) == .invalidArgument)
        #expect(!FileManager.default.fileExists(atPath: bucket.directory.url.appendingPathComponent("escape").path))
    }

    @Test func bucketThatIsAFileIsBucketNotFound() async throws {
        let directory = try TemporaryDirectory()
        let notADirectory = try directory.write("bucket", Data("I am a file".utf8))
        let storage = Storage.storage(url: "file://" + notADirectory.path)
        let error = try #require(await failure(storage.reference(withPath: "x").putData(Data("x".utf8))))
        #expect(StorageErrorCode(rawValue: error.code) == .bucketNotFound)
        #expect(error.localizedDescription.contains("is not a directory"))
    }

    @Test func objectUnderAnExistingObjectIsInvalidArgument() async throws {
        let bucket = try LocalBucketFixture()
        _ = try await bucket.storage.reference(withPath: "a").putDataAsync(Data("file".utf8))
        let error = try #require(await failure(bucket.storage.reference(withPath: "a/b").putData(Data("x".utf8))))
        #expect(StorageErrorCode(rawValue: error.code) == .invalidArgument)
        #expect(error.localizedDescription == "Object a/b cannot be stored: object a exists, and a local bucket cannot hold both.")
        #expect(try bucket.storedBytes("a") == Data("file".utf8))
        #expect(bucket.allFiles() == ["a"])
    }

    /// The other way round: `a` while objects exist below `a/`. Refused (by the failed link,
    /// with no stat per object beforehand), and no sidecar of `a` is left describing nothing.
    @Test func objectOverExistingObjectsBelowItIsInvalidArgument() async throws {
        let bucket = try LocalBucketFixture()
        _ = try await bucket.storage.reference(withPath: "a/b").putDataAsync(Data("below".utf8))
        for data in [Data("x".utf8), patternData(9 << 20)] {   // an unnamed file, then a part file
            let error = try #require(await failure(bucket.storage.reference(withPath: "a").putData(data)))
            #expect(StorageErrorCode(rawValue: error.code) == .invalidArgument)
            #expect(error.localizedDescription == "Object a cannot be stored: objects exist below a/ in a local bucket.")
            #expect(try bucket.storedBytes("a/b") == Data("below".utf8))
            #expect(bucket.allFiles() == ["a/b"])
        }
    }

    @Test func unreadableFileIsUnauthorized() async throws {
        let bucket = try LocalBucketFixture()
        // In a folder that can be listed: a file named alone would be refused before the start.
        let secret = try bucket.directory.write("private/secret.txt", Data("secret".utf8))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: secret.deletingLastPathComponent().path)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret.path)
        if getuid() != 0 {
            try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: secret.path)
            let error = try #require(await failure(bucket.storage.reference(withPath: "s").putFile(from: secret)))
            #expect(StorageErrorCode(rawValue: error.code) == .unauthorized)
            return
        }
        // Root reads every file: run the upload as `nobody`, through the hoist command.
        let bucketDir = bucket.directory.url.appendingPathComponent("open-bucket")
        try FileManager.default.createDirectory(at: bucketDir, withIntermediateDirectories: true)
        for path in [bucket.directory.path, bucketDir.path] {
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: path)
        }
        let run = try runProcess("/usr/bin/setpriv", [
            "--reuid=65534", "--regid=65534", "--clear-groups", hoist, "cp", "--json",
            "--storage", "file://" + bucketDir.path, secret.deletingLastPathComponent().path, "s/",
        ])
        #expect(run.status == 1, "\(run.stderr)")
        let events = run.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let event = events.first { $0["event"] as? String == "failure" }
        #expect(event?["code"] as? String == "unauthorized")
        #expect(event?["rawValue"] as? Int == -13021)
        #expect((event?["message"] as? String)?.contains("Permission denied reading file \(secret.path)") == true)
        #expect(!FileManager.default.fileExists(atPath: bucketDir.appendingPathComponent("s/private/secret.txt").path))
    }
}

/// Cloud Storage's naming rules hold for every backend and every caller of the library, not only
/// for job templates: a NUL made `a\0b` and `a` one local file; a newline or 1,025 bytes went to
/// gs:// unchecked.
@Suite struct ObjectNameRuleTests {
    @Test(arguments: ["a\u{0}b", "line\nbreak", "tab\there", String(repeating: "n", count: 1025)])
    func namesCloudStorageRefusesAreRefusedOnEveryBackend(name: String) async throws {
        let local = try LocalBucketFixture()
        let bucket = try await FakeGCS.makeBucket()
        for storage in [local.storage, gcsStorage(bucket: bucket, port: try FakeGCS.port())] {
            await #expect { try await storage.reference(withPath: name).putDataAsync(Data("x".utf8)) } throws: { error in
                (error as NSError).code == StorageErrorCode.invalidArgument.rawValue
            }
        }
        #expect(local.allFiles().filter { !$0.hasPrefix(".hoist/") }.isEmpty, "\(local.allFiles())")
        #expect(try await !FakeGCS.exists(bucket: bucket, object: name))
    }

    @Test func aNameOf1024BytesIsFine() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let name = String(repeating: "n", count: 1024)
        let stored = try await gcsStorage(bucket: bucket, port: try FakeGCS.port()).reference(withPath: name).putDataAsync(Data("x".utf8))
        #expect(stored.size == 1)
    }
}
