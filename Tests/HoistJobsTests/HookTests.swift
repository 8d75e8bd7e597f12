import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import Synchronization
import Testing

/// Hooks seen from outside: what they record (through hoist.append_file), what they change,
/// and that the uploads go on whatever they do.
final class HookLog: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

struct HookFixture {
    let fixture: JobFixture
    let log = HookLog()

    init() throws { fixture = try JobFixture() }

    /// Runs a job whose hooks are `lua` (inline) plus `files` (paths relative to the job).
    func run(_ lua: String, files: [String] = [], extra: String = "", environment: [String: String] = ["HOME": "/root"],
             journal: (any JournalStore)? = nil, during: (@Sendable (JobRunner) async -> Void)? = nil) async throws -> JobSummary {
        var hooks = files.map { "  - \($0)\n" }.joined()
        if !lua.isEmpty {
            hooks += "  - inline: |\n" + lua.split(separator: "\n", omittingEmptySubsequences: false).map { "      \($0)" }.joined(separator: "\n") + "\n"
        }
        // Hooks write below `out/` (`lua.output`), added to the test's own `lua:` settings.
        let settings = extra.contains("lua: {") ? extra.replacingOccurrences(of: "lua: {", with: "lua: { output: out,") : extra + "lua: { output: out }\n"
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n\(settings)hooks:\n\(hooks)", environment: environment)
        let storage = try job.makeStorage()
        let log = self.log
        let bus = try HookBus(job: job, storage: storage) { line in log.append("[\(line.script)] \(line.level.rawValue): \(line.message)") }
        let runner = JobRunner(job: job, storage: storage, observers: [], hooks: bus, journal: journal)
        let totals = try Planner(job: job).check()
        async let summary = runner.run(totals: totals)
        if let during { await during(runner) }
        return await summary
    }

    /// The hooks' output folder (`lua.output: out`).
    var output: URL { fixture.directory.url.appendingPathComponent("out") }

    /// JSON lines a hook appended to `name` in the hooks' output folder.
    func lines(_ name: String) -> [[String: Any]] {
        let text = (try? String(contentsOf: output.appendingPathComponent(name), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    var bucket: URL { fixture.directory.url.appendingPathComponent("bucket") }
}

let recordEverything = """
    local function record(name, s)
      hoist.append_file("events.jsonl", json.encode({ event = name, status = s.status, path = s.reference.fullPath,
        bucket = s.reference.bucket, refname = s.reference.name, completed = s.progress.completed, total = s.progress.total,
        fraction = s.progress.fraction, md5 = s.metadata and s.metadata.md5Hash, size = s.metadata and s.metadata.size,
        contentType = s.metadata and s.metadata.contentType, custom = s.metadata and s.metadata.customMetadata,
        code = s.error and s.error.code, raw = s.error and s.error.rawValue, message = s.error and s.error.message,
        file = s.file.relpath, filesize = s.file.size, url = s.downloadURL, hasTask = s.task ~= nil }) .. "\\n")
    end
    function on_job_start(job) hoist.append_file("events.jsonl", json.encode({ event = "job_start", name = job.name, files = job.files }) .. "\\n") end
    function on_resume(s) record("on_resume", s) end
    function on_progress(s) record("on_progress", s) end
    function on_pause(s) record("on_pause", s) end
    function on_success(s) record("on_success", s) end
    function on_failure(s) record("on_failure", s) end
    function on_job_end(sum) hoist.append_file("events.jsonl", json.encode({ event = "job_end", uploaded = sum.uploaded, failed = sum.failed }) .. "\\n") end
    """

@Suite struct HookTests {
    @Test func successEventsInOrderWithTheirFields() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("photo.jpg", 3 << 20)
        let summary = try await hooks.run(recordEverything)
        #expect(summary.uploaded == 1)
        let events = hooks.lines("events.jsonl")
        let names = events.compactMap { $0["event"] as? String }
        #expect(names.first == "job_start" && names.last == "job_end")
        #expect(Array(names.dropFirst().dropLast()).reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } }
                == ["on_resume", "on_progress", "on_success"])
        let success = try #require(events.first { $0["event"] as? String == "on_success" })
        #expect(success["status"] as? String == "success")
        #expect(success["path"] as? String == "photo.jpg" && success["refname"] as? String == "photo.jpg")
        #expect(success["bucket"] as? String == "bucket")
        #expect(success["size"] as? Int == 3 << 20 && success["filesize"] as? Int == 3 << 20)
        #expect(success["md5"] as? String == md5Base64(patternData(3 << 20)))
        #expect(success["contentType"] as? String == "image/jpeg")
        #expect(success["url"] as? String == hooks.bucket.appendingPathComponent("photo.jpg").absoluteString)
        #expect(success["hasTask"] as? Bool == true)
        let progress = events.filter { $0["event"] as? String == "on_progress" }
        #expect(progress.last?["completed"] as? Int == 3 << 20 && progress.last?["fraction"] as? Double == 1.0)
    }

    @Test func failureCarriesTheErrorCode() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.directory.write("src/x", Data("file".utf8))
        try hooks.fixture.directory.write("src2/x/y", Data("below".utf8))
        let job = try hooks.fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }, { root: src2 }]
            upload: { concurrency: 1 }
            lua: { output: out }
            hooks:
              - inline: |
                  function on_failure(s)
                    hoist.append_file("failures.jsonl", json.encode({ code = s.error.code, raw = s.error.rawValue, message = s.error.message, status = s.status }) .. "\\n")
                  end
            """)
        let storage = try job.makeStorage()
        let bus = try HookBus(job: job, storage: storage) { _ in }
        let summary = await JobRunner(job: job, storage: storage, observers: [], hooks: bus).run(totals: try Planner(job: job).check())
        #expect(summary.failed == 1)
        let failure = try #require(hooks.lines("failures.jsonl").first)
        #expect(failure["code"] as? String == "invalidArgument")
        #expect(failure["raw"] as? Int == -13050)
        #expect(failure["status"] as? String == "failure")
        #expect((failure["message"] as? String)?.contains("cannot hold both") == true)
    }

    @Test func cancelFromAHook() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("big.bin", 40 << 20)
        let summary = try await hooks.run(recordEverything + """

            function on_progress(s) record("on_progress", s) s.task:cancel() end
            """, extra: "upload: { bandwidth: 20MB/s }\n")
        #expect(summary.failed == 1 && summary.uploaded == 0)
        let failure = try #require(hooks.lines("events.jsonl").first { $0["event"] as? String == "on_failure" })
        #expect(failure["code"] as? String == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: hooks.bucket.appendingPathComponent("big.bin").path))
    }

    @Test func pauseAndResumeFromAHook() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("big.bin", 8 << 20)
        let summary = try await hooks.run(recordEverything + """

            local paused = false
            function on_progress(s) record("on_progress", s) if not paused then paused = true s.task:pause() end end
            function on_pause(s) record("on_pause", s) s.task:resume() end
            """)
        #expect(summary.uploaded == 1)
        let names = hooks.lines("events.jsonl").compactMap { $0["event"] as? String }
            .filter { $0.hasPrefix("on_") }.reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } }
        #expect(names == ["on_resume", "on_progress", "on_pause", "on_resume", "on_progress", "on_success"])
        #expect(try Data(contentsOf: hooks.bucket.appendingPathComponent("big.bin")) == patternData(8 << 20))
    }

    @Test func beforeUploadChangesOrSkips() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("keep.txt", 10)
        try hooks.fixture.file("move.txt", 10)
        try hooks.fixture.file("secret.key", 10)
        let summary = try await hooks.run("""
            function before_upload(f)
              if f.relpath:match("%.key$") then return false end
              if f.relpath == "move.txt" then
                return { destination = "moved/" .. f.relpath, metadata = { cacheControl = "no-store", customMetadata = { size = tostring(f.size) } } }
              end
            end
            """)
        #expect(summary.uploaded == 2 && summary.skipped == 1 && summary.vetoed == 1 && summary.unchanged == 0)
        #expect(summary.line.hasPrefix("test: 2 uploaded (20 B), 1 vetoed by a hook in "), "\(summary.line)")
        let storage = Storage.storage(url: "file://" + hooks.bucket.path)
        let moved = try await storage.reference(withPath: "moved/move.txt").getMetadata()
        #expect(moved.cacheControl == "no-store")
        #expect(moved.customMetadata == ["size": "10"])
        #expect(FileManager.default.fileExists(atPath: hooks.bucket.appendingPathComponent("keep.txt").path))
        #expect(!FileManager.default.fileExists(atPath: hooks.bucket.appendingPathComponent("secret.key").path))
    }

    @Test func runawayHooksAreStoppedAndTheJobCompletes() async throws {
        let hooks = try HookFixture()
        for index in 0..<5 { try hooks.fixture.file("f\(index).txt", 100) }
        let summary = try await hooks.run("""
            function on_success(s)
              if s.reference.name == "f1.txt" then while true do end end
              if s.reference.name == "f2.txt" then local t = {} for i = 1, 1e9 do t[i] = string.rep("x", 4096) .. i end end
              if s.reference.name == "f3.txt" then error("plain failure") end
              hoist.append_file("ok.txt", s.reference.name .. "\\n")
            end
            """, extra: "lua: { instructionLimit: 200000, memoryLimit: 4MiB }\n")
        #expect(summary.uploaded == 5 && summary.failed == 0)
        let ok = (try? String(contentsOf: hooks.output.appendingPathComponent("ok.txt"), encoding: .utf8)) ?? ""
        #expect(Set(ok.split(separator: "\n")) == ["f0.txt", "f4.txt"])
        let logs = hooks.log.all
        #expect(logs.contains { $0.contains("job.yaml#hooks[0]:10: instruction budget exceeded") }, "\(logs)")
        #expect(logs.contains { $0.contains("memory limit of 4194304 bytes exceeded") }, "\(logs)")
        #expect(logs.contains { $0.contains("job.yaml#hooks[0]:12: plain failure (in on_success)") }, "\(logs)")
    }

    @Test func oneBrokenScriptDoesNotSilenceAnother() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt", 10)
        try hooks.fixture.directory.write("broken.lua", Data("function on_success(s) error('broken on purpose') end".utf8))
        let summary = try await hooks.run("function on_success(s) hoist.append_file('seen.txt', s.reference.name) end", files: ["broken.lua"])
        #expect(summary.uploaded == 1)
        #expect(try String(contentsOf: hooks.output.appendingPathComponent("seen.txt"), encoding: .utf8) == "a.txt")
        #expect(hooks.log.all.contains { $0.contains("broken.lua:1: broken on purpose") })
    }

    /// A root that is a link to a file (`root: latest.log`, a link to the day's log) reaches
    /// hooks as the manifest names it: `file.path` was the link's target, a path the user never
    /// wrote. The bytes are the target's.
    @Test func aLinkedFileRootReachesHooksAsWritten() throws {
        let fixture = try JobFixture()
        _ = try fixture.file("logs/2026-11-28.log", 100)
        let link = fixture.directory.url.appendingPathComponent("latest.log")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "src/logs/2026-11-28.log")
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: latest.log }]
            lua: { output: out }
            hooks:
              - inline: |
                  function before_upload(f) hoist.append_file("paths.txt", f.path .. "\\n") end

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(hoist, ["run", manifest], environment: ["HOME": fixture.directory.path])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let paths = try String(contentsOf: fixture.directory.url.appendingPathComponent("out/paths.txt"), encoding: .utf8)
        #expect(paths == link.path + "\n")
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/latest.log")) == patternData(100))
    }

    @Test func syntaxErrorsAreReportedByValidate() throws {
        let fixture = try JobFixture()
        try fixture.directory.write("bad.lua", Data("function on_success(s)\n  if s then\nend\n".utf8))
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nhooks: [bad.lua]\n")
        let run = try runProcess(hoist,
                                 ["validate", fixture.directory.url.appendingPathComponent("job.yaml").path])
        #expect(run.status == 2)
        #expect(run.stderr.hasPrefix("\(fixture.directory.path)/bad.lua:4: 'end' expected (to close 'function' at line 1) near <eof>"), "\(run.stderr)")
    }
}

/// `hoist validate` as `run` sees hooks: their top-level code runs, errors name the manifest's
/// own line, and a missing hook file is located at its entry.
@Suite struct HookValidationTests {
    @Test func validateRunsTopLevelCodeAndNamesTheManifestsLine() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try """
            version: 1
            name: lines
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            # A comment, so the script does not start on line 6.

            hooks:
              - inline: |
                  local limit = 10
                  function on_success(s) end
                  error("top-level failure")

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let validated = try runProcess(hoist, ["validate", manifest])
        #expect(validated.status == 2)
        #expect(validated.stderr.contains("job.yaml#hooks[0]:11: top-level failure"), "\(validated.stderr)")
        let run = try runProcess(hoist, ["run", manifest], environment: ["HOME": fixture.directory.url.path])
        #expect(run.status == 2)
        #expect(run.stderr.contains("job.yaml#hooks[0]:11: top-level failure"), "\(run.stderr)")
    }

    /// A misspelled hook function is never called: `before_uplod` vetoes nothing. validate and
    /// run warn of a global function close to a hook's name; a helper far from every name is
    /// the script's own business.
    @Test func aMisspelledHookFunctionIsWarnedOf() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let folder = fixture.directory.url
        try "function before_uplod(file)\n  return false\nend\nlocal function on_sucess_here() end\nfunction format_size(n) return n end\n"
            .write(to: folder.appendingPathComponent("check.lua"), atomically: true, encoding: .utf8)
        let manifest = folder.appendingPathComponent("job.yaml").path
        try """
            version: 1
            name: typos
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            hooks:
              - check.lua
              - inline: |
                  function on_sucess(s) end
                  on_job_ended = function(s) end
                  function on_success(s) end

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let validated = try runProcess(hoist, ["validate", manifest])
        #expect(validated.status == 0, "\(validated.stderr)")
        #expect(validated.stderr.contains("\(manifest): warning: hook \(folder.path)/check.lua defines before_uplod, which is not a hook: "
            + "nothing calls it (did you mean before_upload?)"), "\(validated.stderr)")
        #expect(validated.stderr.contains("\(manifest): warning: hook \(manifest)#hooks[1] defines on_sucess, which is not a hook: "
            + "nothing calls it (did you mean on_success?)"), "\(validated.stderr)")
        #expect(validated.stderr.contains("defines on_job_ended, which is not a hook: nothing calls it (did you mean on_job_end?)"),
                "\(validated.stderr)")
        #expect(!validated.stderr.contains("format_size") && !validated.stderr.contains("on_sucess_here"), "\(validated.stderr)")
        #expect(validated.stderr.split(separator: "\n").filter { $0.contains("warning:") }.count == 3, "\(validated.stderr)")
        let run = try runProcess(hoist, ["run", manifest], environment: ["HOME": folder.path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("hoist: warning: hook \(folder.path)/check.lua defines before_uplod, which is not a hook"), "\(run.stderr)")
    }

    /// The hooks' output folder inside a root is one mistake, said once (validate loads the
    /// hooks and checks the roots, and both refused it).
    @Test func anOutputFolderInsideARootIsReportedOnce() throws {
        let (manifest, validated) = try validate("lua: { output: src/out }\nhooks:\n  - inline: 'x = 1'\n", file: "out/a.txt")
        #expect(validated.status == 2)
        #expect(validated.stderr.components(separatedBy: "\(manifest):5:16: the hook output folder").count == 2, "\(validated.stderr)")
    }

    /// A hook file is named as the user would open it from where Hoist ran, as a manifest error
    /// names the manifest: `hoist validate sub/job.yaml` says `sub/hooks/check.lua`, where it
    /// said `hooks/check.lua`, a path relative to the manifest's folder (no such file from
    /// here); an absolute manifest path gives an absolute hook path.
    @Test func hookPathsInMessagesAreAsTheUserGaveTheManifest() throws {
        let fixture = try JobFixture()
        let folder = fixture.directory.url.appendingPathComponent("sub")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("hooks"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("src"), withIntermediateDirectories: true)
        try "a".write(to: folder.appendingPathComponent("src/a.txt"), atomically: true, encoding: .utf8)
        try "function before_uplod(f) end\nfunction before_upload(f)\n  error('no')\nend\n"
            .write(to: folder.appendingPathComponent("hooks/check.lua"), atomically: true, encoding: .utf8)
        try "version: 1\nname: paths\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nhooks: [./hooks/check.lua]\n"
            .write(to: folder.appendingPathComponent("job.yaml"), atomically: true, encoding: .utf8)
        let inside = { (arguments: String) in
            try runProcess("/bin/sh", ["-c", "cd '\(fixture.directory.path)' && exec '\(hoist)' \(arguments)"], environment: ["HOME": fixture.directory.path])
        }
        let validated = try inside("validate sub/job.yaml")
        #expect(validated.status == 0, "\(validated.stderr)")
        #expect(validated.stderr.contains("sub/job.yaml: warning: hook sub/hooks/check.lua defines before_uplod"), "\(validated.stderr)")
        let run = try inside("run sub/job.yaml")
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stderr.contains("before_upload failed: sub/hooks/check.lua:3: no"), "\(run.stderr)")
        #expect(!run.stderr.contains(" hooks/check.lua"), "\(run.stderr)")
        let absolute = try runProcess(hoist, ["validate", folder.appendingPathComponent("job.yaml").path])
        #expect(absolute.stderr.contains("warning: hook \(folder.path)/hooks/check.lua defines before_uplod"), "\(absolute.stderr)")
    }

    @Test func aMissingHookFileIsLocatedAtItsEntry() throws {
        let (_, validated) = try validate("hooks:\n  - gone.lua\n")
        #expect(validated.status == 2)
        #expect(validated.stderr.contains("job.yaml:6:5: cannot read hook gone.lua") && validated.stderr.contains("there is no such file"),
                "\(validated.stderr)")
    }

    /// A run's time covers its hooks: a summary said `in 0.0 s` after a hook that took a second
    /// and more, whose events were still being delivered when the time was taken.
    @Test func theRunsTimeCoversItsHooks() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try """
            version: 1
            name: slow
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { instructionLimit: 2000000000 }
            hooks:
              - inline: |
                  function on_job_start(s) local t = os.clock() while os.clock() - t < 1.2 do end end

            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let run = try runProcess(hoist, ["run", manifest], environment: ["HOME": fixture.directory.url.path])
        #expect(run.status == 0, "\(run.stderr)")
        let seconds = run.stdout.firstMatch(of: /in ([0-9.]+) s/).flatMap { Double($0.1) }
        #expect((seconds ?? 0) >= 1.1, "\(run.stdout)")
    }

    /// `hoist validate` of a job of one file set (`src/`, holding `file`) with `body` after its
    /// `files:` line.
    func validate(_ body: String, file: String = "a.txt") throws -> (manifest: String, result: (status: Int32, stdout: String, stderr: String)) {
        let fixture = try JobFixture()
        try fixture.file(file)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try ("version: 1\nstorage: { url: 'file:bucket' }\nname: a\nfiles: [{ root: src }]\n" + body).write(toFile: manifest, atomically: true, encoding: .utf8)
        return (manifest, try runProcess(hoist, ["validate", manifest]))
    }
}

@Suite struct PluginTests {
    let plugins = packageRoot.appendingPathComponent("plugins").path

    @Test func jsonlLogAndIndexWriter() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.html", 10)
        try hooks.fixture.file("b/c.png", 20)
        let summary = try await hooks.run("", files: ["\(plugins)/jsonl-log.lua", "\(plugins)/index-writer.lua"])
        #expect(summary.uploaded == 2)
        let log = hooks.lines("test.jsonl")
        #expect(log.count == 2)
        #expect(Set(log.compactMap { $0["object"] as? String }) == ["a.html", "b/c.png"])
        #expect(log.allSatisfy { $0["event"] as? String == "success" && $0["run_id"] != nil && $0["md5Hash"] != nil })
        let index = try #require(hooks.lines("test.index.jsonl").first)
        let objects = try #require(index["objects"] as? [[String: Any]])
        #expect(objects.compactMap { $0["path"] as? String } == ["a.html", "b/c.png"])
        #expect(objects[1]["downloadURL"] as? String == hooks.bucket.appendingPathComponent("b/c.png").absoluteString)
        #expect(objects[0]["contentType"] as? String == "text/html")
    }

    @Test func webhookPostsTheSummary() async throws {
        let directory = try TemporaryDirectory()
        let received = directory.url.appendingPathComponent("posts.log")
        let sink = try ServerProcess(testPython, testPythonArguments + [packageRoot.appendingPathComponent("Tests/servers/sink.py").path,
                                                                          "--log", received.path])
        let port = try sink.readyPort()
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt", 10)
        let summary = try await hooks.run("", files: ["\(plugins)/webhook.lua"], extra: "lua: { env: [HOIST_WEBHOOK_URL] }\n",
                                          environment: ["HOOK": "1", "HOIST_WEBHOOK_URL": "http://127.0.0.1:\(port)/hook"])
        #expect(summary.uploaded == 1)
        let body = try #require(try String(contentsOf: received, encoding: .utf8).split(separator: "\n").first)
        let posted = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        #expect(posted?["job"] as? String == "test")
        #expect(posted?["uploaded"] as? Int == 1)
        #expect(body.contains("\"failures\":[]"), "\(body)")
        #expect(hooks.log.all.contains { $0.contains("webhook sent: 204") })
    }

    @Test func guardSkipsLargeFilesAndPausesPastTheBudget() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("huge.bin", 5000)
        for index in 0..<6 { try hooks.fixture.file("small\(index).txt", 400) }
        let resumed = Mutex(false)
        let summary = try await hooks.run("", files: ["\(plugins)/guard.lua"], extra: "upload: { concurrency: 1 }\nlua: { env: [HOIST_GUARD_*] }\n",
                                          environment: ["HOIST_GUARD_MAX_FILE": "1000", "HOIST_GUARD_BUDGET": "800"]) { runner in
            // The guard pauses the job after 800 bytes; a person resumes it.
            let deadline = Date().addingTimeInterval(10)
            while !runner.isPaused, Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
            // Only a job the guard really paused counts as resumed by a person.
            guard runner.isPaused else { return }
            try? await Task.sleep(for: .milliseconds(100))
            resumed.withLock { $0 = true }
            runner.resumeAll()
        }
        #expect(resumed.withLock { $0 }, "the guard never paused the job")
        #expect(summary.skipped == 1 && summary.uploaded == 6)
        let logs = hooks.log.all
        #expect(logs.contains { $0.contains("huge.bin is 5000 bytes, over 1000: skipped") })
        #expect(logs.contains { $0.contains("byte budget of 800 reached (800 sent): job paused") })
    }
}

/// Lua source is bytes. Older scripts (and Lua's own test files) hold Latin-1 in string
/// literals; such a hook file loads and its strings keep their bytes. A file that cannot be a
/// hook is refused with the reason.
@Suite struct HookFileBytesTests {
    @Test func aLatin1HookFileLoadsWithItsBytes() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt", 10)
        // 'isto \xe9 assim' written as Latin-1: one byte 0xE9, not UTF-8.
        var script = Array("function on_success(s)\n  local text = 'isto ".utf8)
        script.append(0xE9)
        script += Array(" assim'\n  hoist.append_file('seen.txt', #text .. ' ' .. text:byte(6))\nend\n".utf8)
        try hooks.fixture.directory.write("latin1.lua", Data(script))
        let summary = try await hooks.run("", files: ["latin1.lua"])
        #expect(summary.uploaded == 1)
        #expect(try String(contentsOf: hooks.output.appendingPathComponent("seen.txt"), encoding: .utf8) == "12 233")
        #expect(hooks.log.all.isEmpty, "\(hooks.log.all)")
    }

    @Test func aHookThatIsNotARegularFileIsRefusedWithTheReason() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try FileManager.default.createDirectory(at: fixture.directory.url.appendingPathComponent("folder.lua"), withIntermediateDirectories: true)
        #expect(mkfifo(fixture.directory.url.appendingPathComponent("pipe.lua").path, 0o600) == 0)
        for (name, reason) in [("folder.lua", "it is a folder, not a file"), ("pipe.lua", "it is not a regular file"),
                               ("gone.lua", "there is no such file")] {
            let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
            try "version: 1\nname: refused\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nhooks:\n  - \(name)\n"
                .write(toFile: manifest, atomically: true, encoding: .utf8)
            let validated = try runProcess(hoist, ["validate", manifest])
            #expect(validated.status == 2)
            #expect(validated.stderr.contains("job.yaml:6:5: cannot read hook \(name)") && validated.stderr.contains(reason),
                    "\(validated.stderr)")
        }
    }
}
