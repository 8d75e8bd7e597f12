import Foundation
import HoistJobs

/// A job in a temporary folder: files are written under `src/`, the manifest beside them.
public struct JobFixture {
    public let directory: TemporaryDirectory
    public init() throws { directory = try TemporaryDirectory() }

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
}
