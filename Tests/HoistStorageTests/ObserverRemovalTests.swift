import Foundation
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// A handler removed before its event is delivered never runs, whatever was already on its way
/// to the callback queue: the guide's "observe, then remove" pattern, under load.
@Suite struct ObserverRemovalTests {
    /// Progress events sent to a stopped callback queue while the handler is registered, then
    /// the handler removed, then the queue started: the removed handler never runs.
    @Test func aHandlerRemovedWhileItsEventsWaitInTheQueueNeverRuns() async throws {
        for round in 0..<10 {
            let bucket = try LocalBucketFixture()
            let queue = DispatchQueue(label: "stopped callbacks \(round)")
            bucket.storage.callbackQueue = queue
            let task = StorageUploadTask(reference: bucket.storage.reference(withPath: "r\(round).bin"), content: .data(patternData(3 << 20)),
                                         metadata: nil)
            let recorder = EventRecorder(task)
            let ran = Atomic<Int>(0)
            let handle = task.observe(.progress) { _ in ran.add(1, ordering: .relaxed) }
            let progressed = DispatchSemaphore(value: 0)
            task.observeInPlace([.progress]) { _ in progressed.signal() }
            queue.suspend()
            task.enqueue()
            await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    progressed.wait()   // a progress event was sent to the queue, the handler still registered
                    resume.resume()
                }
            }
            task.removeObserver(withHandle: handle)
            queue.resume()
            let last = await recorder.finished()
            #expect(last.status == .success)
            #expect(ran.load(ordering: .relaxed) == 0, "round \(round): the removed handler ran")
        }
    }

    /// Added while the task already reports progress (so its first call is sent at once), and
    /// removed at once: it never runs. Each `removeAllObservers` form too.
    @Test(arguments: ["handle", "status", "all"])
    func aHandlerAddedAndRemovedAtOnceNeverRuns(removal: String) async throws {
        for round in 0..<20 {
            let bucket = try LocalBucketFixture()
            let queue = DispatchQueue(label: "callbacks \(round)")
            bucket.storage.callbackQueue = queue
            bucket.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 32 << 20)
            // 4 MiB at 32 MiB/s: progress for an eighth of a second after the removal.
            let task = bucket.storage.reference(withPath: "a\(round).bin").putData(patternData(4 << 20))
            let progressed = DispatchSemaphore(value: 0)
            task.observeInPlace([.progress]) { _ in progressed.signal() }
            await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    progressed.wait()
                    resume.resume()
                }
            }
            let ran = Atomic<Int>(0)
            queue.suspend()
            let handle = task.observe(.progress) { _ in ran.add(1, ordering: .relaxed) }
            let retryHandle = task.observeRetries { _ in ran.add(1, ordering: .relaxed) }
            switch removal {
            case "handle":
                task.removeObserver(withHandle: handle)
                task.removeObserver(withHandle: retryHandle)
            case "status": task.removeAllObservers(for: .progress)
            default: task.removeAllObservers()
            }
            queue.resume()
            let done = DispatchSemaphore(value: 0)
            task.observe(.success) { _ in done.signal() }
            task.observe(.failure) { _ in done.signal() }
            await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    done.wait()
                    resume.resume()
                }
            }
            queue.sync {}
            #expect(ran.load(ordering: .relaxed) == 0, "round \(round), \(removal)")
        }
    }

    /// The Firebase guide's snippets as top-level Swift 6 code (`Tests/swift6-snippets`,
    /// compiled in the Swift 6 language mode by the package's build): closures there are
    /// inferred `@MainActor`, and a plain handler type let them be called off the main actor,
    /// which stopped the process with `Illegal instruction`. Five runs, for the removed
    /// observer too.
    @Test func theGuidesSnippetsRunAsTopLevelSwift6Code() throws {
        for _ in 0..<5 {
            let folder = try TemporaryDirectory()
            let run = try runProcess(productsDirectory.appendingPathComponent("hoist-swift6-snippets").path,
                                     ["file://" + folder.path + "/bucket"])
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            let lines = run.stdout.split(separator: "\n").map(String.init)
            #expect(lines == ["putData: 19 bytes", "downloadURL: rivers.jpg", "progress: 100%", "putFile: image/jpeg, 3145728 bytes",
                              "Result: result.txt", "async: 5 bytes"], "\(run.stdout)\(run.stderr)")
            #expect(try Data(contentsOf: folder.url.appendingPathComponent("bucket/images/rivers.jpg")) == Data("rivers, from memory".utf8))
        }
    }
}
