import Foundation
import HoistTestSupport
import Testing

/// `hoist watch` and `mirror`: what went is deleted once per `watch.window`, through
/// the removal gate, `upload.maxDelete` counted over the window, and only once every upload of
/// the window succeeded. On real inotify and the local bucket, windows of seconds.
extension WatchTests {
    static let mirrored = "[{ root: src, mirror: true, destination: 'in/{relpath}' }]"

    /// The position in `output` of the first `--json` event of `kind` whose `key` is `value`.
    func position(in output: String, _ kind: String, _ key: String, _ value: String) -> Int? {
        output.split(separator: "\n").firstIndex { line in
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
            return event["event"] as? String == kind && event[key] as? String == value
        }
    }

    /// Three files deleted within one window, each settling in a pass of its own: the window's
    /// three deletions are over `maxDelete: 2`, so none happens, and the refusal is said.
    @Test func deletionsOfOneWindowOverMaxDeleteAreRefusedAndSaid() throws {
        let fixture = try JobFixture()
        for index in 0..<6 { try fixture.file("f\(index).txt", 100 + index) }
        let watcher = try startWatcher(fixture, settle: "200ms", window: "3s", files: Self.mirrored, extra: "upload: { maxDelete: 2 }",
                                       readyAs: "in/ready.txt")
        #expect(waitFor(seconds: 10) { (0..<6).allSatisfy { stored(fixture, "in/f\($0).txt") != nil } })
        for index in 0..<3 {
            try FileManager.default.removeItem(at: source(fixture, "f\(index).txt"))
            usleep(600_000)
        }
        // Past the window's end (3 s after the first deletion) and its pass.
        usleep(3_500_000)
        let output = stop(watcher)
        for index in 0..<6 { #expect(stored(fixture, "in/f\(index).txt") == patternData(100 + index), "\(output.suffix(1500))") }
        #expect(events(in: output, "delete").isEmpty, "\(output.suffix(1500))")
        let refused = events(in: output, "job_end").filter { $0["deleteRefused"] as? Int ?? 0 > 0 }
        #expect(refused.count == 1 && refused.first?["deleteRefused"] as? Int == 3, "\(output.suffix(1500))")
        let refusal = refused.first?["deleteRefusal"] as? String
        #expect(refusal?.contains("mirror would delete 3 of 7 objects, more than upload.maxDelete") == true, "\(refused)")
    }

    /// A file deleted while another of the same window fails: nothing is deleted at the
    /// window's end (said), and once a window's uploads all succeed its deletions happen, after
    /// the window's uploads.
    @Test func aWindowsDeletionsWaitForItsUploadsToSucceed() throws {
        let fixture = try JobFixture()
        for index in 0..<4 { try fixture.file("f\(index).txt", 100 + index) }
        try fixture.file("gone.txt", 50)
        let watcher = try startWatcher(fixture, settle: "200ms", window: "2s", files: Self.mirrored, extra: """
            hooks:
              - inline: |
                  function before_upload(file) if file.relpath == "bad.txt" then error("refused by the test") end end
            """, readyAs: "in/ready.txt")
        #expect(waitFor(seconds: 10) { stored(fixture, "in/gone.txt") != nil })
        try FileManager.default.removeItem(at: source(fixture, "gone.txt"))
        usleep(400_000)
        try patternData(300, seed: 1).write(to: source(fixture, "new.txt"))
        try patternData(300, seed: 2).write(to: source(fixture, "bad.txt"))
        // Past the window's end (2 s after the deletion): its pass deletes nothing, as bad.txt failed.
        #expect(waitFor(seconds: 10) { stored(fixture, "in/new.txt") != nil })
        usleep(2_500_000)
        let kept = stored(fixture, "in/gone.txt") != nil
        // bad.txt goes: the next window's uploads all succeed, and its end deletes gone.txt's object.
        try FileManager.default.removeItem(at: source(fixture, "bad.txt"))
        let deleted = waitFor(seconds: 15) { stored(fixture, "in/gone.txt") == nil }
        let output = stop(watcher)
        #expect(kept, "deleted in the window of a failed upload: \(output.suffix(1500))")
        #expect(deleted, "\(output.suffix(1500))")
        #expect(output.contains("mirror: nothing deleted, as not every upload of the watch window succeeded"), "\(output.suffix(1500))")
        let success = position(in: output, "success", "object", "in/new.txt")
        let deletion = position(in: output, "delete", "object", "in/gone.txt")
        #expect(success != nil && deletion != nil && success! < deletion!, "\(output.suffix(1500))")
        #expect(events(in: output, "delete").filter { $0["object"] as? String == "in/gone.txt" }.first?["outcome"] as? String == "deleted")
    }
}
