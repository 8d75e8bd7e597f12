import Foundation
import HoistStorage
import HoistTestSupport
import Testing

/// FirebaseStorage's public upload API as code written for it spells it (types written out, as
/// its own API test does): if a signature drifts, this file stops compiling. Plain `import`,
/// not `@testable`, so only public API is used.
@Suite struct APISurfaceTests {
    @Test func uploadAPICompilesAsFirebaseCodeWritesIt() async throws {
        let directory = try TemporaryDirectory()
        let storage: Storage = Storage.storage(url: "file://" + directory.url.appendingPathComponent("bucket").path)
        storage.maxUploadRetryTime = storage.maxUploadRetryTime + 1
        storage.maxDownloadRetryTime = storage.maxDownloadRetryTime + 1
        storage.maxOperationRetryTime = storage.maxOperationRetryTime + 1
        storage.uploadChunkSizeBytes = Int64.max
        let queue: DispatchQueue = storage.callbackQueue
        storage.callbackQueue = queue

        var ref: StorageReference = storage.reference()
        _ = ref.storage
        _ = ref.bucket
        _ = ref.fullPath
        _ = ref.name
        ref = ref.root()
        ref = ref.child("path")
        ref = ref.parent()!.child("api.txt")
        _ = try storage.reference(for: URL(string: "gs://bucket/path")!)
        _ = storage.reference(forURL: "gs://bucket/path")
        _ = storage.reference(withPath: "path")
        _ = ref.copy() as? StorageReference

        let metadata = StorageMetadata()
        metadata.contentType = "text/plain"
        _ = metadata.copy() as? StorageMetadata
        let file = try directory.write("api.txt", Data("api".utf8))

        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for _ in 0..<4 { group.enter() }
            _ = ref.putData(Data("a".utf8), metadata: metadata) { (result: Result<StorageMetadata, Error>) in group.leave() }
            _ = ref.putData(Data("b".utf8), metadata: metadata) { (result: StorageMetadata?, error: Error?) in group.leave() }
            _ = ref.putFile(from: file, metadata: metadata) { (result: Result<StorageMetadata, Error>) in group.leave() }
            _ = ref.putFile(from: file, metadata: metadata) { (result: StorageMetadata?, error: Error?) in group.leave() }
            group.notify(queue: .global()) { done.resume() }
        }
        ref.getMetadata { (result: Result<StorageMetadata, Error>) in }
        ref.getMetadata { (result: StorageMetadata?, error: Error?) in }
        ref.downloadURL { (result: URL?, error: Error?) in }
        ref.downloadURL { (result: Result<URL, Error>) in }
        let stored: StorageMetadata = try await ref.putDataAsync(Data("c".utf8), metadata: metadata) { (progress: Progress?) in }
        _ = try await ref.putFileAsync(from: file, metadata: nil, onProgress: nil)
        _ = try await ref.getMetadata()
        _ = try await ref.downloadURL()
        #expect(stored.size == 1)

        let task: StorageUploadTask = ref.putData(Data("d".utf8))
        let handle: String = task.observe(.pause) { (snapshot: StorageTaskSnapshot) in
            _ = snapshot.task
            _ = snapshot.metadata
            _ = snapshot.reference
            _ = snapshot.progress
            _ = snapshot.error
            _ = snapshot.status
        }
        task.removeObserver(withHandle: handle)
        task.removeAllObservers(for: .progress)
        task.removeAllObservers()
        let base: StorageTask = task
        _ = base.snapshot
        let managed: StorageTaskManagement = task
        managed.enqueue()
        managed.pause?()
        managed.resume?()
        managed.cancel?()

        do {
            _ = try await ref.child("missing").putFileAsync(from: URL(string: "no/such/file")!)
        } catch let StorageError.unknown(message, serverError) {
            #expect(message.hasPrefix("File at URL: no/such/file"))
            #expect(serverError.isEmpty)
        }
        let nsError = StorageError.cancelled as NSError
        #expect(nsError.domain == StorageErrorDomain && nsError.code == StorageErrorCode.cancelled.rawValue)
    }
}
