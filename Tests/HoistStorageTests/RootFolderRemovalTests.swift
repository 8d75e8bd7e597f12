import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// `move`'s unlink (`RootFolder.remove`): only the file that was read, found beneath
/// the root with no link followed; never a file behind a link swapped in, never the root.
@Suite struct RootFolderRemovalTests {
    func identity(_ path: String) throws -> RootFolder.Identity {
        var info = stat()
        #expect(lstat(path, &info) == 0)
        return RootFolder.Identity(info)
    }

    /// A file written in place and its mtime put back (`touch -d`, `rsync -t`, a tar extracted
    /// over it) has the size and mtime it was read with, but not the ctime: kept.
    @Test func aFileRewrittenWithItsMtimePutBackIsKept() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("root/a.log", patternData(100)).path
        let root = try #require(RootFolder(directory.url.appendingPathComponent("root").path))
        let read = try identity(file)
        let mtime = try #require(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date)
        usleep(20_000)
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: file))
        try FileManager.default.setAttributes([.modificationDate: mtime], ofItemAtPath: file)
        let now = try identity(file)
        #expect(now.size == read.size && abs(now.mtime - read.mtime) < 0.001 && now.inode == read.inode, "the same size, mtime and inode")
        #expect(root.remove("a.log", ifStill: read) == .changed)
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Data(repeating: 7, count: 100))
    }

    @Test func onlyTheFileThatWasReadIsRemoved() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("root/logs/a.log", patternData(100)).path
        let root = try #require(RootFolder(directory.url.appendingPathComponent("root").path))
        let read = try identity(file)
        // Appended to since: kept.
        try directory.write("root/logs/a.log", patternData(120))
        #expect(root.remove("logs/a.log", ifStill: read) == .changed)
        #expect(FileManager.default.fileExists(atPath: file))
        #expect(root.remove("logs/a.log", ifStill: try identity(file)) == .removed)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(root.remove("logs/a.log", ifStill: read) == .gone)
        #expect(root.removeEmptyFolder("logs"))
        #expect(!root.removeEmptyFolder(""), "never the root")
        #expect(FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("root").path))
    }

    @Test func aLinkSwappedInIsNeverFollowed() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("root/logs/a.log", patternData(100)).path
        let elsewhere = try directory.write("elsewhere/a.log", patternData(100)).path
        let root = try #require(RootFolder(directory.url.appendingPathComponent("root").path))
        let read = try identity(file)
        // The folder swapped for a link to another folder holding a file of that name.
        try FileManager.default.removeItem(atPath: directory.url.appendingPathComponent("root/logs").path)
        try FileManager.default.createSymbolicLink(atPath: directory.url.appendingPathComponent("root/logs").path,
                                                   withDestinationPath: directory.url.appendingPathComponent("elsewhere").path)
        #expect(root.remove("logs/a.log", ifStill: read) == .gone)
        #expect(root.remove("logs/a.log", ifStill: try identity(elsewhere)) == .gone)
        #expect(FileManager.default.fileExists(atPath: elsewhere))
        // The file itself swapped for a link: the link is not the file read.
        let top = try directory.write("root/b.log", patternData(10)).path
        let topRead = try identity(top)
        try FileManager.default.removeItem(atPath: top)
        try FileManager.default.createSymbolicLink(atPath: top, withDestinationPath: elsewhere)
        #expect(root.remove("b.log", ifStill: topRead) == .changed)
        #expect(root.remove("../elsewhere/a.log", ifStill: try identity(elsewhere)) == .gone)
        #expect(FileManager.default.fileExists(atPath: elsewhere))
    }
}
