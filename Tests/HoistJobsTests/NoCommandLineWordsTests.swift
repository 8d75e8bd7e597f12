import Foundation
import HoistTestSupport
import Testing

/// HoistJobs knows nothing of the command line: no string in its sources names a flag
/// (`--journal`) or prints the command's `hoist:` prefix. It returns typed errors and messages
/// (`JobSession.StartError.Reason`, `JobSession.Message`, `ShardError`) that `hoist` words.
@Suite struct NoCommandLineWordsTests {
    /// Left on purpose, each with its reason.
    static let allowed = [
        // Advisory lock names every version takes: changing them would let old and new processes mix.
        #"case shards = "--shard""#, #"case workers = "--worker""#,
        // SharedRun's exit from a stuck thread: the runner's branch moves it out of SharedRun.
        #"FileHandle.standardError.write(Data("hoist: \(message) The journal did not let the run end"#,
    ]

    @Test func hoistJobsNamesNoFlagAndPrintsNoPrefix() throws {
        let root = packageRoot.appendingPathComponent("Sources/HoistJobs")
        let files = try FileManager.default.subpathsOfDirectory(atPath: root.path).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 20)
        let flag = try Regex(#""[^"]*(--[a-z][a-z-]+|hoist: )[^"]*""#)
        var found: [String] = []
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.trimmingCharacters(in: .whitespaces)
                guard !code.hasPrefix("//"), line.contains(flag), !Self.allowed.contains(where: { code.hasPrefix($0) }) else { continue }
                found.append("\(file):\(number + 1): \(code)")
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }
}
