import Foundation
import HoistHTTP
import HoistJobs
import HoistStorage
import HoistTestSupport
import Synchronization
import Testing

/// A local bucket that counts sends in flight, to observe the concurrency bound.
final class CountingBackend: StorageBackend {
    let inner: LocalBucket
    let counts = Mutex((now: 0, most: 0))
    var bucket: String { inner.bucket }
    init(_ inner: LocalBucket) { self.inner = inner }

    func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        CountingSession(inner: try await inner.startUpload(to: path, attributes: attributes, size: size), owner: self)
    }
    func resumeUpload(id: String) async throws -> any UploadSession { try await inner.resumeUpload(id: id) }
    func delete(_ path: String, generation: Int64?) async throws { try await inner.delete(path, generation: generation) }
    func metadata(of path: String) async throws -> ObjectResource { try await inner.metadata(of: path) }
    func downloadURL(for path: String) async throws -> URL { try await inner.downloadURL(for: path) }

    struct CountingSession: UploadSession {
        let inner: any UploadSession
        let owner: CountingBackend
        var id: String { inner.id }
        func confirmedOffset() async throws -> Int64 { try await inner.confirmedOffset() }
        func abandon() async { await inner.abandon() }
        func send(from source: ByteSource, at offset: Int64, control: TransferControl,
                  progress: @escaping @Sendable (Int64) -> Void) async throws -> SendOutcome {
            owner.counts.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
            defer { owner.counts.withLock { $0.now -= 1 } }
            try await Task.sleep(for: .milliseconds(30))   // hold the slot long enough to overlap
            return try await inner.send(from: source, at: offset, control: control, progress: progress)
        }
    }
}

/// A local bucket that records, at each `persist()`, how many objects had been stored: a
/// journal must never hold more files done than were stored before its last persist.
final class PersistRecordingBackend: StorageBackend {
    let inner: LocalBucket
    let stored = Mutex(0)
    let persisted = Mutex<[Int]>([])
    var bucket: String { inner.bucket }
    init(_ inner: LocalBucket) { self.inner = inner }

    func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        Session(inner: try await inner.startUpload(to: path, attributes: attributes, size: size), owner: self)
    }
    func resumeUpload(id: String) async throws -> any UploadSession { try await inner.resumeUpload(id: id) }
    func delete(_ path: String, generation: Int64?) async throws { try await inner.delete(path, generation: generation) }
    func metadata(of path: String) async throws -> ObjectResource { try await inner.metadata(of: path) }
    func downloadURL(for path: String) async throws -> URL { try await inner.downloadURL(for: path) }
    func deferPersistence() { inner.deferPersistence() }
    func persist() throws {
        let count = stored.withLock { $0 }
        try inner.persist()
        persisted.withLock { $0.append(count) }
    }

    struct Session: UploadSession {
        let inner: any UploadSession
        let owner: PersistRecordingBackend
        var id: String { inner.id }
        func confirmedOffset() async throws -> Int64 { try await inner.confirmedOffset() }
        func abandon() async { await inner.abandon() }
        func send(from source: ByteSource, at offset: Int64, control: TransferControl,
                  progress: @escaping @Sendable (Int64) -> Void) async throws -> SendOutcome {
            let outcome = try await inner.send(from: source, at: offset, control: control, progress: progress)
            if case .finished = outcome { owner.stored.withLock { $0 += 1 } }
            return outcome
        }
    }
}

/// Records what observers hear.
final class RecordingObserver: JobObserver {
    let events = Mutex<[String]>([])
    let wantsTotalsEarly: Bool
    init(wantsTotalsEarly: Bool = false) { self.wantsTotalsEarly = wantsTotalsEarly }
    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {
        events.withLock { $0.append("start \(files.map(String.init) ?? "?") \(bytes.map(String.init) ?? "?")") }
    }
    func planCounted(files: Int, bytes: Int64) { events.withLock { $0.append("counted \(files) \(bytes)") } }
    func fileSkipped(_ item: PlanItem, reason: String) { events.withLock { $0.append("skip \(item.file.relativePath)") } }
    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        if snapshot.status == .success || snapshot.status == .failure {
            events.withLock { $0.append("\(snapshot.status == .success ? "success" : "failure") \(item.file.relativePath)") }
        }
    }
    func jobFinished(_ summary: JobSummary) { events.withLock { $0.append("end") } }
}

/// The time from the first upload starting to the last byte sent (before files are synced and renamed).
final class SendClock: JobObserver {
    private let times = Mutex<(first: Date?, last: Date?)>((nil, nil))
    var sendingSeconds: Double? {
        times.withLock { times in times.first.flatMap { first in times.last.map { $0.timeIntervalSince(first) } } }
    }
    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
    func fileSkipped(_ item: PlanItem, reason: String) {}
    func jobFinished(_ summary: JobSummary) {}
    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let now = Date()
        times.withLock { times in
            if snapshot.status == .resume, times.first == nil { times.first = now }
            if snapshot.status == .progress, snapshot.progress?.completedUnitCount == snapshot.progress?.totalUnitCount {
                times.last = now
            }
        }
    }
}

@Suite struct JobRunnerTests {
    @Test func runsToALocalBucket() async throws {
        let fixture = try JobFixture()
        try fixture.file("site/index.html", 300)
        try fixture.file("site/app.js", 5000)
        try fixture.file("notes.tmp", 10)
        let job = try fixture.job("""
            storage: { url: "file:bucket" }
            files:
              - root: src
                exclude: "*.tmp"
                destination: "web/{relpath}"
                rules: [{ match: "*.html", metadata: { cacheControl: no-cache } }]
            """)
        let storage = try job.makeStorage()
        let observer = RecordingObserver()
        let summary = await JobRunner(job: job, storage: storage, observers: [observer]).run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 2 && summary.skipped == 1 && summary.failed == 0 && summary.bytes == 5300)
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        #expect(try Data(contentsOf: bucket.appendingPathComponent("web/site/app.js")) == patternData(5000))
        let meta = try await storage.reference(withPath: "web/site/index.html").getMetadata()
        #expect(meta.cacheControl == "no-cache")
        #expect(meta.contentType == "text/html")
        let events = observer.events.withLock { $0 }
        #expect(events.first == "start 2 5300" && events.last == "end")
        #expect(events.contains("skip notes.tmp"))
    }

    /// Journal writes are batched, and a batch with done rows first makes the stored objects
    /// durable: the local bucket syncs once per batch, never per file, and no done row precedes it.
    @Test func doneRowsAreCommittedOnlyAfterTheirObjectsWerePersisted() async throws {
        let fixture = try JobFixture(inMemory: true)
        for index in 0..<1200 { try fixture.file("d\(index % 5)/f\(index).txt", 3) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 8 }")
        let backend = PersistRecordingBackend(LocalBucket(directory: fixture.directory.url.appendingPathComponent("bucket").path))
        let journal = try SQLiteJournal(path: fixture.directory.url.appendingPathComponent("journal.sqlite").path)
        let summary = await JobRunner(job: job, storage: Storage(url: "file:bucket", backend: backend), observers: [],
                                      journal: journal).run()
        #expect(summary.uploaded == 1200)
        #expect(!backend.inner.syncsEachObject)   // no fsync per object
        let persisted = backend.persisted.withLock { $0 }
        #expect(!persisted.isEmpty && persisted.count < 100, "\(persisted.count) syncs")   // batches, not one per file
        #expect(persisted.last == 1200)
        #expect(try journal.fileCounts()[.done] == 1200)
    }

    /// An upload event that no observer acts on is never handed to the callback queue (a thread
    /// hand-off per event and file): with the queue stopped, a run whose observers act on no
    /// upload event (`hoist cp` without a terminal) still uploads every file, and ends. Before,
    /// every upload waited there for its end.
    @Test func eventsNoObserverWantsSkipTheCallbackQueue() async throws {
        let observer = NoFileEvents()
        let (fixture, summary) = try await runFortyFilesWithTheCallbackQueueStopped(observer: observer)
        #expect(summary.uploaded == 40 && summary.failed == 0)
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        for index in [0, 17, 39] {
            #expect(try Data(contentsOf: bucket.appendingPathComponent("f\(index).txt")) == patternData(100 + index))
        }
        #expect(observer.heard.withLock { $0 }.isEmpty)
    }

    /// The journal hears upload events in place, on each upload's thread: with the callback
    /// queue stopped, a run with a journal still uploads every file, journals each one done
    /// with its checksums, and ends. Before, each event went through the queue, and each
    /// upload waited there before storing its object.
    @Test func theJournalHearsUploadsWithoutTheCallbackQueue() async throws {
        let journal = Mutex<SQLiteJournal?>(nil)
        let (_, summary) = try await runFortyFilesWithTheCallbackQueueStopped(observer: NoFileEvents()) { fixture in
            let store = try SQLiteJournal(path: fixture.directory.url.appendingPathComponent("journal.sqlite").path)
            journal.withLock { $0 = store }
            return store
        }
        #expect(summary.uploaded == 40 && summary.failed == 0)
        let done = try #require(journal.withLock { $0 }).files(state: .done, limit: 100)
        #expect(done.count == 40)
        for record in done {
            let index = Int(record.destination.dropFirst().dropLast(4))!
            #expect(record.md5Hash == md5Base64(patternData(100 + index)), "\(record.destination)")
        }
    }

    /// Runs a job of 40 small files to a local bucket whose callback queue never runs, and
    /// returns its summary; fails the test if the run has not ended after 20 seconds.
    private func runFortyFilesWithTheCallbackQueueStopped(
        observer: any JobObserver, journal makeJournal: (JobFixture) throws -> (any JournalStore)? = { _ in nil }
    ) async throws -> (JobFixture, JobSummary) {
        let fixture = try JobFixture()
        for index in 0..<40 { try fixture.file("f\(index).txt", 100 + index) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 4 }")
        let storage = try job.makeStorage()
        let stopped = DispatchQueue(label: "stopped callbacks")
        stopped.suspend()
        storage.callbackQueue = stopped
        defer { stopped.resume() }
        let journal = try makeJournal(fixture)
        let ended = Mutex<JobSummary?>(nil)
        let run = Task {
            let summary = await JobRunner(job: job, storage: storage, observers: [observer], journal: journal).run()
            ended.withLock { $0 = summary }
        }
        let deadline = Date().addingTimeInterval(20)
        while ended.withLock({ $0 }) == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let summary = try #require(ended.withLock { $0 }, "the run waited for the stopped callback queue")
        await run.value
        return (fixture, summary)
    }

    /// Acts on no upload event, as `hoist cp`'s walk warnings.
    final class NoFileEvents: JobObserver {
        let heard = Mutex<[StorageTaskStatus]>([])
        var fileEventStatuses: Set<StorageTaskStatus> { [] }
        func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
        func fileSkipped(_ item: PlanItem, reason: String) {}
        func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) { heard.withLock { $0.append(snapshot.status) } }
        func jobFinished(_ summary: JobSummary) {}
    }

    @Test func neverMoreThanConcurrencyInFlight() async throws {
        let fixture = try JobFixture()
        for index in 0..<16 { try fixture.file("f\(index).bin", 200_000) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 3 }")
        let backend = CountingBackend(LocalBucket(directory: fixture.directory.url.appendingPathComponent("bucket").path))
        let storage = Storage(url: "file:bucket", backend: backend)
        let summary = await JobRunner(job: job, storage: storage, observers: []).run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 16)
        let most = backend.counts.withLock { $0.most }
        #expect(most == 3)
    }

    @Test func bandwidthLimitHoldsWithinFifteenPercent() async throws {
        let fixture = try JobFixture()
        for index in 0..<4 { try fixture.file("part\(index).bin", 5_000_000) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 4, bandwidth: 5MB/s }")
        let clock = SendClock()
        let summary = try await ExclusiveTests.shared.run {
            await JobRunner(job: job, storage: try job.makeStorage(), observers: [clock]).run(totals: try Planner(job: job).check())
        }
        #expect(summary.uploaded == 4 && summary.bytes == 20_000_000)
        // 20 MB at 5 MB/s: 4 s from the first byte to the last, within 15%.
        let seconds = try #require(clock.sendingSeconds)
        #expect(seconds > 3.4 && seconds < 4.6, "sent in \(seconds) s")
    }

    @Test func smallFilesAreNotStarvedBehindLargeOnes() async throws {
        let fixture = try JobFixture()
        try fixture.file("a-large-1.bin", 9 << 20)
        try fixture.file("a-large-2.bin", 9 << 20)
        for index in 0..<5 { try fixture.file("z-small-\(index).txt", 100) }
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { concurrency: 2, bandwidth: 12MB/s }")
        let observer = RecordingObserver()
        _ = await JobRunner(job: job, storage: try job.makeStorage(), observers: [observer]).run(totals: try Planner(job: job).check())
        let done = observer.events.withLock { $0 }.filter { $0.hasPrefix("success") }
        // Both large files come first in the walk, but the second waits for the large lane while
        // the small ones go through the free slot.
        let lastSmall = try #require(done.lastIndex { $0.contains("small") })
        let secondLarge = try #require(done.firstIndex { $0.contains("large-2") })
        #expect(lastSmall < secondLarge, "\(done)")
    }

    @Test func maxErrorsStopsStartingUploads() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "403:1000"])
        let fixture = try JobFixture()
        for index in 0..<20 { try fixture.file("f\(index).txt", 100) }
        let job = try fixture.job("storage: { url: 'gs://\(bucket)' }\nfiles: [{ root: src }]\nupload: { concurrency: 2, maxErrors: 3 }",
                                  environment: ["STORAGE_EMULATOR_HOST": "127.0.0.1:\(proxy.port)"])
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: []).run(totals: try Planner(job: job).check())
        #expect(summary.failed >= 3 && summary.failed <= 4)
        #expect(summary.uploaded == 0)
        #expect(summary.failures.first?.code == .unauthorized)
    }

    @Test func runsToFakeGCS() async throws {
        let bucket = try await FakeGCS.makeBucket()
        let fixture = try JobFixture()
        try fixture.file("photos/a.jpg", 2000)
        try fixture.file("photos/b.jpg", 3 << 20)
        let job = try fixture.job("""
            storage: { url: "gs://\(bucket)", multipartThreshold: 1MiB }
            files:
              - root: src
                destination: "backup/{relpath}"
                metadata: { customMetadata: { origin: "{job}" } }
            """, environment: ["STORAGE_EMULATOR_HOST": "127.0.0.1:\(try FakeGCS.port())"])
        let storage = try job.makeStorage()
        let summary = await JobRunner(job: job, storage: storage, observers: []).run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 2 && summary.failed == 0)
        #expect(try await FakeGCS.download(bucket: bucket, object: "backup/photos/b.jpg") == patternData(3 << 20))
        let meta = try await storage.reference(withPath: "backup/photos/a.jpg").getMetadata()
        #expect(meta.customMetadata?["origin"] == "test")
        #expect(meta.contentType == "image/jpeg")
    }

    /// A run against Cloud Storage runs its uploads on the HTTP engine's thread (the engine is
    /// their task executor): an upload's events, heard in place, come on that thread, so a
    /// request's answer resumed its upload without waking another thread.
    @Test func aCloudStorageRunResumesItsUploadsOnTheEnginesThread() async throws {
        let threads = try await threadsOfUploads(12, journal: nil)
        #expect(threads.count == 24)   // .resume and .success of each file
        let all = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).map {
            ((try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .newlines)
        }
        #expect(threads.allSatisfy { $0.onEngine }, "\(threads); the process's threads: \(all.sorted())")
        // (The name is for top and perf; one full run saw every event on a thread named as a
        // dispatch worker. The test says which, if it comes again.)
        #expect(Set(threads.map(\.name)) == ["hoist.curl"], "\(threads); the process's threads: \(all.sorted())")
    }

    /// A run with a PostgreSQL journal keeps the global executor: its journal's reads and claims
    /// wait on the network, and must not hold up the engine's transfers meanwhile.
    @Test func aRunWithAPostgreSQLJournalStaysOffTheEnginesThread() async throws {
        let url = try PostgresServer.shared().makeDatabase()
        let threads = try await threadsOfUploads(6) { try PostgresJournal(url: url, job: $0) }
        #expect(threads.count == 12, "\(threads)")
        #expect(threads.allSatisfy { !$0.onEngine }, "\(threads)")
    }

    /// Runs `count` small files to fake-gcs-server (concurrency 4, with the journal made for the
    /// job's name) and returns the thread of each upload's `.resume` and `.success` events.
    private func threadsOfUploads(
        _ count: Int, journal: ((String) throws -> any JournalStore)?
    ) async throws -> [(onEngine: Bool, name: String)] {
        let bucket = try await FakeGCS.makeBucket()
        let fixture = try JobFixture()
        for index in 0..<count { try fixture.file("f\(index).txt", 100 + index) }
        let job = try fixture.job("""
            storage: { url: "gs://\(bucket)" }
            files: [{ root: src }]
            upload: { concurrency: 4 }
            """, environment: ["STORAGE_EMULATOR_HOST": "127.0.0.1:\(try FakeGCS.port())"])
        let observer = ThreadsOfEvents()
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [observer],
                                      journal: try journal?(job.manifest.name)).run()
        #expect(summary.uploaded == count && summary.failed == 0)
        return observer.threads.withLock { $0 }
    }

    /// Hears the start and end of each upload in place, and notes the thread of each.
    final class ThreadsOfEvents: JobObserver {
        let threads = Mutex<[(onEngine: Bool, name: String)]>([])
        var fileEventStatuses: Set<StorageTaskStatus> { [.resume, .success] }
        var hearsFileEventsInPlace: Bool { true }
        func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
        func fileSkipped(_ item: PlanItem, reason: String) {}
        func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
            // (Others heard in place, a journal's, may bring progress events too: those come
            // from the engine's transfer callbacks, wherever the run's tasks run.)
            guard fileEventStatuses.contains(snapshot.status) else { return }
            let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            threads.withLock { $0.append((CurlEngine.shared.isCurrentThread, name.trimmingCharacters(in: .newlines))) }
        }
        func jobFinished(_ summary: JobSummary) {}
    }
}
