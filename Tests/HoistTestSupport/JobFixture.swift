import Foundation
import HoistJobs

/// A job in a temporary folder: files are written under `src/`, the manifest beside them.
public struct JobFixture {
    public let directory: TemporaryDirectory
    /// - Parameter inMemory: on tmpfs if it can hold a local bucket (`TemporaryDirectory(inMemory:)`).
    public init(inMemory: Bool = false) throws { directory = try TemporaryDirectory(inMemory: inMemory) }

    @discardableResult
    public func file(_ path: String, _ size: Int = 10, modified: Date? = nil) throws -> URL {
        let url = try directory.write("src/" + path, patternData(size))
        if let modified { try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: url.path) }
        return url
    }

    public func job(_ body: String, environment: [String: String] = ["HOME": "/root"]) throws -> Job {
        let text = "version: 1\nname: test\njournal: journal.sqlite\n" + body
        let path = directory.url.appendingPathComponent("job.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return try Job(file: path, environment: environment)
    }

    public func plan(_ body: String) throws -> [PlanItem] { Array(Planner(job: try job(body))) }

    /// Runs `job` in this process with its journal at `journal.sqlite` in the fixture.
    public func run(_ job: Job) async throws -> JobSummary {
        let journal = try SQLiteJournal(path: directory.url.appendingPathComponent("journal.sqlite").path)
        return await JobRunner(job: job, storage: try job.makeStorage(), observers: [], journal: journal).run()
    }
}

/// A job of a `JobFixture` uploading to gcp-storage-emulator through a fault proxy that logs
/// every request (to count resumes and finalizing answers): objects go under `prefix`, large
/// files resumably (1 MiB threshold), at `bandwidth`.
public struct EmulatorJob {
    public let port: Int
    public let proxy: FaultProxy
    public let manifest: String
    /// The test's environment with STORAGE_EMULATOR_HOST naming the proxy.
    public let environment: [String: String]

    public init(_ fixture: JobFixture, prefix: String, bandwidth: String, files extra: String = "", upload: String = "",
                storage: String = "") throws {
        port = try StorageEmulator.port()
        proxy = try FaultProxy(upstreamPort: port, [])
        _ = try fixture.job("""
            storage: { url: 'gs://\(StorageEmulator.bucket)', multipartThreshold: 1MiB\(storage) }
            files: [{ root: src, destination: '\(prefix)/{relpath}'\(extra) }]
            upload: { bandwidth: \(bandwidth)\(upload) }
            """)
        manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        var environment = ProcessInfo.processInfo.environment
        environment["STORAGE_EMULATOR_HOST"] = "127.0.0.1:\(proxy.port)"
        self.environment = environment
    }
}

/// Lifts the manifest's `bandwidth: LIMIT` (to 1 GB/s) for a run that only has to finish what
/// killed runs left, not be slow enough to be killed.
public func unthrottle(_ manifest: String, _ limit: String) throws {
    let text = try String(contentsOfFile: manifest, encoding: .utf8)
    guard text.contains("bandwidth: \(limit)") else { throw TestServerError("\(manifest) has no bandwidth: \(limit)") }
    try text.replacingOccurrences(of: "bandwidth: \(limit)", with: "bandwidth: 1GB/s").write(toFile: manifest, atomically: true, encoding: .utf8)
}
