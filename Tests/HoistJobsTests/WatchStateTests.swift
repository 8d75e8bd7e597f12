import Foundation
import Glibc
@testable import HoistJobs
import HoistTestSupport
import Testing

/// A watcher's state file (`WatchState`) as others read it: what the watcher wrote comes back,
/// and anything else (too large, not JSON, wrong types or ranges, a FIFO, a link) is no state;
/// text in it comes back one printable line.
@Suite struct WatchStateTests {
    @Test func whatTheWatcherWroteReadsBack() throws {
        let folder = try TemporaryDirectory()
        let path = folder.path + "/journal.sqlite.watch"
        var state = WatchState(pid: 4321, since: 1_700_000_000.5)
        state.queue = 3
        state.oldestUnsettled = 1_700_000_100
        state.lastUpload = "/data/a.txt"
        state.lastUploadAt = 1_700_000_050
        state.lastError = "/data/b.txt: forbidden"
        state.lastErrorAt = 1_700_000_060
        state.write(to: path)
        #expect(WatchState.read(path) == state)
        #expect(!FileManager.default.fileExists(atPath: WatchState.temporary(path)))
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(WatchState.path(journal: "postgres://db/hoist") == nil)
    }

    @Test func anythingElseIsNoState() throws {
        let folder = try TemporaryDirectory()
        let path = folder.path + "/state"
        func read(_ text: String) throws -> WatchState? {
            try text.write(toFile: path, atomically: false, encoding: .utf8)
            return WatchState.read(path)
        }
        #expect(try read(#"{"pid":12,"since":5}"#)?.pid == 12)
        #expect(try read("not json") == nil)
        #expect(try read(#"[1,2]"#) == nil)
        #expect(try read(#"{"pid":"12","since":5}"#) == nil)
        #expect(try read(#"{"pid":0,"since":5}"#) == nil)
        #expect(try read(#"{"pid":-3,"since":5}"#) == nil)
        #expect(try read(#"{"pid":1.5,"since":5}"#) == nil)
        #expect(try read(#"{"pid":99999999999,"since":5}"#) == nil)
        #expect(try read(#"{"pid":12,"since":-1}"#) == nil)
        #expect(try read(#"{"pid":12}"#) == nil)
        #expect(try read(#"{"pid":12,"since":5,"queue":-4}"#)?.queue == 0)
        #expect(try read(#"{"pid":12,"since":5,"lastUploadAt":1e300}"#)?.lastUploadAt == nil)
        #expect(try read(#"{"pid":12,"since":5,"pad":"\#(String(repeating: "x", count: 20_000))"}"#) == nil)
        // Text is one printable line, cut.
        let forged = try read(#"{"pid":12,"since":5,"lastError":"a\u001b[2Jb\nwatcher: pid 1 \#(String(repeating: "y", count: 900))"}"#)
        let text = forged?.lastError ?? ""
        #expect(!text.isEmpty && !text.contains("\u{1b}") && !text.contains("\n") && text.count < 600, "\(text)")

        // A FIFO is not opened for reading (it would block), and a link is not followed.
        unlink(path)
        #expect(mkfifo(path, 0o600) == 0)
        #expect(WatchState.read(path) == nil)
        unlink(path)
        let real = folder.path + "/real"
        try #"{"pid":12,"since":5}"#.write(toFile: real, atomically: false, encoding: .utf8)
        #expect(symlink(real, path) == 0)
        #expect(WatchState.read(path) == nil)
    }
}
