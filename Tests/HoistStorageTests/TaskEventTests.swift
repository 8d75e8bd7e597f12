import Foundation
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistStorage

/// The order and content of status events, as observers see them.
@Suite struct TaskEventTests {
    /// Returns once the callback queue (serial) has run every delivery handed to it before this
    /// call: a task hands each event's handlers to it in one block, under its lock, as the event
    /// happens. What a fixed wait hoped for, without guessing how long it takes.
    func callbacksRun(_ storage: Storage) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in storage.callbackQueue.async { done.resume() } }
    }

    @Test func successOrder() async throws {
        let bucket = try LocalBucketFixture()
        let size = 3 << 20 + 5
        let (task, recorder) = EventRecorder.upload(.data(patternData(size)), to: bucket.storage.reference(withPath: "s.bin"))
        let last = await recorder.finished()
        #expect(folded(recorder.statuses) == [.resume, .progress, .success])
        let progress = recorder.events.filter { $0.status == .progress }
        #expect(progress.map(\.completed) == [1 << 20, 2 << 20, 3 << 20, Int64(size)])
        #expect(progress.allSatisfy { $0.total == Int64(size) })
        #expect(progress.filter { $0.completed == $0.total }.count == 1)
        #expect(last.metadata?.size == Int64(size))
        #expect(last.error == nil)
        #expect(last.task === task)
        #expect(last.reference.fullPath == "s.bin")
    }

    /// In-place observers (a scheduler's journal) hear the task's events in order on the
    /// upload's own thread: with the callback queue stopped the upload still ends, and a cancel
    /// from the last progress event's in-place handler still wins (nothing is stored).
    @Test func inPlaceObserversHearEventsWithoutTheCallbackQueue() async throws {
        let bucket = try LocalBucketFixture()
        let stopped = DispatchQueue(label: "stopped callbacks")
        stopped.suspend()
        bucket.storage.callbackQueue = stopped
        defer { stopped.resume() }
        let file = try bucket.directory.write("in-place.bin", patternData(300_000))
        for cancelAtTheEnd in [false, true] {
            let task = bucket.storage.reference(withPath: "in-place-\(cancelAtTheEnd).bin").uploadTask(
                source: .success(try ByteSource(filePath: file.path)), path: file.path, size: 300_000, metadata: nil,
                resumingSession: nil, unlessStored: false)
            let heard = Mutex<[StorageTaskStatus]>([])
            task.observeInPlace([.resume, .progress, .success, .failure]) { snapshot in
                heard.withLock { $0.append(snapshot.status) }
                if cancelAtTheEnd, snapshot.status == .progress, snapshot.progress?.completedUnitCount == 300_000 { task.cancel() }
            }
            let last = await task.runToEnd()
            if cancelAtTheEnd {
                #expect(heard.withLock { $0 } == [.resume, .progress, .failure])
                #expect(errorCode(last) == .cancelled)
                #expect(!FileManager.default.fileExists(atPath: bucket.bucketPath + "/in-place-true.bin"))
            } else {
                #expect(heard.withLock { $0 } == [.resume, .progress, .success])
                #expect(try bucket.storedBytes("in-place-false.bin") == patternData(300_000))
            }
        }
    }

    @Test func failureOrderForAMissingFile() async throws {
        let bucket = try LocalBucketFixture()
        let task = bucket.storage.reference(withPath: "x").putFile(from: URL(fileURLWithPath: "/no/such/file-\(UUID())"))
        let recorder = EventRecorder(task)
        let last = await recorder.finished()
        // The task starts as putFile returns and this failure comes at once: the `.resume` may
        // fire before the recorder observes it (as in the SDK), but nothing else may come.
        #expect(recorder.statuses == [.resume, .failure] || recorder.statuses == [.failure], "\(recorder.statuses)")
        #expect(errorCode(last) == .unknown)
        #expect(last.metadata == nil)
        #expect((last.error as? NSError)?.localizedDescription.contains("is not reachable") == true)
        #expect(bucket.allFiles().filter { !$0.hasPrefix(".hoist/uploads") }.isEmpty)
    }

    @Test func cancelBeforeAnyByteMoves() async throws {
        let bucket = try LocalBucketFixture()
        let file = try bucket.directory.write("f", patternData(10 << 20))
        // The seed's sequence: pause, resume, cancel, straight after starting.
        let task = bucket.storage.reference(withPath: "f").putFile(from: file)
        task.pause()
        task.resume()
        task.cancel()
        let recorder = EventRecorder(task)
        let last = await recorder.finished()
        #expect(errorCode(last) == .cancelled)
        #expect(bucket.allFiles() == [])
    }

    @Test func pauseStopsIOAndResumeContinues() async throws {
        let bucket = try LocalBucketFixture()
        let data = patternData(48 << 20)
        let ref = bucket.storage.reference(withPath: "paused.bin")
        let task = ref.putData(data)
        let pausedOnce = Mutex(false)
        let recorder = EventRecorder(task) { _ in
            if pausedOnce.withLock({ let first = !$0; $0 = true; return first }) { task.pause() }
        }
        // Wait for the pause event.
        while !recorder.statuses.contains(.pause) { try await Task.sleep(for: .milliseconds(5)) }
        let partFiles = { bucket.allFiles().filter { $0.hasSuffix(".part") } }
        let partSize = { () -> Int in
            guard let part = partFiles().first else { return -1 }
            return (try? Data(contentsOf: URL(fileURLWithPath: bucket.bucketPath).appendingPathComponent(part)).count) ?? -1
        }
        try await Task.sleep(for: .milliseconds(150))
        let heldBytes = partSize()
        let eventsWhilePaused = recorder.events.count
        try await Task.sleep(for: .milliseconds(400))
        // Really stopped: the part file does not grow and no event arrives.
        #expect(partSize() == heldBytes)
        #expect(heldBytes > 0 && heldBytes < data.count)
        #expect(recorder.events.count == eventsWhilePaused)
        #expect(task.snapshot.status == .pause)

        task.resume()
        let last = await recorder.finished()
        #expect(last.status == .success)
        #expect(try bucket.storedBytes("paused.bin") == data)
        let statuses = folded(recorder.statuses)
        #expect(statuses == [.resume, .progress, .pause, .resume, .progress, .success])
        // Progress only grows, and ends at 100% exactly once.
        let progress = recorder.events.filter { $0.status == .progress }.map(\.completed)
        #expect(progress == progress.sorted())
        #expect(Set(progress).count == progress.count)
        #expect(progress.last == Int64(data.count))
    }

    @Test func pauseAndResumeOutsideTheirStatesDoNothing() async throws {
        let bucket = try LocalBucketFixture()
        let (task, recorder) = EventRecorder.upload(.data(Data("tiny".utf8)), to: bucket.storage.reference(withPath: "n"))
        task.resume()   // running: no second .resume
        _ = await recorder.finished()
        task.pause()    // finished: nothing
        task.resume()
        await callbacksRun(bucket.storage)
        #expect(recorder.statuses == [.resume, .progress, .success])
    }

    @Test func lateObserversFireOnceAtOnce() async throws {
        let bucket = try LocalBucketFixture()
        let task = bucket.storage.reference(withPath: "late").putData(Data("late".utf8))
        _ = await EventRecorder(task).finished()

        // After success: a success observer fires once with the metadata; others never.
        let calls = Mutex<[StorageTaskStatus]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            task.observe(.progress) { _ in calls.withLock { $0.append(.progress) } }
            task.observe(.failure) { _ in calls.withLock { $0.append(.failure) } }
            task.observe(.success) { snapshot in
                #expect(snapshot.metadata?.size == 4)
                calls.withLock { $0.append(.success) }
                done.resume()
            }
        }
        await callbacksRun(bucket.storage)
        #expect(calls.withLock { $0 } == [.success])

        // After failure: a failure observer fires once with the error.
        let failed = bucket.storage.reference().putData(Data("root".utf8))
        _ = await EventRecorder(failed).finished()
        let error: (any Error)? = await withCheckedContinuation { continuation in
            failed.observe(.failure) { continuation.resume(returning: $0.error) }
        }
        #expect((error as NSError?)?.code == StorageErrorCode.invalidArgument.rawValue)
    }

    @Test func lateObserverOfAPausedTask() async throws {
        let bucket = try LocalBucketFixture()
        let task = bucket.storage.reference(withPath: "p").putData(patternData(16 << 20))
        task.pause()
        let status: StorageTaskStatus = await withCheckedContinuation { continuation in
            task.observe(.pause) { continuation.resume(returning: $0.status) }
        }
        #expect(status == .pause)
        let resumed: StorageTaskStatus = await withCheckedContinuation { continuation in
            task.observe(.resume) { continuation.resume(returning: $0.status) }
            task.resume()
        }
        #expect(resumed == .resume)
        #expect(await EventRecorder(task).finished().status == .success)
    }

    @Test func removedObserversAreNotCalled() async throws {
        let bucket = try LocalBucketFixture()
        // Slow enough that no event fires before the observers below are removed (the first
        // piece waits half a second for the limiter), even on a loaded machine.
        bucket.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 2 << 20)
        let task = bucket.storage.reference(withPath: "r").putData(patternData(4 << 20))
        let calls = Mutex<[String]>([])
        let one = task.observe(.progress) { _ in calls.withLock { $0.append("one") } }
        task.observe(.progress) { _ in calls.withLock { $0.append("two") } }
        task.observe(.pause) { _ in calls.withLock { $0.append("pause") } }
        task.observe(.resume) { _ in calls.withLock { $0.append("resume") } }
        task.removeObserver(withHandle: one)
        task.removeObserver(withHandle: "not-a-handle")
        task.removeAllObservers(for: .pause)
        let recorder = EventRecorder(task)
        _ = await recorder.finished()
        await callbacksRun(bucket.storage)
        let seen = calls.withLock { $0 }
        #expect(!seen.contains("one"))
        #expect(!seen.contains("pause"))
        #expect(seen.filter { $0 == "two" }.count == recorder.events.filter { $0.status == .progress }.count)
        #expect(seen.contains("resume"))
    }

    @Test func removeAllObservers() async throws {
        let bucket = try LocalBucketFixture()
        bucket.storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: 2 << 20)
        let task = bucket.storage.reference(withPath: "all").putData(patternData(2 << 20))
        let calls = Mutex(0)
        for status in [StorageTaskStatus.progress, .success, .failure, .pause] {
            task.observe(status) { _ in calls.withLock { $0 += 1 } }
        }
        task.removeAllObservers()
        let recorder = EventRecorder(task)
        _ = await recorder.finished()
        await callbacksRun(bucket.storage)
        #expect(calls.withLock { $0 } == 0)
    }

    @Test func observersAreDroppedAfterTheEnd() async throws {
        let bucket = try LocalBucketFixture()
        let task = bucket.storage.reference(withPath: "end").putData(Data("end".utf8))
        _ = await EventRecorder(task).finished()
        // A progress observer added now is neither called at once nor kept.
        let calls = Mutex(0)
        task.observe(.progress) { _ in calls.withLock { $0 += 1 } }
        task.observe(.resume) { _ in calls.withLock { $0 += 1 } }
        await callbacksRun(bucket.storage)
        #expect(calls.withLock { $0 } == 0)
    }

    @Test func asyncUploadIsCancelledWithItsTask() async throws {
        let bucket = try LocalBucketFixture()
        let ref = bucket.storage.reference(withPath: "async-cancel.bin")
        let upload = Task {
            try await ref.putDataAsync(patternData(256 << 20)) { _ in }
        }
        try await Task.sleep(for: .milliseconds(20))
        upload.cancel()
        await #expect { try await upload.value } throws: { error in
            (error as NSError).code == StorageErrorCode.cancelled.rawValue
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(bucket.allFiles() == [])
    }

    @Test func asyncProgressCallback() async throws {
        let bucket = try LocalBucketFixture()
        let seen = Mutex<[Int64]>([])
        let stored = try await bucket.storage.reference(withPath: "ap").putDataAsync(patternData(3 << 20)) { progress in
            seen.withLock { $0.append(progress?.completedUnitCount ?? -1) }
        }
        #expect(stored.size == 3 << 20)
        #expect(seen.withLock { $0 }.last == 3 << 20)
    }
}
