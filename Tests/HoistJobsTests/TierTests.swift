import Foundation
import HoistTestSupport
import Testing

/// The two test tiers stay whole: every suite under `Tests/` is listed in exactly one of
/// `Tests/tiers/fast.txt` (run by `scripts/test-fast`) and `Tests/tiers/integration.txt`, and a
/// suite listed fast starts no `hoist`, no server, no child process and does not sleep.
@Suite struct TierTests {
    /// The test targets' folders.
    static let targets = ["HoistCommandTests", "HoistHTTPTests", "HoistJobsTests", "HoistLuaTests", "HoistStorageTests", "HoistYAMLTests"]

    /// What a fast suite's file may not name: the `hoist` binary or another child process, the
    /// test servers and PostgreSQL, and sleeps.
    static let slowMarks = ["runProcess(", "Process()", "StartedProcess(", "ServerProcess(", "FakeGCS", "StorageEmulator", "FaultProxy",
                            "S3TestServer", "PostgresServer", "HostileHTTPServer", "TinyProxy", "CountingRelay", "testPython",
                            "gcsStorage(", "s3Storage(", "usleep", "sleep("]

    /// `Module.Suite` for each type in the test targets that holds an `@Test`, with its file.
    static func suites() throws -> [(name: String, file: URL)] {
        var found: [(name: String, file: URL)] = []
        let declaration = /^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:final|public|private|fileprivate)\s+)*(?:struct|class|enum|actor|extension)\s+(\w+)/
        for target in targets {
            let folder = packageRoot.appendingPathComponent("Tests/" + target)
            let files = FileManager.default.enumerator(atPath: folder.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for path in files.sorted() {
                let file = folder.appendingPathComponent(path)
                var current: String?
                for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                    if let match = line.firstMatch(of: declaration) {
                        current = String(match.1)
                    } else if let current, line.trimmingCharacters(in: .whitespaces).hasPrefix("@Test"),
                              !found.contains(where: { $0.name == target + "." + current }) {
                        found.append((target + "." + current, file))
                    }
                }
            }
        }
        return found
    }

    static func tier(_ name: String) throws -> [String] {
        try String(contentsOf: packageRoot.appendingPathComponent("Tests/tiers/\(name).txt"), encoding: .utf8)
            .split(separator: "\n").map(String.init).filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    @Test func everySuiteIsInExactlyOneTier() throws {
        let fast = try Self.tier("fast"), integration = try Self.tier("integration")
        let suites = try Self.suites().map(\.name)
        #expect(suites.count > 100, "found only \(suites.count) suites: the reading of Tests/ is broken")
        for suite in suites {
            let tiers = (fast.contains(suite) ? ["fast"] : []) + (integration.contains(suite) ? ["integration"] : [])
            #expect(tiers.count == 1, "\(suite) is in \(tiers.isEmpty ? "no tier" : "both tiers"): list it in Tests/tiers/fast.txt or integration.txt")
        }
        for listed in fast + integration where !suites.contains(listed) {
            Issue.record("Tests/tiers lists \(listed), a suite that does not exist")
        }
        #expect(Set(fast).count == fast.count && Set(integration).count == integration.count, "a suite listed twice in a tier")
    }

    @Test func aFastSuiteStartsNothingAndDoesNotSleep() throws {
        let fast = Set(try Self.tier("fast"))
        let own = URL(fileURLWithPath: #filePath).standardizedFileURL.path
        for suite in try Self.suites() where fast.contains(suite.name) && suite.file.standardizedFileURL.path != own {
            let text = try String(contentsOf: suite.file, encoding: .utf8)
            for mark in Self.slowMarks where text.contains(mark) {
                Issue.record("\(suite.name) is listed fast, but \(suite.file.lastPathComponent) has \(mark): move it to Tests/tiers/integration.txt")
            }
        }
    }
}
