import Foundation
import HoistHTTP
@testable import HoistJobs
@testable import HoistStorage
import HoistTestSupport
import Synchronization
import Testing

/// `upload.cpu`: files are compressed on a pool of CPU workers, ahead of the slots that send
/// them. The objects are the very gzip streams one file at a time made before, with
/// their checksums, on the local bucket and fake-gcs-server, beside plain files; a run stopped
/// with files made ready ahead counts them as not started and stores nothing of them.
@Suite struct CompressAheadTests {
    /// What the bucket must hold for `text`: the gzip stream `ByteSource.gzipped` makes of it
    /// alone (deterministic: no time, no name in the header).
    private func expectedGzip(_ text: Data, level: Int) throws -> Data {
        let gzipped = try ByteSource(data: text).gzipped(level: level, temporaryFolder: NSTemporaryDirectory())
        let reader = try gzipped.source.reader(from: 0)
        return try reader.read(upTo: Int(gzipped.source.size))
    }

    /// Many small logs (compressed in memory), two of 3 MiB and one that gzip hardly shrinks
    /// (into temporary files, sent as files read ahead of their connections), and plain files
    /// (the two largest read ahead too; 10 MiB a resumable session on GCS); two slots, two
    /// workers.
    private func writeFiles(_ fixture: JobFixture) throws -> (logs: [String: Data], plain: [String: Data]) {
        var logs: [String: Data] = [:]
        for index in 0..<24 {
            let text = index == 2 ? patternData(3 << 20, seed: 9) : logText(index < 2 ? 3 << 20 : 40_000 + index * 1_000)
            logs["log-\(index).log"] = text
            _ = try fixture.directory.write("src/logs/log-\(index).log", text)
        }
        var plain: [String: Data] = [:]
        for index in 0..<4 {
            let bytes = patternData([100_000, 200_001, 3 << 20, 10 << 20][index], seed: UInt8(index))
            plain["blob-\(index).bin"] = bytes
            _ = try fixture.directory.write("src/blobs/blob-\(index).bin", bytes)
        }
        return (logs, plain)
    }

    private let sets = """
        files:
          - { root: src/logs, destination: 'logs/{relpath}', compress: { format: gzip, level: 6 } }
          - { root: src/blobs, destination: 'blobs/{relpath}' }
        upload: { concurrency: 2, cpu: 2 }
        """

    @Test func aLocalBucketHoldsTheSameGzipStreamsAndPlainBytes() async throws {
        let fixture = try JobFixture()
        let (logs, plain) = try writeFiles(fixture)
        let job = try fixture.job("storage: { url: 'file:bucket' }\n" + sets)
        let summary = try await fixture.run(job)
        #expect(summary.uploaded == logs.count + plain.count && summary.failed == 0, "\(summary.failures)")
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        let storage = try job.makeStorage()
        for (name, text) in logs {
            let stored = try Data(contentsOf: bucket.appendingPathComponent("logs/\(name)"))
            #expect(stored == (try expectedGzip(text, level: 6)), "\(name)")
            let metadata = try await storage.reference(withPath: "logs/\(name)").getMetadata()
            #expect(metadata.resource.crc32c == crc32c(stored), "\(name)")
            #expect(metadata.contentEncoding == "gzip")
        }
        for (name, bytes) in plain {
            #expect(try Data(contentsOf: bucket.appendingPathComponent("blobs/\(name)")) == bytes, "\(name)")
        }
    }

    @Test func fakeGCSHoldsTheSameGzipStreamsAndPlainBytesWithTheirChecksums() async throws {
        let port = try FakeGCS.port()
        let bucket = try await FakeGCS.makeBucket()
        let fixture = try JobFixture()
        let (logs, plain) = try writeFiles(fixture)
        let job = try fixture.job("storage: { url: 'gs://\(bucket)' }\n" + sets,
                                  environment: ["HOME": "/root", "STORAGE_EMULATOR_HOST": "127.0.0.1:\(port)"])
        let summary = try await fixture.run(job)
        #expect(summary.uploaded == logs.count + plain.count && summary.failed == 0, "\(summary.failures)")
        let expected = try logs.mapValues { try expectedGzip($0, level: 6) }.map { ("logs/\($0.key)", $0.value) }
            + plain.map { ("blobs/\($0.key)", $0.value) }
        for (object, bytes) in expected {
            let path = "/storage/v1/b/\(bucket)/o/\(GCSBackend.encode(object))"
            let metadata = try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)\(path)"))
            let resource = try #require(try JSONSerialization.jsonObject(with: metadata.body) as? [String: Any])
            #expect(resource["crc32c"] as? String == crc32c(bytes), "\(object)")
            #expect(resource["size"] as? String == String(bytes.count), "\(object)")
            var download = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/download\(path)?alt=media",
                                       headers: [("Accept-Encoding", "gzip")])
            download.maxResponseBytes = nil
            #expect(try await CurlEngine.shared.perform(download).body == bytes, "\(object)")
        }
    }

    /// One slot, two workers: while the first file goes up, the next two are compressed ahead.
    /// Cancelled at the first file's end, the run counts those two as cancelled (files the walk
    /// had not reached are not counted, as in any interrupted run), and the bucket holds only
    /// the first file's whole, verified object.
    @Test func aRunCancelledWithFilesMadeReadyAheadCountsThemAndStoresNothingOfThem() async throws {
        let fixture = try JobFixture()
        var logs: [String: Data] = [:]
        for index in 0..<8 {
            logs["log-\(index).log"] = logText(600_000 + index)
            _ = try fixture.directory.write("src/log-\(index).log", logs["log-\(index).log"]!)
        }
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src, compress: { level: 9 } }]
            upload: { concurrency: 1, cpu: 2 }
            """)
        let canceller = CancelAtFirstSuccess()
        let journal = try SQLiteJournal(path: fixture.directory.url.appendingPathComponent("journal.sqlite").path)
        let runner = JobRunner(job: job, storage: try job.makeStorage(), observers: [canceller], journal: journal)
        canceller.runner.withLock { $0 = runner }
        let summary = await runner.run()
        #expect(summary.failed == 0, "\(summary.failures)")
        #expect(summary.interrupted)
        #expect(summary.uploaded == 1 && summary.cancelled == 2, "\(summary)")
        let bucket = fixture.directory.url.appendingPathComponent("bucket")
        let stored = try FileManager.default.contentsOfDirectory(atPath: bucket.path).filter { !$0.hasPrefix(".") }
        #expect(stored.count == summary.uploaded, "\(stored)")
        for name in stored { #expect(try gunzip(try Data(contentsOf: bucket.appendingPathComponent(name))) == logs[name], "\(name)") }
    }
}

private func crc32c(_ bytes: Data) -> String {
    var crc = Checksums.CRC32C()
    bytes.withUnsafeBytes { crc.update($0) }
    return crc.base64()
}

/// Cancels its run when the first file's upload succeeds.
private final class CancelAtFirstSuccess: JobObserver {
    let runner = Mutex<JobRunner?>(nil)
    var hearsFileEventsInPlace: Bool { true }
    func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {}
    func fileSkipped(_ item: PlanItem, reason: String) {}
    func jobFinished(_ summary: JobSummary) {}
    func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        if snapshot.status == .success { runner.withLock { $0 }?.cancelAll() }
    }
}
