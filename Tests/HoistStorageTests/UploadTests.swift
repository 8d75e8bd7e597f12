import Foundation
import Synchronization
import HoistTestSupport
import Testing
@testable import HoistStorage

/// Uploads into a local bucket through the public API, checked by the bytes and metadata on disk.
@Suite struct UploadTests {
    @Test func putDataStoresBytesAndMetadata() async throws {
        let bucket = try LocalBucketFixture()
        let data = patternData(300_000)
        let metadata = StorageMetadata()
        metadata.contentType = "text/x-custom"
        metadata.customMetadata = ["owner": "ada", "run": "7"]
        let ref = bucket.storage.reference().child("docs/report.bin")
        let stored = try await ref.putDataAsync(data, metadata: metadata)

        // Every field round trips on every backend (BackendConformanceTests); here, what the local bucket adds.
        #expect(try bucket.storedBytes("docs/report.bin") == data)
        #expect(stored.bucket == "bucket")
        #expect(stored.customMetadata == ["owner": "ada", "run": "7"])   // no download token
        #expect(stored.metageneration == 1)
        #expect(stored.generation > 0)
        let created = try #require(stored.timeCreated)
        #expect(abs(created.timeIntervalSinceNow) < 60)
        #expect(stored.updated == stored.timeCreated)

        // The metadata kept beside the object reads back the same.
        let fetched = try await ref.getMetadata()
        #expect(fetched == stored)
        // Nothing but the object remains: its metadata is its attribute, one inode per object.
        #expect(bucket.allFiles() == ["docs/report.bin"])
        let attribute = LocalBucketFiles.attribute(of: "docs/report.bin", in: bucket.bucketPath)
        #expect(attribute?["md5Hash"] as? String == stored.md5Hash && attribute?["generation"] as? String == String(stored.generation))
    }

    @Test func relativeFileURLsResolveAgainstTheWorkingDirectory() async throws {
        let bucket = try LocalBucketFixture()
        // The seed guide's `URL(string: "path/to/image")`: relative to the current directory.
        let relative = "hoist-rel-\(UUID().uuidString)/to/image"
        let data = patternData(1000)
        try bucket.directory.write("unused", Data())
        let absolute = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: absolute.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: absolute)
        defer { try? FileManager.default.removeItem(at: absolute.deletingLastPathComponent().deletingLastPathComponent()) }

        let stored = try await bucket.storage.reference(withPath: "images/rivers.jpg").putFileAsync(from: URL(string: relative)!)
        #expect(stored.size == 1000)
        #expect(try bucket.storedBytes("images/rivers.jpg") == data)
    }

    @Test func overwriteBumpsGeneration() async throws {
        let bucket = try LocalBucketFixture()
        let ref = bucket.storage.reference(withPath: "v.txt")
        let first = try await ref.putDataAsync(Data("one".utf8))
        let second = try await ref.putDataAsync(Data("two!".utf8))
        #expect(second.generation > first.generation)
        #expect(second.size == 4)
        #expect(try bucket.storedBytes("v.txt") == Data("two!".utf8))
        #expect(try await ref.getMetadata().generation == second.generation)
        #expect(bucket.allFiles() == ["v.txt"])
    }

    /// Small uploads go to unnamed files (`O_TMPFILE`) linked into place, each with its own
    /// descriptor, closed once. Hundreds at once, into few folders, new objects and then
    /// replaced ones: every object holds its own bytes and nothing is left in `.hoist/uploads`.
    @Test func manySmallUploadsAtOnceEachStoreTheirOwnBytes() async throws {
        let bucket = try LocalBucketFixture()
        let storage = bucket.storage
        let pool = patternData(10_000)
        @Sendable func bytes(_ round: String, _ index: Int) -> Data {
            Data("\(round) object \(index) ".utf8) + pool[(index * 13 % 5000)..<(index * 13 % 5000 + index * 37 % 5000)]
        }
        func upload(_ round: String) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<400 {
                    group.addTask {
                        let data = bytes(round, index)
                        let stored = try await storage.reference(withPath: "m\(index % 5)/o\(index)").putDataAsync(data)
                        #expect(stored.size == Int64(data.count))
                    }
                }
                try await group.waitForAll()
            }
            for index in 0..<400 {
                let data = bytes(round, index)
                #expect(try bucket.storedBytes("m\(index % 5)/o\(index)") == data, "\(round) \(index)")
            }
            #expect(!bucket.allFiles().contains { $0.hasPrefix(".hoist/uploads/") })
        }
        // A descriptor closed twice closes whatever the process opened in between under that
        // number: a thread that keeps opening files sees its own closed under it.
        let stop = Atomic<Bool>(false)
        let closedUnderUs = Atomic<Int>(0)
        let canary = Thread {
            while !stop.load(ordering: .relaxed) {
                let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { continue }
                for _ in 0..<50 where fcntl(descriptor, F_GETFD) < 0 { closedUnderUs.add(1, ordering: .relaxed); break }
                close(descriptor)
            }
        }
        canary.start()
        defer { stop.store(true, ordering: .relaxed) }
        try await upload("first")
        try await upload("second")   // every object replaced
        #expect(closedUnderUs.load(ordering: .relaxed) == 0, "descriptors closed twice")
    }

    @Test func downloadURLInBothForms() async throws {
        let bucket = try LocalBucketFixture()
        let ref = bucket.storage.reference(withPath: "dir/a b.txt")
        _ = try await ref.putDataAsync(Data("hi".utf8))
        let url = try await ref.downloadURL()
        #expect(url.isFileURL)
        #expect(try Data(contentsOf: url) == Data("hi".utf8))

        let viaCompletion: URL? = await withCheckedContinuation { continuation in
            ref.downloadURL { url, error in
                #expect(error == nil)
                continuation.resume(returning: url)
            }
        }
        #expect(viaCompletion == url)

        let viaResult: Result<URL, any Error> = await withCheckedContinuation { continuation in
            ref.downloadURL { (result: Result<URL, any Error>) in continuation.resume(returning: result) }
        }
        #expect(try viaResult.get() == url)

        let missing: (any Error)? = await withCheckedContinuation { continuation in
            bucket.storage.reference(withPath: "nope").downloadURL { url, error in
                #expect(url == nil)
                continuation.resume(returning: error)
            }
        }
        #expect((missing as NSError?)?.code == StorageErrorCode.objectNotFound.rawValue)
        #expect((missing as NSError?)?.domain == "FIRStorageErrorDomain")
    }

    @Test func completionAndResultForms() async throws {
        let bucket = try LocalBucketFixture()
        let ref = bucket.storage.reference(withPath: "c.txt")
        let pair: (StorageMetadata?, (any Error)?) = await withCheckedContinuation { continuation in
            ref.putData(Data("abc".utf8), metadata: nil) { metadata, error in
                continuation.resume(returning: (metadata, error))
            }
        }
        #expect(pair.0?.size == 3)
        #expect(pair.1 == nil)

        let result: Result<StorageMetadata, any Error> = await withCheckedContinuation { continuation in
            ref.putFile(from: URL(fileURLWithPath: "/nonexistent/\(UUID())")) { result in
                continuation.resume(returning: result)
            }
        }
        #expect(throws: (any Error).self) { try result.get() }
        if case .failure(let error) = result {
            #expect((error as NSError).code == StorageErrorCode.unknown.rawValue)
            #expect(error is StorageError)
        }
    }

    @Test func handlersRunOnTheCallbackQueue() async throws {
        let bucket = try LocalBucketFixture()
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "test.callbacks")
        queue.setSpecific(key: key, value: "mine")
        bucket.storage.callbackQueue = queue
        let task = bucket.storage.reference(withPath: "q").putData(patternData(3 << 20))
        let onQueue: [Bool] = await withCheckedContinuation { continuation in
            let seen = UncheckedSendable(NSMutableArray())
            for status in [StorageTaskStatus.resume, .progress] {
                task.observe(status) { _ in seen.value.add(DispatchQueue.getSpecific(key: key) == "mine") }
            }
            task.observe(.success) { _ in
                seen.value.add(DispatchQueue.getSpecific(key: key) == "mine")
                continuation.resume(returning: seen.value.compactMap { $0 as? Bool })
            }
        }
        #expect(onQueue.count >= 3)
        #expect(onQueue.allSatisfy { $0 })
    }
}
