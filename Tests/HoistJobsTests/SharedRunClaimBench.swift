import Foundation
import HoistStorage
import HoistTestSupport
import Synchronization
import Testing
@testable import HoistJobs

/// `bench/pg-journal`, shared runs: what the plan and the workers ask of a PostgreSQL journal
/// per second. The plan writes N pending rows; then 1 and 4 workers (each with its own
/// connections, as processes would have) claim batches of 256 and record each file
/// `uploading` then `done`, as the recorder does, until the run has no file left. Runs only with
/// HOIST_BENCH=1; prints figures, asserts nothing about speed.
@Suite(.serialized) struct SharedRunClaimBench {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["HOIST_BENCH"] == "1"))
    func sharedRunClaims() throws {
        let files = JournalThroughputBench.files
        let url = try PostgresServer.shared().makeDatabase()
        let attributes = Journal.attributesText(ObjectResource(contentType: "image/x-exr"))
        func record(_ index: Int, runID: String) -> Journal.FileRecord {
            let relative = String(format: "d%03d/frame-%07d.exr", index % 500, index)
            return Journal.FileRecord(source: "/data/run/" + relative, destination: "frames/" + relative, size: Int64(1000 + index),
                                      mtime: 1_700_000_000 + Double(index), attributes: attributes, state: .pending, runID: runID)
        }
        for workers in [1, 4] {
            let coordinator = try SharedRun(journal: try PostgresJournal(url: url, job: "bench"), wait: false)
            precondition(coordinator.plans)
            var started = Date()
            for index in 0..<files {
                let row = record(index, runID: coordinator.runID)
                try coordinator.plan(row, fileSet: 0, relativePath: String(row.source.dropFirst("/data/run/".count)))
            }
            try coordinator.planFinished(skipped: 0, failed: 0)
            let planRate = Double(files) / Date().timeIntervalSince(started)
            let runs = try [coordinator] + (1..<workers).map { _ in try SharedRun(journal: try PostgresJournal(url: url, job: "bench"), wait: false) }
            started = Date()
            let claimed = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: workers) { index in
                let run = runs[index]
                do {
                    claiming: while true {
                        switch try run.claim(limit: 256) {
                        case .files(let batch):
                            claimed.withLock { $0 += batch.count }
                            func row(_ file: Journal.ClaimedFile, _ state: Journal.FileState) -> Journal.Write {
                                .file(Journal.FileRecord(source: file.source, destination: file.destination, size: file.size, mtime: file.mtime,
                                                         attributes: file.attributes, state: state,
                                                         session: state == .uploading ? "https://upload/\(file.size)" : nil,
                                                         md5Hash: state == .done ? "1B2M2Y8AsgTpgAmY7PhCfg==" : nil, runID: run.runID))
                            }
                            try run.journal.apply(batch.map { row($0, .uploading) })
                            try run.journal.apply(batch.map { row($0, .done) })
                        case .wait:
                            usleep(1000)
                        case .finished:
                            break claiming
                        }
                    }
                    try run.finish(SharedRun.WorkerEnd(status: .done, uploaded: 0, failed: 0, bytes: 0))
                } catch {
                    Issue.record("\(error)")
                }
            }
            let rate = Double(files) / Date().timeIntervalSince(started)
            for run in runs { run.release() }
            #expect(claimed.withLock { $0 } == files)
            print(String(format: "journal postgres shared run, %d worker%@: plan %.0f files/s; claim + record %.0f files/s "
                         + "(batches of 256, each file uploading then done)", workers, workers == 1 ? "" : "s", planRate, rate))
        }
    }
}
