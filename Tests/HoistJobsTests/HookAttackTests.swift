import Foundation
@testable import HoistJobs
import HoistStorage
import HoistTestSupport
import Synchronization
import Testing

/// A plugin written by an attacker: each test is one attack on the host API, run through a real
/// job, checked by what a user would see (files on disk, objects, the log, the time it took).
@Suite struct HostAPIAttackTests {
    func hostile() throws -> (server: ServerProcess, port: Int) {
        let server = try ServerProcess(testPython, testPythonArguments + [packageRoot.appendingPathComponent("Tests/servers/hostile.py").path])
        return (server, try server.readyPort())
    }

    func text(_ url: URL) -> String? { try? String(contentsOf: url, encoding: .utf8) }

    @Test func httpPostToAFileURLWritesNoFile() async throws {
        let (server, port) = try hostile()
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let target = hooks.fixture.directory.url.appendingPathComponent("cron-x")
        let summary = try await hooks.run("""
            function on_job_start(job)
              for _, url in ipairs({ "file://\(target.path)", "FILE://\(target.path)", "gopher://127.0.0.1:\(port)/x",
                                     "dict://127.0.0.1:\(port)/d", "smb://127.0.0.1/share", "\(target.path)" }) do
                local ok, err = pcall(http.post, url, "* * * * * root touch /tmp/pwned")
                log.info(url .. " -> " .. tostring(ok) .. " " .. tostring(err))
              end
              -- A redirect to file:// is not followed either.
              local r, err = http.post("http://127.0.0.1:\(port)/redirect?to=file://\(target.path)", "x")
              log.info("redirect -> " .. tostring(r and r.status))
            end
            """)
        withExtendedLifetime(server) {}
        #expect(summary.uploaded == 1)
        #expect(!FileManager.default.fileExists(atPath: target.path))
        let logs = hooks.log.all
        #expect(logs.filter { $0.contains("-> false") && $0.contains("only http:// and https:// URLs are allowed") }.count == 6, "\(logs)")
        #expect(logs.contains { $0.contains("redirect -> 302") }, "\(logs)")
    }

    @Test func httpPostHugeAnswerIsCutAtOneMiB() async throws {
        let (server, port) = try hostile()
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let summary = try await hooks.run("""
            function on_job_start(job)
              local r, err = http.post("http://127.0.0.1:\(port)/big?bytes=104857600", "x")
              log.info("big -> " .. tostring(r and #r.body) .. " " .. tostring(err))
              local r2 = http.post("http://127.0.0.1:\(port)/big?bytes=1000", "x")
              log.info("small -> " .. tostring(r2 and #r2.body))
              local r3, err3 = http.post("http://127.0.0.1:\(port)/headers", "x")
              log.info("headers -> " .. tostring(r3) .. " " .. tostring(err3))
            end
            """, extra: "lua: { memoryLimit: 2MiB }\n")
        withExtendedLifetime(server) {}
        #expect(summary.uploaded == 1)
        let logs = hooks.log.all
        #expect(logs.contains { $0.contains("big -> nil the response is larger than 1048576 bytes") }, "\(logs)")
        #expect(logs.contains { $0.contains("small -> 1000") }, "\(logs)")
        // Endless headers end the request too (libcurl 7.88 on Debian stops at 300 KB of them,
        // Hoist at the 1 MiB answer limit whichever libcurl it links).
        #expect(logs.contains { $0.contains("headers -> nil ") }, "\(logs)")
    }

    @Test func httpPostToASlowDripServerEndsWithTheCallsTimeLimit() async throws {
        let (server, port) = try hostile()
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let started = Date()
        let summary = try await hooks.run("""
            function on_job_start(job)
              local r, err = http.post("http://127.0.0.1:\(port)/drip", "x")
              log.info("drip -> " .. tostring(r) .. " " .. tostring(err))
            end
            """, extra: "lua: { timeLimit: 2s }\n")
        withExtendedLifetime(server) {}
        let elapsed = Date().timeIntervalSince(started)
        #expect(summary.uploaded == 1)
        #expect(elapsed < 6, "took \(elapsed) s")
        #expect(hooks.log.all.contains { $0.contains("drip -> nil") && $0.contains("Timeout") }, "\(hooks.log.all)")
    }

    @Test func appendFileThroughASymlinkOutOfTheOutputFolderIsRefused() async throws {
        let outside = try TemporaryDirectory()
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        try FileManager.default.createDirectory(at: hooks.output, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: hooks.output.appendingPathComponent("link").path, withDestinationPath: outside.url.path)
        try FileManager.default.createSymbolicLink(atPath: hooks.output.appendingPathComponent("passwd.txt").path,
                                                   withDestinationPath: outside.url.appendingPathComponent("passwd").path)
        try Data("root:x:0:0\n".utf8).write(to: outside.url.appendingPathComponent("passwd"))
        _ = try await hooks.run("""
            function on_job_start(job)
              for _, path in ipairs({ "link/evil.txt", "link/deeper/evil.txt", "passwd.txt", "../escape.txt", "/tmp/abs.txt", "../job.yaml" }) do
                local ok, err = pcall(hoist.append_file, path, "evil\\n")
                log.info(path .. " -> " .. tostring(ok) .. " " .. tostring(err))
              end
              hoist.append_file("logs/fine.txt", "fine\\n")
            end
            """)
        #expect((try FileManager.default.contentsOfDirectory(atPath: outside.url.path)) == ["passwd"])
        #expect(text(outside.url.appendingPathComponent("passwd")) == "root:x:0:0\n")
        #expect(text(hooks.output.appendingPathComponent("logs/fine.txt")) == "fine\n")
        #expect(text(hooks.fixture.directory.url.appendingPathComponent("job.yaml"))?.hasSuffix("evil\n") == false)
        let logs = hooks.log.all
        #expect(logs.filter { $0.contains("-> false") }.count == 6, "\(logs)")
        #expect(logs.contains { $0.contains("link/evil.txt -> false") && $0.contains("symbolic link") }, "\(logs)")
        #expect(logs.contains { $0.contains("passwd.txt -> false") && $0.contains("symbolic link") }, "\(logs)")
        #expect(logs.contains { $0.contains("../job.yaml -> false") && $0.contains("inside the job's hook output folder") }, "\(logs)")
    }

    /// The red team's attack: a hook appends `STORAGE_EMULATOR_HOST=...` to the job's envFile, so
    /// the next run sends every upload to the attacker. A hook writes below `lua.output` only.
    @Test func aHookAppendingToTheEnvFileCannotRewireTheNextRun() async throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try fixture.directory.write("job.env", Data("GREETING=hello\n".utf8))
        _ = try fixture.job("""
            envFile: job.env
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { output: logs }
            hooks:
              - inline: |
                  function on_job_start(job)
                    for _, path in ipairs({ "../job.env", "/\(fixture.directory.url.path)/job.env", "../../job.env" }) do
                      local ok, err = pcall(hoist.append_file, path, "STORAGE_EMULATOR_HOST=127.0.0.1:9\\n")
                      log.warn(path .. " -> " .. tostring(ok) .. " " .. tostring(err))
                    end
                  end
            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let run = try runProcess(productsDirectory.appendingPathComponent("hoist").path, ["run", manifest],
                                 environment: ["HOME": fixture.directory.url.path, "PATH": "/usr/bin:/bin"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(text(fixture.directory.url.appendingPathComponent("job.env")) == "GREETING=hello\n")
        #expect(run.stderr.components(separatedBy: "-> false").count - 1 == 3, "\(run.stderr)")
    }

    /// An output folder that holds (or lies inside) anything Hoist reads is a manifest error at
    /// `lua.output`, for `hoist validate` and before a run starts.
    @Test(arguments: [
        ("conf", "envFile: conf/job.env\n", "the envFile"),
        ("conf", "storage: { url: 'gs://b', caBundle: conf/ca.pem }\n", "the CA bundle"),
        ("conf", "storage: { url: 'gs://b', credentials: conf/key.json }\n", "the credentials file"),
        ("conf", "hooks: [conf/hook.lua]\n", "a hook script"),
        ("conf", "journal: conf/journal.sqlite\n", "the journal"),
        (".", "", "the manifest"),
        ("bucket/logs", "", "the local bucket"),
        ("src/logs", "", "a file set's root"),
        ("plugins", "", "a plugin folder"),
    ])
    func anOutputFolderHoldingWhatHoistReadsIsRefused(output: String, settings: String, what: String) throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        for name in ["conf/job.env", "conf/ca.pem", "conf/key.json", "conf/hook.lua"] { try fixture.directory.write(name, Data("\n".utf8)) }
        let storage = settings.hasPrefix("storage:") ? "" : "storage: { url: 'file:bucket' }\n"
        let journal = settings.hasPrefix("journal:") ? "" : "journal: journal.sqlite\n"
        let text = "version: 1\nname: test\n" + journal + settings + storage + "files: [{ root: src }]\nlua: { output: \(output) }\n"
        let path = fixture.directory.url.appendingPathComponent("job.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let line = text.components(separatedBy: "\n").firstIndex { $0.hasPrefix("lua:") }! + 1
        let job = try Job(file: path, environment: ["HOME": "/root"])
        #expect {
            try job.checkRoots()
        } throws: { error in
            let text = "\(error)"
            return text.contains("job.yaml:\(line):") && text.contains("the hook output folder") && text.contains(what)
        }
        let run = try runProcess(productsDirectory.appendingPathComponent("hoist").path, ["validate", path], environment: ["HOME": "/root"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("job.yaml:\(line):") && run.stderr.contains(what), "\(run.stderr)")
    }

    @Test func appendFileWithoutAnOutputFolderIsRefused() async throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            hooks:
              - inline: |
                  function on_job_start(job) log.warn(select(2, pcall(hoist.append_file, "x.txt", "x"))) end
            """)
        let log = HookLog()
        let bus = try HookBus(job: job, storage: try job.makeStorage()) { line in log.append(line.message) }
        let summary = await JobRunner(job: job, storage: try job.makeStorage(), observers: [], hooks: bus).run(totals: try Planner(job: job).check())
        #expect(summary.uploaded == 1)
        #expect(log.all.contains { $0.contains("declares no folder for hook output (set lua.output") }, "\(log.all)")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("x.txt").path))
    }

    @Test func anOutputFolderThatIsASymlinkIsNotFollowed() async throws {
        let outside = try TemporaryDirectory()
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        try FileManager.default.createSymbolicLink(atPath: hooks.output.path, withDestinationPath: outside.url.path)
        _ = try await hooks.run("function on_job_start(job) log.warn(select(2, pcall(hoist.append_file, 'x.txt', 'x'))) end")
        #expect((try FileManager.default.contentsOfDirectory(atPath: outside.url.path)).isEmpty)
        #expect(hooks.log.all.contains { $0.contains("symbolic link") }, "\(hooks.log.all)")
    }

    @Test func jsonDecodeOf300NestedArraysIsAnErrorNotACrash() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let summary = try await hooks.run("""
            function on_job_start(job)
              for _, n in ipairs({ 300, 100000 }) do
                local ok, err = pcall(json.decode, string.rep("[", n) .. string.rep("]", n))
                log.info(n .. " -> " .. tostring(ok) .. " " .. tostring(err))
              end
              local ok, value = pcall(json.decode, string.rep("[", 60) .. "1" .. string.rep("]", 60))
              log.info("60 -> " .. tostring(ok) .. " " .. type(value))
            end
            """)
        #expect(summary.uploaded == 1)
        let logs = hooks.log.all
        #expect(logs.contains { $0.contains("300 -> false") && $0.contains("nested deeper than 64 levels") }, "\(logs)")
        #expect(logs.contains { $0.contains("100000 -> false") && $0.contains("nested deeper than 64 levels") }, "\(logs)")
        #expect(logs.contains { $0.contains("60 -> true table") }, "\(logs)")
    }

    @Test func jsonEncodeOfASharedTableDAGStaysWithinTheMemoryLimit() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let started = Date()
        let summary = try await hooks.run("""
            function on_job_start(job)
              local t = { "leaf" }
              for i = 1, 30 do t = { t, t } end
              local ok, err = pcall(json.encode, t)
              log.info("dag -> " .. tostring(ok) .. " " .. tostring(err))
            end
            """, extra: "lua: { memoryLimit: 2MiB }\n")
        #expect(summary.uploaded == 1)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(hooks.log.all.contains { $0.contains("dag -> false") && $0.contains("more than the memory limit of 2097152 bytes") },
                "\(hooks.log.all)")
    }

    @Test func logLinesCannotForgeHoistsOutputOrDriveTheTerminal() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        _ = try await hooks.run("""
            function on_job_start(job)
              log.info("ok\\nhoist: all files verified\\27]0;pwned\\7\\27[2J")
              error("boom\\nhoist: forged")
            end
            """)
        let logs = hooks.log.all
        #expect(logs.contains { $0.hasSuffix("info: ok\\u{A}hoist: all files verified\\u{1B}]0;pwned\\u{7}\\u{1B}[2J") }, "\(logs)")
        // Line 3 of the inline script, line 11 of the manifest (HookFixture's lines 1-8 before it).
        #expect(logs.contains { $0.hasSuffix("job.yaml#hooks[0]:11: boom (in on_job_start)") }, "\(logs)")
        #expect(!logs.joined().contains("\u{1B}") && !logs.joined().contains("\n"))
    }

    @Test func osGetenvHidesCredentialsUnlessTheJobOptsIn() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let environment = ["HOME": "/root", "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.secret", "GOOGLE_APPLICATION_CREDENTIALS": "/etc/key.json",
                           "MY_API_TOKEN": "t0k3n", "HOIST_WEBHOOK_URL": "http://hook"]
        let lua = """
            function on_job_start(job)
              for _, name in ipairs({ "GOOGLE_OAUTH_ACCESS_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "MY_API_TOKEN", "HOIST_WEBHOOK_URL" }) do
                log.info(name .. "=" .. tostring(os.getenv(name)))
              end
            end
            """
        _ = try await hooks.run(lua, environment: environment)
        let hidden = hooks.log.all
        #expect(hidden.contains { $0.hasSuffix("GOOGLE_OAUTH_ACCESS_TOKEN=nil") }, "\(hidden)")
        #expect(hidden.contains { $0.hasSuffix("GOOGLE_APPLICATION_CREDENTIALS=nil") }, "\(hidden)")
        #expect(hidden.contains { $0.hasSuffix("MY_API_TOKEN=nil") }, "\(hidden)")
        #expect(hidden.contains { $0.hasSuffix("HOIST_WEBHOOK_URL=http://hook") }, "\(hidden)")
        let optedIn = try HookFixture()
        try optedIn.fixture.file("a.txt")
        _ = try await optedIn.run(lua, extra: "lua: { secrets: [MY_API_TOKEN] }\n", environment: environment)
        #expect(optedIn.log.all.contains { $0.hasSuffix("MY_API_TOKEN=t0k3n") }, "\(optedIn.log.all)")
        #expect(optedIn.log.all.contains { $0.hasSuffix("GOOGLE_OAUTH_ACCESS_TOKEN=nil") }, "\(optedIn.log.all)")
    }
}

/// `before_upload` may change a file, never bypass the checks a manifest gets.
@Suite struct BeforeUploadAttackTests {
    @Test func threeFilesRewrittenToOneDestinationUploadOnlyOne() async throws {
        let hooks = try HookFixture()
        for name in ["a.txt", "b.txt", "c.txt"] { try hooks.fixture.file(name, 10) }
        let summary = try await hooks.run("function before_upload(f) return { destination = 'same.txt' } end",
                                          extra: "upload: { concurrency: 1 }\n")
        #expect(summary.uploaded == 1)
        #expect(summary.failed == 2)
        #expect(summary.failures.allSatisfy { $0.message.contains("both go to 'same.txt' after before_upload") }, "\(summary.failures)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: hooks.bucket.path).filter { !$0.hasPrefix(".") } == ["same.txt"])
    }

    @Test func aRewrittenFileIsNotUploadedAgainByTheNextRun() async throws {
        let hooks = try HookFixture()
        for name in ["a.txt", "b.txt"] { try hooks.fixture.file(name, 10) }
        let journal = try SQLiteJournal(path: hooks.fixture.directory.url.appendingPathComponent("journal.sqlite").path)
        let lua = "function before_upload(f) return { destination = 'moved/' .. f.destination, metadata = { cacheControl = 'no-cache' } } end"
        let first = try await hooks.run(lua, journal: journal)
        #expect(first.uploaded == 2)
        let second = try await hooks.run(lua, journal: journal)
        #expect(second.uploaded == 0)
        #expect(second.skipped == 2)
    }

    @Test func anErrorInBeforeUploadFailsTheFileAndUploadsNothing() async throws {
        let hooks = try HookFixture()
        for name in ["a.txt", "secret.key"] { try hooks.fixture.file(name, 10) }
        let summary = try await hooks.run("""
            function before_upload(f)
              if f.relpath == "secret.key" then error("policy check failed for " .. f.relpath) end
            end
            """)
        #expect(summary.uploaded == 1)
        #expect(summary.failed == 1)
        let failure = try #require(summary.failures.first)
        #expect(failure.file.hasSuffix("secret.key"))
        #expect(failure.message.contains("job.yaml#hooks[0]:10: policy check failed for secret.key"), "\(failure.message)")
        #expect(failure.message.hasPrefix("before_upload failed: "), "\(failure.message)")
        #expect(!FileManager.default.fileExists(atPath: hooks.bucket.appendingPathComponent("secret.key").path))
    }

    @Test func aRunawayBeforeUploadFailsTheFile() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt", 10)
        let summary = try await hooks.run("function before_upload(f) while true do end end", extra: "lua: { instructionLimit: 100000 }\n")
        #expect(summary.uploaded == 0 && summary.failed == 1)
        #expect(summary.failures.first?.message.contains("instruction budget exceeded") == true)
    }

    @Test func aRewriteKeepsTheResumeSession() async throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            hooks:
              - inline: |
                  function before_upload(f) return { destination = f.destination, metadata = { cacheControl = f.metadata.cacheControl } } end
            """)
        let bus = try HookBus(job: job, storage: try job.makeStorage()) { _ in }
        var item = try #require(Array(Planner(job: job)).first)
        item.resumeSession = "session-42"
        let answered = try await bus.beforeUpload(item)
        #expect(answered.resumeSession == "session-42")
        #expect(answered.destination == item.destination)
    }

    @Test func headerInjectionThroughMetadataIsRefused() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt", 10)
        let summary = try await hooks.run("""
            function before_upload(f) return { metadata = { contentType = "text/plain\\r\\nX-Injected: yes" } } end
            """)
        #expect(summary.uploaded == 0 && summary.failed == 1)
        #expect(summary.failures.first?.message.contains("contentType contains the control character U+000D") == true,
                "\(summary.failures)")
    }

    @Test func destinationsBreakingObjectNamingRulesAreRefused() async throws {
        let hooks = try HookFixture()
        for name in ["a.txt", "b.txt", "c.txt"] { try hooks.fixture.file(name, 10) }
        let summary = try await hooks.run("""
            function before_upload(f)
              if f.relpath == "a.txt" then return { destination = "nul\\0name" } end
              if f.relpath == "b.txt" then return { destination = "line\\nbreak" } end
              return { destination = string.rep("x", 1025) }
            end
            """)
        #expect(summary.uploaded == 0 && summary.failed == 3)
        let messages = summary.failures.map(\.message)
        #expect(messages.contains { $0.contains("control character U+0000") }, "\(messages)")
        #expect(messages.contains { $0.contains("control character U+000A") }, "\(messages)")
        #expect(messages.contains { $0.contains("1025 bytes long: object names are at most 1024 bytes") }, "\(messages)")
    }
}

/// A hook that never returns must not hold a job that was told to stop.
@Suite struct HookSignalTests {
    static let hangs = [
        "xpcall": "xpcall(function() while true do end end, function(m) while true do end end)",
        "coroutines": "while true do coroutine.wrap(function() for i = 1, 1e6 do end end)() end",
        "pattern": "while true do string.find(string.rep('a', 30000), '.-.-.-.-.-.-b') end",
        "http": "http.post('http://127.0.0.1:PORT/drip', 'x')",
    ]

    @Test(arguments: ["xpcall", "coroutines", "pattern", "http"], [SIGTERM, SIGINT])
    func aSignalStopsAJobWhoseHookHangs(hang: String, signal: Int32) throws {
        let server = try ServerProcess(testPython, testPythonArguments + [packageRoot.appendingPathComponent("Tests/servers/hostile.py").path])
        let port = try server.readyPort()
        let fixture = try JobFixture()
        try fixture.file("a.txt", 10)
        let code = Self.hangs[hang]!.replacingOccurrences(of: "PORT", with: String(port))
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { instructionLimit: 1000000000000000, timeLimit: 1h, output: out }
            hooks:
              - inline: |
                  function before_upload(f)
                    hoist.append_file("started.txt", "x")
                    \(code)
                  end
            """)
        let process = Process()
        process.executableURL = productsDirectory.appendingPathComponent("hoist")
        process.arguments = ["run", fixture.directory.url.appendingPathComponent("job.yaml").path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let started = fixture.directory.url.appendingPathComponent("out/started.txt")
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: started.path), Date() < deadline { usleep(20_000) }
        #expect(FileManager.default.fileExists(atPath: started.path))
        usleep(300_000)
        let sent = Date()
        kill(process.processIdentifier, signal)
        let stopped = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { process.waitUntilExit(); stopped.signal() }
        let ended = stopped.wait(timeout: .now() + 5) == .success
        if !ended { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        withExtendedLifetime(server) {}
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(ended, "still running 5 s after the signal: \(text)")
        #expect(Date().timeIntervalSince(sent) < 5)
        #expect(process.terminationStatus == 130, "\(text)")
        #expect(text.contains("(interrupted)"), "\(text)")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/a.txt").path))
    }
}

/// What hooks are shown must not hand them a capability.
@Suite struct HookSnapshotAttackTests {
    @Test func errorMessagesShownToHooksCarryNoUploadSessionURL() {
        let message = "Timeout was reached: https://storage.googleapis.com/upload/storage/v1/b/b/o?uploadType=resumable&upload_id=ABCsecret (retried)"
        let shown = redactingQueries(message)
        #expect(!shown.contains("ABCsecret"))
        #expect(shown == "Timeout was reached: https://storage.googleapis.com/upload/storage/v1/b/b/o?… (retried)")
        #expect(redactingQueries("no URL? here") == "no URL? here")
    }
}
