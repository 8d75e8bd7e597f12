import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// Plugins by name, configured in YAML (`with:`), checked with line and column, listed by
/// `hoist plugins`; lists that stay lists in JSON.
@Suite struct PluginSettingsTests {
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
        let summaries = run.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix(job + ":") && !$0.hasPrefix(job + ": warning: ") }
        #expect(summaries.count == 3, "\(run.stderr)")
        #expect(summaries.first?.hasPrefix("\(job):6:13: no plugin 'webhok' (did you mean 'webhook'?); the plugins are ") == true, "\(summaries)")
        #expect(summaries.dropFirst().first == "\(job):8:17: plugin webhook has no setting 'ur' (did you mean 'url'?); it takes url, events")
        #expect(summaries.last == "\(job):8:37: setting events of plugin webhook takes a list, such as [failure]")
    }

    @Test func validateWarnsOfAVariableAPluginReadsThatTheJobDoesNotGrant() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("src"), withIntermediateDirectories: true)
        func validate(_ body: String, _ environment: [String: String], command: String = "validate")
            throws -> (status: Int32, stdout: String, stderr: String)
        {
            let text = "version: 1\nname: plugged\njournal: j.sqlite\nstorage: { url: 'file:b' }\nfiles: [{ root: src }]\n\(body)"
            let job = try directory.write("job.yaml", Data(text.utf8)).path
            var merged = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HOIST_") }
            merged.merge(environment) { $1 }
            return try runProcess(hoist, [command, job], environment: merged)
        }
        let job = directory.url.appendingPathComponent("job.yaml").path
        let set = ["HOIST_WEBHOOK_URL": "http://127.0.0.1:9/hook", "HOIST_GUARD_BUDGET": "800"]
        let hooks = "hooks:\n  - plugin: webhook\n  - plugin: guard\n"
        let ungranted = try validate(hooks, set)
        #expect(ungranted.status == 0, "\(ungranted.stderr)")
        #expect(ungranted.stderr.contains("\(job): warning: plugin webhook reads HOIST_WEBHOOK_URL, which is set but not granted: "
            + "the hook sees nil (add HOIST_WEBHOOK_URL to lua.env, or give the setting url)"), "\(ungranted.stderr)")
        #expect(ungranted.stderr.contains("warning: plugin guard reads HOIST_GUARD_BUDGET, which is set but not granted"), "\(ungranted.stderr)")
        // A variable that is not set is not missed; one granted (by name or glob) is seen.
        #expect(!ungranted.stderr.contains("HOIST_GUARD_MAX_FILE"), "\(ungranted.stderr)")
        let granted = try validate("lua: { env: [HOIST_WEBHOOK_URL, HOIST_GUARD_*] }\n" + hooks, set)
        #expect(granted.status == 0 && !granted.stderr.contains("warning"), "\(granted.stderr)")
        // The setting given in its place: the variable is not read.
        let given = try validate("hooks:\n  - { plugin: webhook, with: { url: 'http://127.0.0.1:9/x' } }\n", set)
        #expect(given.status == 0 && !given.stderr.contains("warning"), "\(given.stderr)")
        // A plugin listed by path is read the same way.
        let byPath = try validate("hooks:\n  - \(packageRoot.appendingPathComponent("plugins/webhook.lua").path)\n", set)
        #expect(byPath.stderr.contains("warning: hook \(packageRoot.path)/plugins/webhook.lua reads HOIST_WEBHOOK_URL"), "\(byPath.stderr)")
        // A glob may reach a variable named like a credential: allowed, and said.
        let glob = try validate("lua: { env: ['HOIST_*'] }\n", ["HOIST_API_TOKEN": "t0k3n"])
        #expect(glob.status == 0 && glob.stderr.contains("\(job): warning: lua.env grants HOIST_*, and so HOIST_API_TOKEN, named like credentials"),
                "\(glob.stderr)")
        // lua.secrets still grants, and says it is deprecated.
        let secrets = try validate("lua: { secrets: [HOIST_WEBHOOK_URL] }\nhooks:\n  - plugin: webhook\n", set)
        #expect(secrets.status == 0, "\(secrets.stderr)")
        #expect(secrets.stderr.contains("\(job): warning: lua.secrets is deprecated: list the variables in lua.env instead"), "\(secrets.stderr)")
        #expect(!secrets.stderr.contains("not granted"), "\(secrets.stderr)")
        // A run says so too, and its hook reads the variable.
        let reading = "hooks:\n  - inline: 'log.info(\"url=\" .. tostring(os.getenv(\"HOIST_WEBHOOK_URL\")))'\n"
        let run = try validate("lua: { secrets: [HOIST_WEBHOOK_URL] }\n" + reading, set, command: "run")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("hoist: warning: lua.secrets is deprecated: list the variables in lua.env instead"), "\(run.stderr)")
        #expect(run.stderr.contains("info: url=http://127.0.0.1:9/hook"), "\(run.stderr)")
    }

    @Test func bundledPluginsDeclareTheVariablesTheyRead() throws {
        let folder = packageRoot.appendingPathComponent("plugins")
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".lua") {
            let path = folder.appendingPathComponent(file).path
            let source = try String(contentsOfFile: path, encoding: .utf8)
            let declared = Set(PluginInfo(name: String(file.dropLast(4)), path: path, source: source).reads.map(\.name))
            let read = Set(source.matches(of: /os\.getenv\("([A-Za-z0-9_]+)"\)/).map { String($0.1) })
            #expect(declared == read, "\(file): declares \(declared.sorted()), reads \(read.sorted())")
            #expect(!source.contains("os.getenv(") || !read.isEmpty, "\(file) reads a variable by a computed name")
        }
    }

    @Test func hoistPluginsListsThemWithTheirSettings() throws {
        let run = try runProcess(hoist, ["plugins"])
        #expect(run.status == 0)
        #expect(run.stdout.contains("webhook: POSTs a JSON summary of the run to a webhook when the job ends.\n"))
        #expect(run.stdout.contains("  with url (string): where to POST"))
        #expect(run.stdout.contains("  with events (list): "))
        #expect(run.stdout.contains("  reads env: HOIST_WEBHOOK_URL (only if lua.env grants it)\n"), "\(run.stdout)")
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
