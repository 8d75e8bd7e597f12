import Foundation
import HoistTestSupport
import Testing

/// The examples in README.md and docs/ work as written: every ```yaml block validates (a block
/// without `version:` is a part of a manifest, checked inside a small one), every ```lua block
/// compiles as a hook, every ```sh block parses.
@Suite struct DocsTests {
    /// The fenced blocks of one language in a Markdown file, with the line each starts on.
    static func blocks(_ language: String, in file: URL) throws -> [(line: Int, text: String)] {
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        var blocks: [(line: Int, text: String)] = []
        var current: (line: Int, text: String)?
        for (number, line) in lines.enumerated() {
            if current != nil {
                if line.hasPrefix("```") {
                    blocks.append(current!)
                    current = nil
                } else {
                    current!.text += line + "\n"
                }
            } else if line == "```" + language {
                current = (number + 2, "")
            }
        }
        return blocks
    }

    static var documents: [URL] {
        let docs = packageRoot.appendingPathComponent("docs")
        let pages = (try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []
        return [packageRoot.appendingPathComponent("README.md")]
            + pages.filter { $0.hasSuffix(".md") }.sorted().map { docs.appendingPathComponent($0) }
    }

    /// A folder like the repository's: `jobs/` for the manifest, `plugins/` beside it (and in it,
    /// for manifests that name `plugins/...`).
    func workspace() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory()
        let plugins = packageRoot.appendingPathComponent("plugins").path
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("jobs"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory.url.appendingPathComponent("plugins").path, withDestinationPath: plugins)
        try FileManager.default.createSymbolicLink(atPath: directory.url.appendingPathComponent("jobs/plugins").path, withDestinationPath: plugins)
        return directory
    }

    static let frame = "version: 1\nname: example\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n"

    @Test func everyYAMLExampleValidates() throws {
        let directory = try workspace()
        var count = 0
        for document in Self.documents {
            for block in try Self.blocks("yaml", in: document) {
                let text = block.text.contains("\nversion:") || block.text.hasPrefix("version:") ? block.text : Self.frame + block.text
                let manifest = try directory.write("jobs/example\(count).yaml", Data(text.utf8)).path
                let run = try runProcess(hoist, ["validate", "--syntax-only", manifest])
                #expect(run.status == 0, "\(document.lastPathComponent):\(block.line): \(run.stderr)")
                count += 1
            }
        }
        #expect(count >= 5)
    }

    @Test func everyLuaExampleCompiles() throws {
        let directory = try workspace()
        var count = 0
        for document in Self.documents {
            for block in try Self.blocks("lua", in: document) {
                let indented = block.text.split(separator: "\n", omittingEmptySubsequences: false).map { "      " + $0 }.joined(separator: "\n")
                let manifest = try directory.write("jobs/hook\(count).yaml", Data((Self.frame + "hooks:\n  - inline: |\n" + indented + "\n").utf8)).path
                let run = try runProcess(hoist, ["validate", "--syntax-only", manifest])
                #expect(run.status == 0, "\(document.lastPathComponent):\(block.line): \(run.stderr)")
                count += 1
            }
        }
        #expect(count >= 1)
    }

    @Test func everyShellExampleParses() throws {
        var count = 0
        for document in Self.documents {
            for block in try Self.blocks("sh", in: document) {
                let run = try runProcess("/bin/sh", ["-n", "-c", block.text])
                #expect(run.status == 0, "\(document.lastPathComponent):\(block.line): \(run.stderr)")
                count += 1
            }
        }
        #expect(count >= 3)
    }

    @Test func topLevelKeysStartingWithXAreAPlaceForAnchors() throws {
        let directory = try workspace()
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("jobs/src"), withIntermediateDirectories: true)
        let manifest = try directory.write("jobs/anchors.yaml", Data("""
            version: 1
            name: anchors
            x-metadata: &metadata { cacheControl: no-cache }
            storage: { url: 'file:bucket' }
            files: [{ root: src, metadata: *metadata }]
            xtra: 1

            """.utf8)).path
        let run = try runProcess(hoist, ["validate", manifest])
        #expect(run.status == 2)
        #expect(run.stderr.hasPrefix("\(manifest):6:1: unknown key 'xtra'"), "\(run.stderr)")
    }
}

/// The README's first command: the quick start uploads the samples and its hook shows each
/// object's download URL.
@Suite struct QuickStartTests {
    @Test func theQuickStartRunsAHookWhoseEffectShows() throws {
        let directory = try TemporaryDirectory()
        let jobs = directory.url.appendingPathComponent("jobs")
        try FileManager.default.createDirectory(at: jobs, withIntermediateDirectories: true)
        for name in ["quickstart.yaml", "quickstart"] {
            try FileManager.default.copyItem(at: packageRoot.appendingPathComponent("jobs/\(name)"), to: jobs.appendingPathComponent(name))
        }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = directory.url.appendingPathComponent("state").path
        let run = try runProcess(hoist, ["run", jobs.appendingPathComponent("quickstart.yaml").path], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        let bucket = directory.url.appendingPathComponent(".hoist/bucket")
        #expect(run.stderr.contains("info: site/index.html -> \(bucket.appendingPathComponent("site/index.html").absoluteString)\n"), "\(run.stderr)")
        #expect(run.stderr.contains("info: 4 uploaded; the bundled plugins: hoist plugins\n"))
        #expect(run.stdout.hasPrefix("quickstart: 4 uploaded"))
    }

    /// Two clones of the repository, one user: each clone's quick start runs (its journal is in
    /// its own `.hoist/`), where a journal shared by job name refused the second clone.
    @Test func theQuickStartRunsFromASecondClone() throws {
        let state = try TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = state.path
        for _ in 0..<2 {
            let clone = try TemporaryDirectory()
            let jobs = clone.url.appendingPathComponent("jobs")
            try FileManager.default.createDirectory(at: jobs, withIntermediateDirectories: true)
            for name in ["quickstart.yaml", "quickstart"] {
                try FileManager.default.copyItem(at: packageRoot.appendingPathComponent("jobs/\(name)"), to: jobs.appendingPathComponent(name))
            }
            let run = try runProcess(hoist, ["run", jobs.appendingPathComponent("quickstart.yaml").path], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.hasPrefix("quickstart: 4 uploaded"), "\(run.stdout)")
            #expect(FileManager.default.fileExists(atPath: clone.url.appendingPathComponent(".hoist/quickstart.sqlite").path))
        }
    }
}
