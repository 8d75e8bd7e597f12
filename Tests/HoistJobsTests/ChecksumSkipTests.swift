import Foundation
@testable import HoistJobs
@testable import HoistStorage
import HoistTestSupport
import Testing

/// `upload.skipUnchanged: checksum` (rclone's `--checksum`): "unchanged" is the file's content,
/// not its mtime; each hash is kept in the journal under the file's inode, size, mtime and ctime,
/// so a run reads only files whose status changed (counted by `ByteSource.contentReads`).
@Suite(.serialized) struct ChecksumSkipTests {
    private var reads: Int { ByteSource.contentReads.load(ordering: .relaxed) }

    private func touch(_ url: URL, by seconds: Double) throws {
        let modified = try #require(try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date)
        try FileManager.default.setAttributes([.modificationDate: modified.addingTimeInterval(seconds)], ofItemAtPath: url.path)
    }

    /// The status a hash is kept under is the four numbers as decimal text, as journals
    /// written before hold them: extremes, zero and times before 1970 included.
    @Test func theStatusKeyIsTheFourNumbersInDecimal() {
        for (inode, size, mtime, ctime) in [(UInt64(0), Int64(0), Int64(0), Int64(0)), (UInt64.max, Int64.max, Int64.min, Int64(-1)),
                                            (UInt64(1_234_567), Int64(4096), Int64(1_700_000_000_123_456_789), Int64(-86_400_000_000_007))] {
            var file = WalkedFile(path: "/a", relativePath: "a", size: size, modified: Date())
            file.inode = inode
            file.modifiedNanoseconds = mtime
            file.changedNanoseconds = ctime
            #expect(file.statusKey == "\(inode):\(size):\(mtime):\(ctime)")
        }
    }

    @Test func aTouchedFileIsNotSentAndAStatusUnchangedIsNotRead() async throws {
        let fixture = try JobFixture()
        var files: [URL] = []
        for index in 0..<5 { files.append(try fixture.file("f\(index).txt", 1000 + index)) }
        let log = try fixture.directory.write("src/app.log", logText(100_000))
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src, compress: { include: "*.log" } }]
            upload: { skipUnchanged: checksum }
            """)
        let first = try await fixture.run(job)
        #expect(first.uploaded == 6)

        // Nothing changed: nothing sent, no file read.
        var before = reads
        let second = try await fixture.run(job)
        #expect(second.uploaded == 0 && second.unchanged == 6)
        #expect(reads - before == 0, "a run with nothing changed read \(reads - before) files")

        // Two files and the compressed log touched (new mtimes, same content): read, not sent.
        try touch(files[1], by: 60)
        try touch(files[3], by: -60)
        try touch(log, by: 30)
        before = reads
        let third = try await fixture.run(job)
        #expect(third.uploaded == 0 && third.unchanged == 6)
        #expect(reads - before == 3)

        // Their hashes were kept under their new status: the next run reads nothing.
        before = reads
        let fourth = try await fixture.run(job)
        #expect(fourth.uploaded == 0 && fourth.unchanged == 6)
        #expect(reads - before == 0)

        // Content changed: sent.
        try Data(repeating: 65, count: 1001).write(to: files[1])
        let fifth = try await fixture.run(job)
        #expect(fifth.uploaded == 1)
        #expect(try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/f1.txt")) == Data(repeating: 65, count: 1001))
    }

    /// Another content of the same size, its mtime set back as it was: only checksum mode sees it
    /// (the ctime changed, which no user can set back, so the kept hash is not trusted).
    @Test(arguments: ["true", "checksum"])
    func sameSizeAndMtimeButOtherContent(mode: String) async throws {
        let fixture = try JobFixture()
        let modified = Date(timeIntervalSince1970: 1_700_000_000)
        let file = try fixture.file("a.bin", 4000, modified: modified)
        let job = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\nupload: { skipUnchanged: \(mode) }\n")
        #expect(try await fixture.run(job).uploaded == 1)
        let other = patternData(4000, seed: 99)
        try other.write(to: file)
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: file.path)
        let second = try await fixture.run(job)
        let stored = try Data(contentsOf: fixture.directory.url.appendingPathComponent("bucket/a.bin"))
        if mode == "checksum" {
            #expect(second.uploaded == 1)
            #expect(stored == other)
        } else {
            #expect(second.uploaded == 0 && second.unchanged == 1)
            #expect(stored == patternData(4000))
        }
    }
}
