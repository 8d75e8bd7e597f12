import Foundation
import HoistTestSupport
import Testing

/// One set of counts: the summary line, `--json`'s `job_end`, the metrics file and
/// `hoist status` say the same of a run, whatever ended its files.
@Suite struct CountsAgreeTests {
    /// What a run said of itself in each place, and what `hoist status` says of it afterwards.
    struct Said {
        let status: Int32
        let line: String
        let jobEnd: [String: Any]
        let metrics: String
        let statusText: String

        func metric(_ outcome: String) -> Int? {
            metrics.split(separator: "\n").first { $0.hasPrefix("hoist_last_run_files{job=\"test\",outcome=\"\(outcome)\"}") }
                .flatMap { $0.split(separator: " ").last }.flatMap { Int($0) }
        }
        func jobEnd(_ key: String) -> Int? { jobEnd[key] as? Int }
    }

    func said(_ fixture: JobFixture, running process: (Process) throws -> Void = { _ in }) throws -> Said {
        let folder = fixture.directory.url
        let manifest = folder.appendingPathComponent("job.yaml").path
        let events = folder.appendingPathComponent("events.jsonl").path
        let metrics = folder.appendingPathComponent("metrics.prom").path
        let run = Process()
        run.executableURL = URL(fileURLWithPath: hoist)
        run.arguments = ["run", "--log-file", events, "--metrics-file", metrics, manifest]
        let output = Pipe()
        run.standardOutput = output
        run.standardError = FileHandle.nullDevice
        try run.run()
        try process(run)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        let lines = try String(contentsOfFile: events, encoding: .utf8).split(separator: "\n")
        let jobEnd = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "job_end" } ?? [:]
        let status = try runProcess(hoist, ["status", manifest])
        return Said(status: run.terminationStatus, line: text.split(separator: "\n").first { $0.hasPrefix("test: ") }.map(String.init) ?? text,
                    jobEnd: jobEnd, metrics: (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "", statusText: status.stdout)
    }

    @Test func twoFilesABeforeUploadHookFailedAreTwoFailuresEverywhere() throws {
        let fixture = try JobFixture()
        for name in ["a.txt", "b.txt", "c.txt"] { try fixture.file(name, 100) }
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            hooks:
              - inline: |
                  function before_upload(f)
                    if f.relpath ~= "a.txt" then error("refused " .. f.relpath) end
                  end
            """)
        let said = try said(fixture)
        #expect(said.status == 1)
        #expect(said.line.hasPrefix("test: 1 uploaded (100 B), 2 failed in "), "\(said.line)")
        #expect(said.jobEnd("failed") == 2 && said.jobEnd("uploaded") == 1, "\(said.jobEnd)")
        #expect(said.metric("failed") == 2 && said.metric("uploaded") == 1, "\(said.metrics)")
        #expect(said.statusText.contains("files: 1 uploaded, 0 pending, 2 failed"), "\(said.statusText)")
        #expect(said.statusText.contains(" 1 uploaded, 0 skipped, 2 failed, 100 B"), "\(said.statusText)")
    }

    /// Two file sets over one root, each taking its own kind of file: a file one set leaves out
    /// and the other uploads is not "not included", and one both leave out counts once.
    @Test func filesAnotherFileSetTakesAreNotCountedAsNotIncluded() throws {
        let fixture = try JobFixture()
        for name in ["p1.jpg", "p2.jpg", "p3.jpg", "n1.txt", "n2.txt", "debug.log"] { try fixture.file(name, 10) }
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files:
              - { root: src, include: '**/*.jpg', destination: 'img/{relpath}' }
              - { root: src, include: '**/*.txt', destination: 'txt/{relpath}' }
            """)
        let said = try said(fixture)
        #expect(said.status == 0)
        #expect(said.line.hasPrefix("test: 5 uploaded (50 B), 1 not included in "), "\(said.line)")
        #expect(said.jobEnd("skipped") == 1 && said.jobEnd("uploaded") == 5, "\(said.jobEnd)")
        #expect(said.metric("skipped") == 1, "\(said.metrics)")
        #expect(said.statusText.contains(" 5 uploaded, 1 skipped, 0 failed"), "\(said.statusText)")
    }

    /// Ctrl-C while one large file uploads and another waits for the large-file lane: both are
    /// cancelled (none failed) in the summary, `job_end`, the metrics and `hoist status`.
    @Test func filesAnInterruptedRunDidNotFinishAreCancelledEverywhere() throws {
        let fixture = try JobFixture()
        try fixture.file("big1.bin", 12_000_000)
        try fixture.file("big2.bin", 12_000_000)
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { bandwidth: 4MB/s, concurrency: 2 }\n")
        let uploads = fixture.directory.url.appendingPathComponent("bucket/.hoist/uploads")
        let said = try said(fixture) { run in
            // Once bytes move into the first file's part, interrupt.
            waitForAPart(in: uploads, holdingMoreThan: 1_000_000, seconds: 20)
            kill(run.processIdentifier, SIGINT)
        }
        #expect(said.status == 130)
        #expect(said.line.hasPrefix("test: 0 uploaded (0 B), 2 cancelled in "), "\(said.line)")
        #expect(said.jobEnd("cancelled") == 2 && said.jobEnd("failed") == 0, "\(said.jobEnd)")
        #expect(said.metric("cancelled") == 2 && said.metric("failed") == 0, "\(said.metrics)")
        #expect(said.statusText.contains(" 0 failed"), "\(said.statusText)")
        #expect(said.statusText.contains(" 0 uploaded, 0 skipped, 0 failed, 2 cancelled"), "\(said.statusText)")
        #expect(!said.statusText.contains("failed: "), "\(said.statusText)")
    }
}
