import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// `bench/pg-journal`: what a run asks of its journal, per second, on PostgreSQL and, as the
/// baseline, on SQLite: recording (each file `uploading` then `done`, in the recorder's batches
/// of 1,000) and reading (a plan's walk-order pages of 1,000; single lookups). Runs only with
/// HOIST_BENCH=1; prints figures, asserts nothing about speed.
@Suite(.serialized) struct JournalThroughputBench {
    static let files = Int(ProcessInfo.processInfo.environment["HOIST_BENCH_FILES"] ?? "") ?? 50_000

    @Test(.enabled(if: ProcessInfo.processInfo.environment["HOIST_BENCH"] == "1"))
    func journalThroughput() throws {
        let server = try PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let stores: [(String, any JournalStore)] = [
            ("postgres", try Journal.open(try server.makeDatabase(), job: "bench")),
            ("sqlite", try Journal.open(directory.url.appendingPathComponent("bench.sqlite").path, job: "bench")),
        ]
        for (name, journal) in stores {
            let figures = try Self.measure(journal)
            print(String(format: "journal %@: record %.0f files/s (2 writes each, batches of 1000), plan read %.0f rows/s, lookup %.0f files/s",
                         name, figures.record, figures.read, figures.lookup))
        }
    }

    static func measure(_ journal: any JournalStore) throws -> (record: Double, read: Double, lookup: Double) {
        func row(_ index: Int, _ state: Journal.FileState) -> Journal.FileRecord {
            let source = String(format: "/data/run/d%03d/frame-%07d.exr", index % 500, index)
            return Journal.FileRecord(source: source, destination: "frames" + source, size: Int64(1000 + index),
                                      mtime: 1_700_000_000 + Double(index), attributes: #"{"contentType":"image/x-exr"}"#,
                                      state: state, session: state == .uploading ? "https://upload/\(index)" : nil,
                                      md5Hash: state == .done ? "1B2M2Y8AsgTpgAmY7PhCfg==" : nil, runID: "bench")
        }
        var started = Date()
        for state in [Journal.FileState.uploading, .done] {
            for batch in stride(from: 0, to: files, by: 1000) {
                try journal.apply((batch..<min(files, batch + 1000)).map { .file(row($0, state)) })
            }
        }
        let record = Double(files) / Date().timeIntervalSince(started)
        started = Date()
        var after: (source: String, destination: String)?
        var read = 0
        while true {
            let page = try journal.rows(from: "/data/run/", below: "/data/run0", after: after, limit: 1000)
            guard let last = page.last else { break }
            read += page.count
            after = (last.source, last.destination)
        }
        precondition(read == files, "read \(read) of \(files)")
        let readRate = Double(read) / Date().timeIntervalSince(started)
        started = Date()
        let lookups = min(files, 5000)
        for index in 0..<lookups {
            let record = row(index * (files / lookups), .done)
            let found = try journal.lookup(source: record.source, destination: record.destination)
            precondition(found?.state == .done)
        }
        return (record, readRate, Double(lookups) / Date().timeIntervalSince(started))
    }
}
