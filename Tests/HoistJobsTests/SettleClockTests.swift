import Glibc
@testable import HoistJobs
import Testing

/// When `hoist watch` runs a pass (`SettleClock`), on times given, and how it reads the
/// kernel's inotify records (`Inotify.parse`).
@Suite struct SettleClockTests {
    @Test func aPassOfAJobThatWalksEverythingIsDueOnceEveryTouchedPathHasBeenQuietForSettle() {
        var clock = SettleClock(settle: 2, maxWait: 60, eachFile: false)
        #expect(clock.due() == nil)   // nothing waits: block without a timeout
        clock.touch("/a", at: 10)
        clock.touch("/b", at: 11)
        #expect(clock.due() == 13)
        #expect(!clock.isDue(at: 12.9))
        clock.touch("/a", at: 12)   // written again: the quiet starts over
        #expect(clock.due() == 14)
        #expect(clock.isDue(at: 14))
        #expect(clock.startPass(at: 14) == .init(whole: false, paths: ["/a", "/b"]))
        #expect(clock.due() == nil)
        #expect(clock.isIdle)
    }

    @Test func eachFileSettlesOnItsOwnNotHeldBackByOneThatKeepsChanging() {
        var clock = SettleClock(settle: 2, maxWait: 60, eachFile: true)
        clock.touch("/photo.jpg", at: 10)
        for tick in stride(from: 10.0, through: 20, by: 0.2) { clock.touch("/app.log", at: tick) }
        // The photo was due at 12, though the log never went quiet.
        #expect(clock.due() == 12)
        #expect(clock.startPass(at: 20) == .init(whole: false, paths: ["/photo.jpg"]))
        #expect(clock.pending.keys.sorted() == ["/app.log"])
        #expect(clock.due() == 22)   // the log, once it is quiet
        #expect(!clock.isIdle)
    }

    @Test func aPathThatKeepsChangingIsPassedAtMaxWait() {
        for eachFile in [false, true] {
            var clock = SettleClock(settle: 1, maxWait: 5, eachFile: eachFile)
            for tick in stride(from: 0.0, through: 10, by: 0.5) { clock.touch("/log", at: 100 + tick) }
            #expect(clock.due() == 105)
            #expect(clock.isDue(at: 110))
            #expect(clock.startPass(at: 110).paths == ["/log"])
            clock.touch("/log", at: 110.5)   // and again when it settles
            #expect(clock.due() == 111.5)
        }
    }

    @Test func anOwedFullPassIsDueAtOnceWhenNothingWaits() {
        for eachFile in [false, true] {
            var clock = SettleClock(settle: 2, maxWait: 60, eachFile: eachFile)
            clock.owePass()
            #expect(clock.isDue(at: 0))
            clock.touch("/a", at: 5)   // something waiting to settle: the full pass waits for it
            #expect(!clock.isDue(at: 6))
            #expect(clock.isDue(at: 7))
            #expect(clock.startPass(at: 7) == .init(whole: true, paths: ["/a"]))
            #expect(clock.isIdle)
        }
    }

    @Test func anOwedFullPassWaitsForAFileStillChangingWhileSettledOnesPassAlone() {
        var clock = SettleClock(settle: 2, maxWait: 30, eachFile: true)
        clock.owePass()
        clock.touch("/photo.jpg", at: 10)
        for tick in stride(from: 10.0, through: 20, by: 0.5) { clock.touch("/app.log", at: tick) }
        // The whole pass would read the log half-written: the photo passes alone.
        #expect(clock.startPass(at: 20) == .init(whole: false, paths: ["/photo.jpg"]))
        #expect(clock.fullPassOwed)
        #expect(clock.due() == 22)
        // Once the log has waited maxWait, the whole pass takes it and what else waits.
        for tick in stride(from: 20.5, through: 39.5, by: 0.5) { clock.touch("/app.log", at: tick) }
        clock.touch("/b", at: 39)
        #expect(clock.due() == 40)
        #expect(clock.startPass(at: 40) == .init(whole: true, paths: ["/app.log", "/b"]))
        #expect(clock.isIdle)
    }

    @Test func inotifyRecordsAreReadWithTheirPaddedNames() {
        func record(_ watch: Int32, _ mask: UInt32, _ cookie: UInt32, _ name: String, padTo length: Int) -> [UInt8] {
            func word(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
            let padded = Array(name.utf8) + Array(repeating: 0, count: length - name.utf8.count)
            return word(UInt32(bitPattern: watch)) + word(mask) + word(cookie) + word(UInt32(length)) + padded
        }
        let bytes = record(1, UInt32(IN_CLOSE_WRITE), 0, "a.jpg", padTo: 16) + record(2, UInt32(IN_MOVED_TO | IN_ISDIR), 7, "new", padTo: 16)
            + record(-1, UInt32(IN_Q_OVERFLOW), 0, "", padTo: 0) + [1, 2, 3]   // a torn record at the end is left
        let events = Inotify.parse(bytes[...])
        #expect(events == [
            Inotify.Event(watch: 1, mask: UInt32(IN_CLOSE_WRITE), cookie: 0, name: "a.jpg"),
            Inotify.Event(watch: 2, mask: UInt32(IN_MOVED_TO | IN_ISDIR), cookie: 7, name: "new"),
            Inotify.Event(watch: -1, mask: UInt32(IN_Q_OVERFLOW), cookie: 0, name: ""),
        ])
        #expect(events[1].isFolder && events[2].overflowed)
    }

    @Test func renamesKeepTheNameAFileWasStoredUnderUntilAPassTakesThem() {
        var renames = Renames()
        var batch = FolderWatch.Batch()
        // a -> b -> c before any pass: c's object, if any, is a's.
        batch.renames = [("/r/a", "/r/b"), ("/r/b", "/r/c"), ("/r/x", "/r/y"), ("/r/p", "/r/q"), ("/r/q", "/r/p")]
        renames.note(batch)
        #expect(renames.origins == ["/r/c": "/r/a", "/r/y": "/r/x"])
        // A renamed file deleted since has nothing to copy to.
        renames.note(FolderWatch.Batch(removed: ["/r/y"]))
        #expect(renames.take(["/r/c", "/r/other"], whole: false) == ["/r/c": "/r/a"])
        #expect(renames.origins.isEmpty)
        renames.note(FolderWatch.Batch(renames: [("/r/m", "/r/n")]))
        #expect(renames.take([], whole: true) == ["/r/n": "/r/m"])
        #expect(renames.origins.isEmpty)
    }

    @Test func aMirrorsWindowDeletesOnceItEndsAndOnlyAfterItsUploadsSucceeded() {
        var window = MirrorWindow(length: 60, applies: true)
        var summary = JobSummary(job: "t")
        #expect(window.turn() == .later && window.end == nil)
        window.open(at: 10)
        window.open(at: 30)   // one window: the first removal opens it
        #expect(window.end == 70)
        #expect(!window.close(at: 69) && window.turn() == .later)
        window.passEnded(summary, turn: .later, at: 40)
        #expect(window.close(at: 70) && window.end == nil)
        window.open(at: 71)   // ended, its pass to come: no new window yet
        #expect(window.turn() == .now && window.turn() == .later)
        window.passEnded(summary, turn: .now, at: 72)
        #expect(window.end == nil)
        // A pass of the window failed: its end deletes nothing, and another window opens.
        window.open(at: 100)
        summary.failed = 1
        window.passEnded(summary, turn: .later, at: 101)
        #expect(window.close(at: 160) && window.turn() == .withheld)
        window.passEnded(JobSummary(job: "t"), turn: .withheld, at: 161)
        #expect(window.end == 221)
        #expect(window.close(at: 221) && window.turn() == .now)
        // A job that mirrors nothing has no window: every pass's turn is its own.
        var none = MirrorWindow(length: 60, applies: false)
        none.open(at: 0)
        #expect(none.end == nil && none.turn() == .now)
    }
}
