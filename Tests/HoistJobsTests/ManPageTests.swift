import Foundation
import HoistTestSupport
import Testing

/// docs/hoist.1 is generated from the command definitions (`scripts/manpage`, from
/// `hoist --experimental-dump-help`): regenerating it must give the committed page, byte for
/// byte, so a changed option or help text cannot leave the man page behind.
@Suite struct ManPageTests {
    let committed = packageRoot.appendingPathComponent("docs/hoist.1")

    func generated() throws -> String {
        let script = packageRoot.appendingPathComponent("scripts/manpage").path
        let run = try runProcess("/usr/bin/env", ["python3", script, hoist])
        #expect(run.status == 0, "\(run.stderr)")
        return run.stdout
    }

    @Test func theCommittedManPageIsWhatTheCommandsGenerate() throws {
        let page = try generated()
        let onDisk = try String(contentsOf: committed, encoding: .utf8)
        #expect(page == onDisk, "docs/hoist.1 is out of date: run `scripts/manpage .build/debug/hoist > docs/hoist.1` and commit it")
    }

    @Test func thePageNamesEveryCommandAndOptionAndRendersWithoutWarnings() throws {
        let page = try generated()
        for command in ["run", "watch", "validate", "plan", "status", "cron", "systemd", "cp", "plugins"] {
            #expect(page.contains(".SS \"hoist \(command)\""), "no section for hoist \(command)")
        }
        for option in ["json", "ca\\-bundle", "metrics\\-file", "dry\\-run", "syntax\\-only", "concurrency"] {
            #expect(page.contains("\\fB\\-\\-\(option)\\fR"), "no --\(option)")
        }
        // groff (man-db's renderer) reads it without a warning.
        let directory = try TemporaryDirectory()
        let file = try directory.write("hoist.1", Data(page.utf8)).path
        let groff = try runProcess("/usr/bin/env", ["groff", "-man", "-Tutf8", "-ww", "-z", file])
        #expect(groff.status == 0 && groff.stderr.isEmpty, "\(groff.stderr)")
    }
}
