import Foundation
import HoistTestSupport
import Testing

/// A backend family is a folder plus a registration line: above their own folders, only the
/// compositions of defaults name a concrete backend or journal (`BackendRegistry.builtIn`,
/// `Journal.open`). Everything else asks a registration, `capabilities` or the journal's
/// `supportsSharedRuns`/`waitsOnTheNetwork`.
@Suite struct ConcreteNamesTests {
    /// Each name, and the files (paths below Sources/, by prefix) where it may appear.
    static let homes: [(name: String, homes: [String])] = [
        ("GCSBackend", ["HoistStorage/GCS/", "HoistStorage/Backend/BackendRegistry.swift"]),
        ("LocalBucket", ["HoistStorage/Local/", "HoistStorage/Backend/BackendRegistry.swift"]),
        // SharedRun is the PostgreSQL journal's shared run, in its folder.
        ("PostgresJournal", ["HoistJobs/Journal/PostgresJournal", "HoistJobs/Journal/SharedRun.swift",
                             "HoistJobs/Journal/JournalStore.swift"]),
    ]

    @Test func concreteBackendsAndJournalsAreNamedOnlyInTheirFoldersAndCompositions() throws {
        let root = packageRoot.appendingPathComponent("Sources")
        let files = try FileManager.default.subpathsOfDirectory(atPath: root.path).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50)
        var found: [String] = []
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for (name, homes) in Self.homes where !homes.contains(where: file.hasPrefix) {
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where line.contains(name) && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    found.append("\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }

    /// Nothing is removed on Hoist's word alone: every removal a run makes goes through the removal gate, which checks its
    /// evidence at that moment; no code above the backends unlinks a file, removes a folder or
    /// deletes an object around it.
    @Test func everyRemovalOfARunGoesThroughTheGate() throws {
        // The primitives: RootFolder's conditional unlink and rmdir, the object deletes.
        let removals = ["ifStill:", "unlinkat(", "rmdir(", ".removeEmptyFolder(", "delete(ifGeneration:", ".deleteObject(",
                        ".endStaleUploads(", ".abandon()"]
        let root = packageRoot.appendingPathComponent("Sources")
        var found: [String] = []
        for folder in ["HoistJobs", "hoist"] {
            for file in try FileManager.default.subpathsOfDirectory(atPath: root.appendingPathComponent(folder).path)
            where file.hasSuffix(".swift") && file != "Run/RemovalGate.swift" {
                let text = try String(contentsOf: root.appendingPathComponent(folder + "/" + file), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where removals.contains(where: line.replacingOccurrences(of: "RemovalGate.", with: "").contains)
                    && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    found.append("\(folder)/\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }
}
