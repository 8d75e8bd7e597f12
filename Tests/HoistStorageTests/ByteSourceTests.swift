import Foundation
import Synchronization
import HoistTestSupport
import Testing
@testable import HoistStorage

/// A file source is opened once: its checks are of the file it then reads, whatever happens at
/// its path in between.
@Suite struct ByteSourceTests {
    private static func identity(_ path: String) throws -> (device: UInt64, inode: UInt64) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw POSIXError(.ENOENT) }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    private static func bytes(_ source: ByteSource) throws -> Data {
        let reader = try source.reader(from: 0)
        var all = Data()
        while case let piece = try reader.read(upTo: 3), !piece.isEmpty { all += piece }
        return all
    }

    private static func failure(_ body: () throws -> ByteSource) -> StorageFailure? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? StorageFailure
        }
    }

    /// A job checks the file it is about to read (no link, the inode its walk found) and passes
    /// that inode: a file renamed over the path after the check is not read.
    @Test func aFileSwappedAfterItsCheckIsNotRead() throws {
        let folder = try TemporaryDirectory()
        let path = try folder.write("report.csv", Data("checked".utf8)).path
        let checked = try Self.identity(path)
        let other = try folder.write("other", Data("swapped in".utf8)).path
        #expect(rename(other, path) == 0)
        let refused = Self.failure { try ByteSource(regularFileAt: path, expecting: checked) }
        #expect(refused?.code == .invalidArgument)
        #expect(refused?.message == "\(path) was replaced after it was checked: not read.")
        // The file now at the path, checked anew, is read.
        let source = try ByteSource(regularFileAt: path, expecting: try Self.identity(path))
        #expect(try Self.bytes(source) == Data("swapped in".utf8))
    }

    /// A link, a folder or a FIFO at the path is not a regular file; the FIFO's open does not
    /// wait for a writer (if it does, the test opens the FIFO as one after 5 s, and fails).
    @Test func onlyRegularFilesAreOpened() throws {
        let folder = try TemporaryDirectory()
        let target = try folder.write("target", Data("x".utf8)).path
        let link = folder.path + "/link"
        #expect(symlink(target, link) == 0)
        let fifo = folder.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let sub = folder.path + "/sub"
        #expect(mkdir(sub, 0o700) == 0)
        for path in [link, fifo, sub] {
            let result = Mutex<StorageFailure??>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let failure = Self.failure { try ByteSource(regularFileAt: path) }
                result.withLock { $0 = .some(failure) }
                done.signal()
            }
            if done.wait(timeout: .now() + 5) == .timedOut {
                Issue.record("opening \(path) waited for a writer")
                let writer = open(fifo, O_RDWR)
                done.wait()
                close(writer)
            }
            let refused = result.withLock { $0 } ?? nil
            #expect(refused?.code == .invalidArgument, "\(path)")
            #expect(refused?.message == "\(path) is not a regular file.")
        }
        #expect(Self.failure { try ByteSource(regularFileAt: folder.path + "/missing") }?.code == .objectNotFound)
        // `filePath:` follows the link to its file.
        #expect(try Self.bytes(ByteSource(filePath: link)) == Data("x".utf8))
    }

    /// Once opened, the source reads the file it opened: one renamed over the path or the path
    /// removed changes nothing (those bytes were whole); the file written over in place is a
    /// change.
    @Test func theOpenFileIsWhatIsReadAndChecked() throws {
        let folder = try TemporaryDirectory()
        let path = try folder.write("log", Data("first version".utf8)).path
        let source = try ByteSource(regularFileAt: path)
        let next = try folder.write("next", Data("second version, longer".utf8)).path
        #expect(rename(next, path) == 0)
        #expect(try Self.bytes(source) == Data("first version".utf8))
        #expect(source.changeSinceOpened() == nil)
        #expect(unlink(path) == 0)
        #expect(try Self.bytes(source) == Data("first version".utf8))
        #expect(source.changeSinceOpened() == nil)

        let inPlace = try folder.write("data", Data("0123456789".utf8)).path
        let written = try ByteSource(regularFileAt: inPlace)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: inPlace))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("more".utf8))
        try handle.close()
        #expect(written.changeSinceOpened() == "\(inPlace) changed while it was uploaded: its size went from 10 to 14 bytes")
        // The reader stops at the size the file had when it was opened.
        #expect(try Self.bytes(written) == Data("0123456789".utf8))
    }
}
