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
        let run = try runProcess(hoist, ["run", manifest],
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
        let run = try runProcess(hoist, ["validate", path], environment: ["HOME": "/root"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("job.yaml:\(line):") && run.stderr.contains(what), "\(run.stderr)")
    }

    /// The red team's attack: a hook appends a CA to the file `AWS_CA_BUNDLE` names, and the next
    /// run sends its signed requests to a man in the middle. Every variable naming a file some
    /// part of a run reads is declared once (a backend's `reads(in:)`, HoistHTTP's
    /// `HTTPEnvironment.reads`), and the output folder may hold none of them.
    @Test(arguments: [
        ("AWS_CA_BUNDLE", "s3://bkt"), ("AWS_CONFIG_FILE", "s3://bkt"), ("CURL_CA_BUNDLE", "file:bucket"),
        ("SSL_CERT_DIR", "gs://bkt"), ("OPENSSL_CONF", "file:bucket"), ("OPENSSL_MODULES", "s3://bkt"), ("TZ", "file:bucket"),
        ("SASL_PATH", "gs://bkt"), ("KRB5_CONFIG", "file:bucket"), ("ICU_DATA", "file:bucket"),
    ])
    func anOutputFolderHoldingAFileTheEnvironmentNamesIsRefused(variable: String, url: String) throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try fixture.directory.write("conf/named", Data("\n".utf8))
        let text = "version: 1\nname: test\njournal: journal.sqlite\nstorage: { url: '\(url)' }\nfiles: [{ root: src }]\nlua: { output: conf }\n"
        let path = fixture.directory.url.appendingPathComponent("job.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let environment = ["HOME": "/root", variable: (variable == "TZ" ? ":" : "") + fixture.directory.url.appendingPathComponent("conf/named").path]
        #expect(throws: (any Error).self) { try Job(file: path, environment: environment).checkRoots() }
        let run = try runProcess(hoist, ["validate", path], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains("job.yaml:6:") && run.stderr.contains("$\(variable)"), "\(run.stderr)")
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

    /// Variables a hook reads with `os.getenv`, one log line each: `NAME=value` or `NAME=nil`.
    static func readingEnvironment(_ names: [String]) -> String {
        """
        function on_job_start(job)
          for _, name in ipairs({ \(names.map { "\"\($0)\"" }.joined(separator: ", ")) }) do
            log.info(name .. "=" .. tostring(os.getenv(name)))
          end
        end
        """
    }

    /// The process's environment of the attacks: secrets under names no deny-list knew, the
    /// bundled plugins' variables, and the default set.
    static let leakyEnvironment = [
        "HOME": "/root", "USER": "ops", "HOSTNAME": "box", "LANG": "C.UTF-8", "TZ": "UTC", "LC_TIME": "en_GB.UTF-8",
        "MYSQL_PWD": "pw-mysql", "DB_PASS": "pw-db", "SLACK_HOOK": "https://hooks.slack.com/services/T000/B000/s3cr3tpath",
        "APP_CONFIG": #"{"db_host": "db", "db_password": "pw-json"}"#, "PATH": "/usr/bin", "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.secret",
        "MY_API_TOKEN": "t0k3n", "HOIST_WEBHOOK_URL": "http://hook/secret-path", "HOIST_GUARD_MAX_FILE": "1000", "HOIST_GUARD_BUDGET": "800",
    ]

    @Test func osGetenvShowsTheDefaultSetAndNothingElseUngranted() async throws {
        // Hidden by name only: MYSQL_PWD, DB_PASS, the Slack URL and the JSON config came back whole.
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let environment = Self.leakyEnvironment
        _ = try await hooks.run(Self.readingEnvironment(environment.keys.sorted()), environment: environment)
        let logs = hooks.log.all
        for name in ["HOME", "USER", "HOSTNAME", "LANG", "TZ", "LC_TIME"] {
            #expect(logs.contains { $0.hasSuffix("] info: \(name)=\(environment[name]!)") }, "\(name) in \(logs)")
        }
        for name in ["MYSQL_PWD", "DB_PASS", "SLACK_HOOK", "APP_CONFIG", "PATH", "GOOGLE_OAUTH_ACCESS_TOKEN", "MY_API_TOKEN",
                     "HOIST_WEBHOOK_URL", "HOIST_GUARD_MAX_FILE", "HOIST_GUARD_BUDGET"] {
            #expect(logs.contains { $0.hasSuffix("] info: \(name)=nil") }, "\(name) in \(logs)")
        }
        #expect(!logs.joined().contains("pw-") && !logs.joined().contains("s3cr3t") && !logs.joined().contains("secret"), "\(logs)")
    }

    @Test func osGetenvShowsWhatLuaEnvGrantsWhole() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let environment = Self.leakyEnvironment
        _ = try await hooks.run(Self.readingEnvironment(environment.keys.sorted()),
                                extra: "lua: { env: [SLACK_HOOK, APP_CONFIG, 'HOIST_GUARD_*'] }\n", environment: environment)
        let logs = hooks.log.all
        // Granted by name or by a glob, given as they are: the operator granted them.
        for name in ["SLACK_HOOK", "APP_CONFIG", "HOIST_GUARD_MAX_FILE", "HOIST_GUARD_BUDGET", "HOME"] {
            #expect(logs.contains { $0.hasSuffix("] info: \(name)=\(environment[name]!)") }, "\(name) in \(logs)")
        }
        for name in ["MYSQL_PWD", "DB_PASS", "PATH", "MY_API_TOKEN", "HOIST_WEBHOOK_URL"] {
            #expect(logs.contains { $0.hasSuffix("] info: \(name)=nil") }, "\(name) in \(logs)")
        }
    }

    @Test func luaSecretsStillGrants() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        _ = try await hooks.run(Self.readingEnvironment(["MY_API_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN"]), extra: "lua: { secrets: [MY_API_TOKEN] }\n",
                                environment: Self.leakyEnvironment)
        #expect(hooks.log.all.contains { $0.hasSuffix("MY_API_TOKEN=t0k3n") }, "\(hooks.log.all)")
        #expect(hooks.log.all.contains { $0.hasSuffix("GOOGLE_OAUTH_ACCESS_TOKEN=nil") }, "\(hooks.log.all)")
    }

    @Test func osGetenvShowsTheManifestsEnvKeysButNotTheEnvFilesUnlessGranted() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        _ = try hooks.fixture.directory.write("job.env", Data("FROM_FILE=file-secret\nDB_URL=postgres://u:pw-file@db/x\nLANG=xx\n".utf8))
        let env = "envFile: job.env\nenv: { REGION: eu-west, DB_PASSWORD: pw-other, DB_URL: 'postgres://u:pw-env@db/x' }\n"
        let names = ["REGION", "DB_PASSWORD", "DB_URL", "FROM_FILE", "LANG"]
        _ = try await hooks.run(Self.readingEnvironment(names), extra: env, environment: ["HOME": "/root", "LANG": "C"])
        let logs = hooks.log.all
        #expect(logs.contains { $0.hasSuffix("] info: REGION=eu-west") }, "\(logs)")
        #expect(logs.contains { $0.hasSuffix("] info: DB_PASSWORD=nil") }, "\(logs)")
        // An env: key that is not named like a credential, with a URL's password hidden.
        #expect(logs.contains { $0.hasSuffix("] info: DB_URL=postgres://u:***@db/x") }, "\(logs)")
        // The env file is where secrets go: none of its keys, the default set's included.
        #expect(logs.contains { $0.hasSuffix("] info: FROM_FILE=nil") }, "\(logs)")
        #expect(logs.contains { $0.hasSuffix("] info: LANG=nil") }, "\(logs)")
        #expect(!logs.joined().contains("pw-") && !logs.joined().contains("file-secret"), "\(logs)")

        let granted = try HookFixture()
        try granted.fixture.file("a.txt")
        _ = try granted.fixture.directory.write("job.env", Data("FROM_FILE=file-secret\n".utf8))
        _ = try await granted.run(Self.readingEnvironment(["FROM_FILE"]), extra: "envFile: job.env\nlua: { env: [FROM_FILE] }\n")
        #expect(granted.log.all.contains { $0.hasSuffix("] info: FROM_FILE=file-secret") }, "\(granted.log.all)")
    }

    @Test func luaEnvRefusesGlobsThatGrantWhatNobodyNamed() throws {
        let fixture = try JobFixture()
        for (grant, problem) in [("'*'", "that is every variable"), ("'*_URL'", "give a variable's name"), ("'A*B'", "give a variable's name"),
                                 ("'BAD-NAME'", "give a variable's name"), ("'1ST'", "give a variable's name")] {
            do {
                _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nlua: { env: [\(grant)] }\n")
                Issue.record("lua.env: [\(grant)] was taken")
            } catch {
                #expect("\(error)".contains(problem), "\(error)")
            }
        }
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nlua: { env: [HOIST_GUARD_*, TZ, _X1] }\n")
    }
}

extension HostAPIAttackTests {
    @Test func osGetenvHidesPasswordsInsideURLValuedVariables() async throws {
        // Hidden by name only: these came back whole. Hooks see such variables only as keys of the
        // manifest's env: (the process's own read as nil unless granted), with URL credentials hidden.
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let env = ["HOIST_JOURNAL": "postgres://hoist:PASS1@db.internal:5432/hoist?sslmode=require",
                   "HTTPS_PROXY": "http://proxy-user:PASS2@proxy:3128", "DATABASE_URL": "mysql://root:PASS3@localhost/app",
                   "MIRRORS": "https://TOKEN4@git.example.com/a.git https://u:PASS5@b.example.com/",
                   "PG_CONN": "host=db user=hoist password=PASS6", "SERVICE": "https://api.example.com/v1?access_token=TOKEN7&x=1",
                   "CONTACT": "ops@example.com", "APP_CONFIG": #"{"db_host": "db", "db_password": "PASS8", "port": 5432, "apiKey":"TOKEN9"}"#]
        let manifestEnv = "env: { " + env.sorted { $0.key < $1.key }.map { "\($0.key): '\($0.value)'" }.joined(separator: ", ") + " }\n"
        _ = try await hooks.run(Self.readingEnvironment(env.keys.sorted()), extra: manifestEnv)
        let logs = hooks.log.all
        #expect(!logs.joined().contains("PASS") && !logs.joined().contains("TOKEN"), "\(logs)")
        for shown in ["HOIST_JOURNAL=postgres://hoist:***@db.internal:5432/hoist?sslmode=require", "HTTPS_PROXY=http://proxy-user:***@proxy:3128",
                      "DATABASE_URL=mysql://root:***@localhost/app", "MIRRORS=https://***@git.example.com/a.git https://u:***@b.example.com/",
                      "PG_CONN=host=db user=hoist password=***", "SERVICE=https://api.example.com/v1?access_token=***&x=1",
                      "CONTACT=ops@example.com", #"APP_CONFIG={"db_host": "db", "db_password": "***", "port": 5432, "apiKey":"***"}"#] {
            #expect(logs.contains { $0.hasSuffix(shown) }, "\(shown) in \(logs)")
        }
    }

    /// The second attack pass: a secret that reached an `env:` value through `${MYSQL_PWD}` in
    /// shapes redaction missed (spaces around `=`, quotes, a nested JSON member), and literal
    /// credentials in those shapes. What is made of a hidden value is hidden; the shapes are redacted.
    @Test func osGetenvHidesEnvValuesBuiltFromHiddenVariables() async throws {
        let hooks = try HookFixture()
        try hooks.fixture.file("a.txt")
        let manifestEnv = #"""
            env:
              PG_CONN: 'host=db port=5432 user=app password = ${MYSQL_PWD}'
              APP_CONFIG2: '{"db": {"db_password": "${MYSQL_PWD}"}}'
              PG_CONN2: "host=db user=app password='LITERAL1'"
              PG_CONN3: 'host=db user=app password = LITERAL2'
              NESTED: '{"db": {"db_password": "LITERAL3", "user": "app"}}'
              HEADER: 'Authorization: Bearer LITERAL4'
              REGION: eu-west-1

            """#
        _ = try await hooks.run(Self.readingEnvironment(["PG_CONN", "APP_CONFIG2", "PG_CONN2", "PG_CONN3", "NESTED", "HEADER", "REGION"]),
                                extra: manifestEnv, environment: ["HOME": "/root", "MYSQL_PWD": "Tr0ub4dor&3"])
        let logs = hooks.log.all
        #expect(!logs.joined().contains("Tr0ub4dor") && !logs.joined().contains("LITERAL"), "\(logs)")
        for shown in ["PG_CONN=nil", "APP_CONFIG2=nil", "PG_CONN2=host=db user=app password=***", "PG_CONN3=host=db user=app password = ***",
                      #"NESTED={"db": {"db_password": "***", "user": "app"}}"#, "HEADER=Authorization: ***", "REGION=eu-west-1"] {
            #expect(logs.contains { $0.hasSuffix("] info: " + shown) }, "\(shown) in \(logs)")
        }
    }

    /// A bind mount of the output folder over the envFile's folder: the path check saw two
    /// folders, the kernel one. The same folder is found by its device and inode.
    @Test func anOutputFolderMountedOverWhatHoistReadsIsRefused() throws {
        // Root, and a machine that lets root make a mount namespace (a container may not).
        guard geteuid() == 0, (try? runProcess("/usr/bin/unshare", ["-m", "true"]))?.status == 0 else { return }
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try fixture.directory.write("conf/job.env", Data("SITE=main\n".utf8))
        try FileManager.default.createDirectory(at: fixture.directory.url.appendingPathComponent("out"), withIntermediateDirectories: true)
        _ = try fixture.job("envFile: conf/job.env\nstorage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nlua: { output: out }\n")
        let folder = fixture.directory.url.path
        // In a mount namespace of its own: the bind mount ends with the process.
        let run = try runProcess("/usr/bin/unshare", ["-m", "sh", "-c",
            "mount --bind '\(folder)/conf' '\(folder)/out' && exec '\(hoist)' validate '\(folder)/job.yaml'"],
            environment: ["HOME": "/root", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        #expect(run.status == 2, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("mounted at another path") && run.stderr.contains("the envFile"), "\(run.stderr)")
    }

    @Test func jsonDecodeReadsJSONAndRefusesTheRest() throws {
        let text = #" {"a":[1,2.5,-0,1e3,1.0,true,null,"x\u00e9\ud83d\ude00\n\ud800"],"b":{},"c":[],"d":9223372036854775808} "#
        let value = try HookJSONDecoder.decode(text, allowance: 1 << 20, limit: 1 << 20)
        #expect(value == .table(["a": .array([.integer(1), .number(2.5), .integer(0), .integer(1000), .integer(1), .boolean(true), .nil,
                                               .string("x\u{E9}\u{1F600}\n\u{FFFD}")]),
                                 "b": .table([:]), "c": .array([]), "d": .number(9223372036854775808)]))
        for bad in ["", "[1,]", "{\"a\" 1}", "01", "[1 2]", "\"\\x\"", "1.", "-", "nul", "[1]x", "\"a\u{01}\"", "{1:2}", "[", "NaN"] {
            #expect(throws: HookJSONDecoder.Failure.self, "\(bad.debugDescription)") {
                try HookJSONDecoder.decode(bad, allowance: 1 << 20, limit: 1 << 20)
            }
        }
        #expect { try HookJSONDecoder.decode("[1,2,3]", allowance: 100, limit: 100) } throws: {
            "\($0)" == "json.decode: the value would take more than the memory limit of 100 bytes"
        }
    }

    @Test func jsonDecodeOfAHugeArrayStaysWithinTheMemoryLimit() throws {
        // JSONSerialization built the whole array first: 1 GB of RSS under a 64 MiB limit.
        let run = try runJob(hook: """
            function on_job_start(job)
              local text = "[" .. string.rep("1", 12000000, ",") .. "]"
              local ok, err = pcall(json.decode, text)
              log.info("decoded " .. #text .. " bytes: " .. tostring(ok) .. " " .. tostring(err))
            end
            """, settings: "{ memoryLimit: 64MiB }", seconds: 60)
        #expect(run.ended && run.status == 0 && run.uploaded, "\(run.output)")
        #expect(run.output.contains("decoded 24000001 bytes: false") && run.output.contains("memory limit"), "\(run.output)")
        // The text (24 MB in Lua, again in Swift) and the decoded part up to the limit.
        #expect(run.peakRSS > 0 && run.peakRSS < 300 << 20, "peak RSS \(run.peakRSS >> 20) MiB")
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

    @Test func aLaterHookCannotUndoAVeto() async throws {
        // The guard plugin skipped the large files, then a later script answering nothing
        // uploaded them anyway: its answer replaced the guard's.
        let hooks = try HookFixture()
        for index in 0..<6 { try hooks.fixture.file("big\(index).bin", 2000) }
        for name in ["a.txt", "b.txt"] { try hooks.fixture.file(name, 10) }
        let plugins = packageRoot.appendingPathComponent("plugins").path
        let summary = try await hooks.run("""
            function before_upload(f)
              log.info("asked about " .. f.relpath)
              if f.relpath == "b.txt" then return false end
            end
            """, files: ["\(plugins)/guard.lua"], extra: "lua: { env: [HOIST_GUARD_MAX_FILE] }\n", environment: ["HOIST_GUARD_MAX_FILE": "1000"])
        #expect(summary.uploaded == 1 && summary.vetoed == 7, "\(summary)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: hooks.bucket.path).filter { !$0.hasPrefix(".") } == ["a.txt"])
        // A veto is final: the later script is not even asked.
        let asked = hooks.log.all.filter { $0.contains("asked about") }
        #expect(asked.count == 2 && !asked.contains { $0.contains("big") }, "\(asked)")
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
        // Loops in C the instruction count never sees (HookCLoopAttackTests).
        "sort": HookCLoopAttackTests.loops["sort"]!,
        "unpack": HookCLoopAttackTests.loops["unpack"]!,
        "utf8": HookCLoopAttackTests.loops["utf8"]!,
    ]

    @Test(arguments: ["xpcall", "coroutines", "pattern", "http", "sort", "unpack", "utf8"], [SIGTERM, SIGINT])
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
        let hoist = try HoistProcess(fixture)
        let started = fixture.directory.url.appendingPathComponent("out/started.txt")
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: started.path), Date() < deadline { usleep(20_000) }
        #expect(FileManager.default.fileExists(atPath: started.path))
        usleep(300_000)
        let sent = Date()
        kill(hoist.process.processIdentifier, signal)
        let ended = hoist.wait(5)
        withExtendedLifetime(server) {}
        let text = hoist.output
        #expect(ended, "still running 5 s after the signal: \(text)")
        #expect(Date().timeIntervalSince(sent) < 5)
        #expect(hoist.process.terminationStatus == 130, "\(text)")
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

/// `hoist run` of a fixture's job, as cron runs it: a real process, so a crash (`abort()`, exit
/// 134) or a hang is seen as a user would see it.
final class HoistProcess {
    let process = Process()
    private let pipe = Pipe()
    let started = Date()
    /// The highest peak RSS (`VmHWM`) in bytes seen while waiting.
    private(set) var peakRSS = 0

    init(_ fixture: JobFixture) throws {
        process.executableURL = URL(fileURLWithPath: hoist)
        process.arguments = ["run", fixture.directory.url.appendingPathComponent("job.yaml").path]
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
    }

    /// Waits up to `seconds` for the process to end, reading its peak RSS every 20 ms; one still
    /// running then is killed (SIGKILL).
    /// - Returns: whether it ended by itself.
    func wait(_ seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        let status = "/proc/\(process.processIdentifier)/status"
        while process.isRunning, Date() < deadline {
            if let text = try? String(contentsOfFile: status, encoding: .utf8),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
               let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) {
                peakRSS = max(peakRSS, kilobytes * 1024)
            }
            usleep(20_000)
        }
        let ended = !process.isRunning
        if !ended { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return ended
    }

    /// What it printed (standard output and error), once it ended.
    var output: String { String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
}

/// Lua values Swift reads back (a hook's answer, a host function's arguments) are hostile: Swift
/// reads them raw, so no metamethod runs outside the call's budgets.
@Suite struct HookValueAttackTests {
    /// Runs `hoist run` of a job whose `before_upload` returns `answer`, under a 2 s time limit.
    func runBeforeUpload(returning answer: String) throws -> (ended: Bool, status: Int32, seconds: Double, output: String, uploaded: Bool) {
        try runJob(beforeUpload: "return \(answer)")
    }
}

/// `hoist run` of a job of one file whose `before_upload` is `body`, under a 2 s time limit.
func runJob(beforeUpload body: String) throws -> (ended: Bool, status: Int32, seconds: Double, output: String, uploaded: Bool) {
    let run = try runJob(hook: "function before_upload(f)\n  \(body)\nend")
    return (run.ended, run.status, run.seconds, run.output, run.uploaded)
}

/// `hoist run` of a job of one file (`a.txt`) whose one hook is `lua`, with `settings` as its
/// `lua:` settings: killed if still running after `seconds`.
func runJob(hook lua: String, settings: String = "{ timeLimit: 2s }", seconds: Double = 15) throws
    -> (ended: Bool, status: Int32, seconds: Double, output: String, uploaded: Bool, peakRSS: Int)
{
    let fixture = try JobFixture()
    try fixture.file("a.txt", 10)
    let indented = lua.split(separator: "\n", omittingEmptySubsequences: false).map { "      \($0)" }.joined(separator: "\n")
    _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nlua: \(settings)\nhooks:\n  - inline: |\n\(indented)\n")
    let hoist = try HoistProcess(fixture)
    let ended = hoist.wait(seconds)
    let uploaded = FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket/a.txt").path)
    return (ended, hoist.process.terminationStatus, Date().timeIntervalSince(hoist.started), hoist.output, uploaded, hoist.peakRSS)
}

extension HookValueAttackTests {
    @Test func anAnswerWhoseMetatableLoopsIsReadWithoutRunningIt() throws {
        // Reading the answer looked for `__jsonarray` in its metatable with lua_getfield, which ran
        // the metatable's own __index with no budget armed: 60 s, until SIGKILL.
        let run = try runBeforeUpload(returning: "setmetatable({}, setmetatable({}, { __index = function() while true do end end }))")
        #expect(run.ended, "still running after 15 s: \(run.output)")
        #expect(run.seconds < 5, "took \(run.seconds) s")
        #expect(run.status == 0 && run.uploaded, "\(run.status): \(run.output)")
    }

    @Test func anAnswerWhoseMetatableErrorsDoesNotAbortHoist() throws {
        // The same read with error("boom") there raised outside any protected call: Lua's panic,
        // abort(), exit 134.
        let run = try runBeforeUpload(returning: "setmetatable({}, setmetatable({}, { __index = function() error('boom') end }))")
        #expect(run.ended, "still running after 15 s: \(run.output)")
        #expect(run.status == 0 && run.uploaded, "\(run.status): \(run.output)")
    }
}

/// Library functions that loop in C on a size the script chooses, where the instruction count
/// never sees them: each must end within the call's time limit.
@Suite struct HookCLoopAttackTests {
    static let loops = [
        // 2^40 copies of nothing: no memory to run out of.
        "rep": "while true do string.rep('', 1 << 40) end",
        // A length of 2^31 - 2 and a comparison in C: Lua's quicksort scanned 2^31 elements.
        "sort": "table.sort(setmetatable({}, { __len = function() return (1 << 31) - 2 end }), rawequal)",
        // Each element read calls a C function (table.concat itself, answering "").
        "concat": "table.concat(setmetatable({}, { __index = table.concat }), '', 1, 1 << 40)",
        // A million reads in C per instruction.
        "unpack": "local t = setmetatable({}, { __index = table.concat }) while true do table.unpack(t, 1, 990000) end",
        // 0.3 s in C per call, and 250 calls between two runs of the count hook: 86 s.
        "utf8": "local s = string.rep('x', 30000000) while true do utf8.len(s) end",
        // A host call's Swift work is not instructions either: 20 MB read into Swift per call.
        "hostcall": "local s = string.rep('x', 20000000) while true do pcall(json.decode, s) end",
    ]

    @Test(arguments: ["rep", "sort", "concat", "unpack", "utf8", "hostcall"])
    func aLoopInCEndsWithinTheTimeLimit(loop: String) throws {
        let run = try runJob(beforeUpload: Self.loops[loop]!)
        #expect(run.ended, "still running after 15 s: \(run.output)")
        #expect(run.seconds < 6, "took \(run.seconds) s")
        #expect(run.status == 1 && !run.uploaded, "\(run.status): \(run.output)")
        #expect(run.output.contains("job.yaml#hooks[0]:"), "\(run.output)")
        #expect(run.output.contains("exceeded"), "\(run.output)")
    }
}
