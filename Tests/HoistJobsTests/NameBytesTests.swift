import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// Names are bytes. "café" with U+00E9 and "café" with "e" + U+0301 are two files,
/// two rows and two objects, though Swift's String calls them equal.
@Suite struct NameBytesTests {
    @Test func canonicallyEquivalentTwinsAreTwoFilesToTheJournal() throws {
        let fixture = try JobFixture()
        let composed = "caf\u{E9}.txt", decomposed = "cafe\u{301}.txt"
        #expect(composed == decomposed && !composed.hasSameBytes(as: decomposed))   // what the test is about
        try fixture.directory.write("src/" + composed, Data("composed".utf8))
        try fixture.directory.write("src/" + decomposed, Data("decomposed!".utf8))
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        func end(_ run: (status: Int32, stdout: String, stderr: String)) -> [String: Any] {
            let lines = run.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            return lines.last { $0["event"] as? String == "job_end" } ?? [:]
        }
        let first = try runProcess(hoist, ["run", "--json", manifest])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(end(first)["uploaded"] as? Int == 2)
        // Each object holds its own file's bytes.
        let bucket = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.url.appendingPathComponent("bucket").path)
            .filter { !$0.hasPrefix(".") }
        #expect(Set(bucket.map(Bytewise.init)) == [Bytewise(composed), Bytewise(decomposed)], "\(bucket.map { Array($0.utf8) })")
        for (name, text) in [(composed, "composed"), (decomposed, "decomposed!")] {
            let object = fixture.directory.url.appendingPathComponent("bucket").appendingPathComponent(name)
            #expect(try String(contentsOf: object, encoding: .utf8) == text)
        }
        // Two rows, both done: the next run sends nothing.
        let status = try runProcess(hoist, ["status", manifest])
        #expect(status.stdout.contains("files: 2 uploaded, 0 pending, 0 failed"), "\(status.stdout)")
        let second = try runProcess(hoist, ["run", "--json", manifest])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(end(second)["uploaded"] as? Int == 0, "\(second.stdout)")
        #expect(end(second)["unchanged"] as? Int == 2, "\(second.stdout)")
    }

    /// The shared-run case: workers claim twins as two rows, upload both, and end.
    @Test func twinsInASharedRunAreTwoRowsAndTheWorkersEnd() throws {
        let server = try PostgresServer.shared()
        let url = try server.makeDatabase()
        let database = PostgresServer.database(of: url)
        let fixture = try JobFixture()
        let composed = "caf\u{E9}.txt", decomposed = "cafe\u{301}.txt"
        try fixture.directory.write("src/" + composed, Data("composed".utf8))
        try fixture.directory.write("src/" + decomposed, Data("decomposed!".utf8))
        for index in 0..<6 { try fixture.file("f\(index).txt", 100) }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let workers = try (0..<2).map { _ in try StartedProcess(hoist, ["run", "--worker", "--journal", url, manifest]) }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, workers.contains(where: { $0.process.isRunning }) { usleep(100_000) }
        let stuck = workers.filter { $0.process.isRunning }.count
        let rows = try server.psql("SELECT encode(convert_to(source, 'UTF8'), 'hex'), state, worker FROM hoist_file", database: database).stdout
        #expect(stuck == 0, "a worker never ended: \(rows)")
        for worker in workers {
            let result = worker.finish(within: 0)
            #expect(result.status == 0, "\(result.output)")
        }
        #expect(try server.psql("SELECT count(*) FROM hoist_file WHERE state = 'done'", database: database).stdout == "8\n")
        for (name, text) in [(composed, "composed"), (decomposed, "decomposed!")] {
            let object = fixture.directory.url.appendingPathComponent("bucket").appendingPathComponent(name)
            #expect(try String(contentsOf: object, encoding: .utf8) == text)
        }
    }
}
