import Foundation
import HoistTestSupport
import Testing

/// Plugins by name, configured in YAML (`with:`), checked with line and column, listed by
/// `hoist plugins`; lists that stay lists in JSON.
@Suite struct PluginSettingsTests {
    let hoist = productsDirectory.appendingPathComponent("hoist").path

    @Test func pluginsByNameWithSettingsWriteValidJSON() throws {
        let directory = try TemporaryDirectory()
        let received = directory.url.appendingPathComponent("posts.log")
        let sink = try ServerProcess(testPython, testPythonArguments + [packageRoot.appendingPathComponent("Tests/servers/sink.py").path,
                                                                          "--log", received.path])
        let port = try sink.readyPort()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { output: out }
            hooks:
              - { plugin: index-writer, with: { file: index.jsonl } }
              - { plugin: webhook, with: { url: "http://127.0.0.1:\(port)/hook", events: [success] } }

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let environment = ProcessInfo.processInfo.environment.filter { $0.key != "HOIST_WEBHOOK_URL" && $0.key != "HOIST_INDEX_FILE" }
        for _ in 0..<2 {
            let run = try runProcess(hoist, ["run", manifest], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
        }
        // The index is JSON Lines: a valid document per run, the second with nothing uploaded.
        let index = try String(contentsOf: fixture.directory.url.appendingPathComponent("out/index.jsonl"), encoding: .utf8)
        let lines = index.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) is [String: Any] })
        #expect(lines[0].contains("\"path\":\"a.txt\""))
        #expect(lines[1].contains("\"objects\":[]"), "\(lines[1])")
        let posts = try String(contentsOf: received, encoding: .utf8).split(separator: "\n")
        #expect(posts.count == 2)
        #expect(posts.allSatisfy { $0.contains("\"job\":\"test\"") && $0.contains("\"failures\":[]") }, "\(posts)")
    }

    @Test func jsonArrayKeepsEmptyListsLists() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            hooks:
              - inline: |
                  function on_job_end()
                    log.info(json.encode({ marked = json.array({}), plain = {}, decoded = json.decode("[]"), list = json.array({ 1, 2 }) }))
                  end

            """)
        let run = try runProcess(hoist, ["run", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(run.status == 0)
        #expect(run.stderr.contains("info: {\"decoded\":[],\"list\":[1,2],\"marked\":[],\"plain\":{}}"), "\(run.stderr)")
    }

    @Test func pluginMistakesAreReportedWithLineAndColumn() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("src"), withIntermediateDirectories: true)
        let job = try directory.write("job.yaml", Data("""
            version: 1
            name: plugged
            storage: { url: 'file:b' }
            files: [{ root: src }]
            hooks:
              - plugin: webhok
              - plugin: webhook
                with: { ur: "http://x", events: failure }

            """.utf8)).path
        let run = try runProcess(hoist, ["validate", job])
        #expect(run.status == 2)
        let summaries = run.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix(job + ":") }
        #expect(summaries.count == 3, "\(run.stderr)")
        #expect(summaries.first?.hasPrefix("\(job):6:13: no plugin 'webhok' (did you mean 'webhook'?); the plugins are ") == true, "\(summaries)")
        #expect(summaries.dropFirst().first == "\(job):8:17: plugin webhook has no setting 'ur' (did you mean 'url'?); it takes url, events")
        #expect(summaries.last == "\(job):8:37: setting events of plugin webhook takes a list, such as [failure]")
    }

    @Test func hoistPluginsListsThemWithTheirSettings() throws {
        let run = try runProcess(hoist, ["plugins"])
        #expect(run.status == 0)
        #expect(run.stdout.contains("webhook: POSTs a JSON summary of the run to a webhook when the job ends.\n"))
        #expect(run.stdout.contains("  with url (string): where to POST"))
        #expect(run.stdout.contains("  with events (list): "))
        #expect(run.stdout.contains("index-writer: "))
        // A plugin of one's own, by $HOIST_PLUGIN_PATH, header and all.
        let directory = try TemporaryDirectory()
        _ = try directory.write("mine.lua", Data("-- mine.lua: says hello.\n--\n-- setting greeting (string, required): what to say.\nfunction on_job_end() log.info(settings.greeting) end\n".utf8))
        var environment = ProcessInfo.processInfo.environment
        environment["HOIST_PLUGIN_PATH"] = directory.path
        let mine = try runProcess(hoist, ["plugins"], environment: environment)
        #expect(mine.stdout.contains("mine: says hello.\n  \(directory.path)/mine.lua\n  with greeting (string, required): what to say.\n"), "\(mine.stdout)")
    }
}
