import Foundation
import HoistTestSupport
import Testing

/// `hoist plan --hooks`: what `before_upload` vetoes or moves shows in the plan.
@Suite struct PlanHooksTests {
    /// A plan shows the key a file gets (an s3:// URL's prefix included), and says a move set's
    /// files are removed once uploaded. Planned only: no server is asked.
    @Test func planShowsTheWholeKeyAndWhatAMoveRemoves() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        try fixture.directory.write("out/b.txt", Data("b".utf8))
        _ = try fixture.job("storage: { url: 's3://bucket/backups/daily' }\nfiles: [{ root: src }, { root: out, move: true }]\n")
        let plan = try runProcess(hoist, ["plan", fixture.directory.url.appendingPathComponent("job.yaml").path],
                                  environment: ["HOME": fixture.directory.url.path, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"])
        #expect(plan.status == 0, "\(plan.stderr)")
        let lines = plan.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("upload  a.txt -> backups/daily/a.txt (10 B)"), "\(plan.stdout)")
        #expect(lines.contains("upload  b.txt -> backups/daily/b.txt (1 B) (then removed: move)"), "\(plan.stdout)")
    }

    @Test func planWithHooksShowsVetoesAndMoves() throws {
        let fixture = try JobFixture()
        for name in ["keep.txt", "move.txt", "secret.key", "bad.txt"] { try fixture.file(name) }
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            hooks:
              - inline: |
                  function before_upload(f)
                    if f.relpath:match("%.key$") then return false end
                    if f.relpath == "move.txt" then return { destination = "moved/" .. f.relpath } end
                    if f.relpath == "bad.txt" then return { destination = "../up" } end
                  end

            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let plain = try runProcess(hoist, ["plan", manifest])
        #expect(plain.stdout.contains("upload  secret.key -> secret.key"))
        let hooked = try runProcess(hoist, ["plan", "--hooks", manifest])
        #expect(hooked.status == 0, "\(hooked.stderr)")
        let lines = hooked.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("upload  keep.txt -> keep.txt (10 B)"))
        #expect(lines.contains("upload  move.txt -> moved/move.txt (10 B)"))
        #expect(lines.contains("skip    secret.key (skipped by before_upload)"))
        #expect(lines.contains { $0.hasPrefix("fail    bad.txt (before_upload gave a bad destination") }, "\(lines)")
        #expect(lines.last == "test: 2 to upload (20 B), 1 to skip, 1 failed in before_upload")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.url.appendingPathComponent("bucket").path))
    }
}
