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

    /// `ByteSource.openWalked` as the runner calls it: beneath the root folder `root` (openat2),
    /// or, without `beneath`, by path with the walked inode and the kernel-path check (a file
    /// root, or no openat2).
    private static func walked(_ path: String, root: String, beneath: Bool, _ identity: (device: UInt64, inode: UInt64),
                               followingLinks: Bool = false, folder: RootFolder? = nil) throws -> ByteSource.Walked {
        let relative = String(path.dropFirst(root.count + 1))
        let held: RootFolder? = beneath ? folder ?? RootFolder(root) : nil
        #expect(held != nil || !beneath, "the root folder \(root) did not open")
        return try ByteSource.openWalked(path, relativePath: relative, beneath: held, device: identity.device, inode: identity.inode,
                                         followingLinks: followingLinks) { ByteSource.realPath(root) + "/" + relative }
    }

    /// A job opens the file its walk found (device and inode): that file is read. A file renamed
    /// over it since is another file in the same place: read too, and said to be the one read.
    @Test(arguments: [true, false]) func aJobReadsTheWalkedFileOrAnotherInItsPlace(beneath: Bool) throws {
        let folder = try TemporaryDirectory()
        let path = try folder.write("report.csv", Data("walked".utf8)).path
        let walkedIdentity = try Self.identity(path)
        guard case .opened(let source, _) = try Self.walked(path, root: folder.path, beneath: beneath, walkedIdentity) else {
            Issue.record("not opened"); return
        }
        #expect(try Self.bytes(source) == Data("walked".utf8))
        let other = try folder.write("other", Data("saved anew".utf8)).path
        #expect(rename(other, path) == 0)
        guard case .opened(let again, let info) = try Self.walked(path, root: folder.path, beneath: beneath, walkedIdentity) else {
            Issue.record("not opened"); return
        }
        #expect(try Self.bytes(again) == Data("saved anew".utf8))
        #expect((UInt64(info.st_dev), UInt64(info.st_ino)) == (try Self.identity(path)))
        // The first source still reads the file it opened.
        #expect(try Self.bytes(source) == Data("walked".utf8))
        #expect(unlink(path) == 0)
        guard case .missing = try Self.walked(path, root: folder.path, beneath: beneath, walkedIdentity) else { Issue.record("not missing"); return }
    }

    /// A folder above the walked file swapped for a link to another folder with a file of the
    /// same name, or the file swapped for a link: the path leads elsewhere, and nothing is read.
    /// (Beneath the root no link is followed; by path, the place is checked on what was located,
    /// not by resolving the path a second time.)
    @Test(arguments: [true, false]) func aLinkSwappedInOnTheWayLeadsElsewhere(beneath: Bool) throws {
        let folder = try TemporaryDirectory()
        #expect(mkdir(folder.path + "/d", 0o700) == 0 && mkdir(folder.path + "/secret", 0o700) == 0)
        let path = try folder.write("d/f.txt", Data("mine".utf8)).path
        _ = try folder.write("secret/f.txt", Data("not yours".utf8))
        let walkedIdentity = try Self.identity(path)
        #expect(rename(folder.path + "/d", folder.path + "/d-old") == 0)
        #expect(symlink("secret", folder.path + "/d") == 0)   // (relative: it stays beneath the root)
        guard case .elsewhere = try Self.walked(path, root: folder.path, beneath: beneath, walkedIdentity) else {
            Issue.record("read through the link"); return
        }
        // Following links (a file set that asks for it), the path may lead there.
        guard case .opened(let followed, _) = try Self.walked(path, root: folder.path, beneath: beneath, walkedIdentity, followingLinks: true) else {
            Issue.record("not opened"); return
        }
        #expect(try Self.bytes(followed) == Data("not yours".utf8))
        // The file itself swapped for a link to a file.
        #expect(unlink(folder.path + "/d") == 0 && rename(folder.path + "/d-old", folder.path + "/d") == 0)
        #expect(unlink(path) == 0 && symlink(folder.path + "/secret/f.txt", path) == 0)
        guard case .elsewhere = try Self.walked(path, root: folder.path, beneath: beneath, walkedIdentity) else {
            Issue.record("read through the link"); return
        }
    }

    /// The root folder is held from before the walk: moving it away and putting a link (or
    /// another folder) at its path does not lead a file's open there; the file is read from the
    /// root the walk went through.
    @Test func aMovedRootIsNotFollowed() throws {
        let folder = try TemporaryDirectory()
        #expect(mkdir(folder.path + "/outbox", 0o700) == 0 && mkdir(folder.path + "/etc", 0o700) == 0)
        let root = folder.path + "/outbox"
        let path = try folder.write("outbox/shadow", Data("mine".utf8)).path
        _ = try folder.write("etc/shadow", Data("root's".utf8))
        let walkedIdentity = try Self.identity(path)
        let held = try #require(RootFolder(root))
        #expect(rename(root, folder.path + "/outbox-moved") == 0)
        #expect(symlink(folder.path + "/etc", root) == 0)
        guard case .opened(let source, _) = try Self.walked(path, root: root, beneath: true, walkedIdentity, folder: held) else {
            Issue.record("not opened"); return
        }
        #expect(try Self.bytes(source) == Data("mine".utf8))
        // A file that is only in what took the root's place is not there beneath the held root.
        _ = try folder.write("etc/passwd", Data("root's".utf8))
        guard case .missing = try Self.walked(root + "/passwd", root: root, beneath: true, walkedIdentity, folder: held) else {
            Issue.record("read from the new root"); return
        }
    }

    /// A link, a folder or a FIFO at the path is not a regular file, and is never opened: the
    /// path is located (`O_PATH`), then checked, and only a regular file is opened for reading.
    /// A FIFO opened for reading would wait for a writer (if it does, the test opens the FIFO
    /// as one after 5 s, and fails); a device opened would be told so by its driver.
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

        // Written over in place with its size kept and its mtime put back (`touch -d`): the
        // ctime moved on, which no one can put back.
        let same = try folder.write("same", Data("0123456789".utf8)).path
        let mtime = try #require(try FileManager.default.attributesOfItem(atPath: same)[.modificationDate] as? Date)
        let sameSource = try ByteSource(regularFileAt: same)
        usleep(20_000)
        try Data("ABCDEFGHIJ".utf8).write(to: URL(fileURLWithPath: same))
        try FileManager.default.setAttributes([.modificationDate: mtime], ofItemAtPath: same)
        #expect(sameSource.changeSinceOpened() == "\(same) changed while it was uploaded: it was modified")
    }
}
