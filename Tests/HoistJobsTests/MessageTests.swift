import Foundation
import HoistTestSupport
import Testing

/// What `validate` (and `plan`, `run`) say about a manifest: every mistake, in file order, each
/// with its place and what to do.
@Suite struct MessageTests {
    /// The `FILE:LINE:COL: message` lines of an error output.
    func summaries(_ stderr: String, _ file: String) -> [String] {
        stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix(file + ":") }
    }

    @Test func validateReportsEveryMistakeInFileOrder() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("src"), withIntermediateDirectories: true)
        let job = try directory.write("job.yaml", Data("""
            version: 1
            name: many
            storage: { url: 'file:b' }
            files:
              - root: src
                maxSize: 10XB
                hiden: true
            upload:
              bandwidth: fast
              concurrency: 0
              retries: -1
              colour: red

            """.utf8)).path
        let run = try runProcess(hoist, ["validate", job])
        #expect(run.status == 2)
        #expect(summaries(run.stderr, job) == [
            "\(job):6:14: bad size '10XB': write a number with an optional unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB",
            "\(job):7:5: unknown key 'hiden' (did you mean 'hidden'?)",
            "\(job):9:14: bad rate 'fast': write a size per second, such as 50MB/s or 512KiB/s",
            "\(job):10:16: concurrency 0 is out of range 1-256",
            "\(job):11:12: retries -1 is out of range 0-100",
            "\(job):12:3: unknown key 'colour'",
        ], "\(run.stderr)")
        // Each with its line and a caret.
        #expect(run.stderr.contains("\n      bandwidth: fast\n    " + String(repeating: " ", count: 13) + "^\n"), "\(run.stderr)")
    }

    @Test func everyUnsetVariableIsReported() throws {
        let directory = try TemporaryDirectory()
        let job = try directory.write("job.yaml", Data("""
            version: 1
            name: vars
            storage: { url: "gs://${HOIST_TEST_UNSET_BUCKET}" }
            files:
              - root: "${HOIST_TEST_UNSET_ROOT}/photos"
                destination: "${HOIST_TEST_SET:-x}/{relpath}"

            """.utf8)).path
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HOIST_TEST_") }
        let run = try runProcess(hoist, ["validate", "--syntax-only", job], environment: environment)
        #expect(run.status == 2)
        #expect(summaries(run.stderr, job) == [
            "\(job):3:23: environment variable HOIST_TEST_UNSET_BUCKET is not set (write ${HOIST_TEST_UNSET_BUCKET:-default} for a default)",
            "\(job):5:12: environment variable HOIST_TEST_UNSET_ROOT is not set (write ${HOIST_TEST_UNSET_ROOT:-default} for a default)",
        ], "\(run.stderr)")
    }

    @Test func anUnsetTemplateVariableIsCaughtWithItsPlace() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("src"), withIntermediateDirectories: true)
        let job = try directory.write("job.yaml", Data("""
            version: 1
            name: env
            storage: { url: 'file:b' }
            files:
              - root: src
                destination: "{env:HOIST_TEST_UNSET_USER}/{relpath}"
                metadata: { customMetadata: { by: "{env:HOIST_TEST_UNSET_HOST}" } }

            """.utf8)).path
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HOIST_TEST_UNSET") }
        for command in ["validate", "plan"] {
            let run = try runProcess(hoist, [command, job], environment: environment)
            #expect(run.status == 2)
            #expect(summaries(run.stderr, job) == [
                "\(job):6:18: environment variable HOIST_TEST_UNSET_USER is not set (used by {env:HOIST_TEST_UNSET_USER}): set it, or give it to the job in the manifest's env: section",
                "\(job):7:39: environment variable HOIST_TEST_UNSET_HOST is not set (used by {env:HOIST_TEST_UNSET_HOST}): set it, or give it to the job in the manifest's env: section",
            ], "\(run.stderr)")
        }
        // Given in the environment, or by the manifest's env: section, it validates.
        #expect(try runProcess(hoist, ["validate", job], environment: environment.merging(
            ["HOIST_TEST_UNSET_USER": "me", "HOIST_TEST_UNSET_HOST": "here"]) { $1 }).status == 0)
        var text = try String(contentsOfFile: job, encoding: .utf8)
        text += "env: { HOIST_TEST_UNSET_USER: me, HOIST_TEST_UNSET_HOST: here }\n"
        try text.write(toFile: job, atomically: true, encoding: .utf8)
        let given = try runProcess(hoist, ["validate", job], environment: environment)
        #expect(given.status == 0, "\(given.stderr)")
    }

    @Test func aMissingCredentialsFileIsCaughtWithItsPlace() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("src"), withIntermediateDirectories: true)
        let job = try directory.write("job.yaml", Data("""
            version: 1
            name: creds
            storage:
              url: gs://bucket
              credentials: keys/uploader.json
            files: [{ root: src }]

            """.utf8)).path
        let run = try runProcess(hoist, ["validate", job])
        #expect(run.status == 2)
        #expect(summaries(run.stderr, job) == [
            "\(job):5:16: credentials file \(directory.path)/keys/uploader.json cannot be read (No such file or directory): "
                + "fix the path (relative to the manifest's folder), or leave credentials out to use the environment's",
        ], "\(run.stderr)")
        // --syntax-only checks the manifest, not this machine.
        #expect(try runProcess(hoist, ["validate", "--syntax-only", job]).status == 0)
    }

    @Test func twoJobsWithOneNameDoNotShareTheDefaultJournal() throws {
        let directory = try TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = directory.url.appendingPathComponent("state").path
        var manifests: [String] = []
        for folder in ["a", "b"] {
            try directory.write("\(folder)/src/\(folder).txt", Data(folder.utf8))
            manifests.append(try directory.write("\(folder)/job.yaml", Data("""
                version: 1
                name: photos
                storage: { url: 'file:bucket' }
                files: [{ root: src }]

                """.utf8)).path)
        }
        #expect(try runProcess(hoist, ["run", "--quiet", manifests[0]], environment: environment).status == 0)
        let journal = directory.url.appendingPathComponent("state/hoist/photos.sqlite").path
        for command in ["run", "plan", "status"] {
            let other = try runProcess(hoist, [command, manifests[1]], environment: environment)
            #expect(other.status == 2, "\(command)")
            #expect(other.stderr.contains("\(manifests[1]) and \(manifests[0]) both name their job 'photos', and would share the journal \(journal)"),
                    "\(other.stderr)")
            #expect(other.stderr.contains("Rename one job (name:), or give one its own journal: in its manifest."))
        }
        #expect(try runProcess(hoist, ["run", "--quiet", manifests[0]], environment: environment).status == 0)
        // A manifest that moved keeps its journal: the one it came from is gone.
        try FileManager.default.removeItem(atPath: manifests[0])
        #expect(try runProcess(hoist, ["run", "--quiet", manifests[1]], environment: environment).status == 0)
    }
}
