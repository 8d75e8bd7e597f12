import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// `compress: gzip`'s bytes: a standard gzip stream (`gzip -dc` gives the file back), the same
/// bytes every time (a resumed upload continues from the server's offset by compressing again),
/// in memory only when small, and a file changed while it was read is still caught.
@Suite struct GzipTests {
    static func logText(_ size: Int) -> Data { HoistTestSupport.logText(size) }

    static func bytes(_ source: ByteSource) throws -> Data {
        let reader = try source.reader(from: 0)
        var all = Data()
        while case let piece = try reader.read(upTo: 1 << 20), !piece.isEmpty { all += piece }
        return all
    }

    static func gunzip(_ data: Data, in directory: TemporaryDirectory) throws -> Data { try HoistTestSupport.gunzip(data) }

    @Test(arguments: [0, 1, 100_000, 3 << 20])
    func theStreamGunzipsToTheFileAndIsTheSameEachTime(size: Int) throws {
        let directory = try TemporaryDirectory()
        let text = Self.logText(size)
        let file = try directory.write("app.log", text)
        let first = try ByteSource(filePath: file.path).gzipped(level: 6, temporaryFolder: directory.path)
        let second = try ByteSource(filePath: file.path).gzipped(level: 6, temporaryFolder: directory.path)
        let bytes = try Self.bytes(first.source)
        #expect(try Self.gunzip(bytes, in: directory) == text)
        #expect(try Self.bytes(second.source) == bytes, "compressing the same file twice gave other bytes")
        #expect(first.source.size == Int64(bytes.count))
        // The header: gzip magic, deflate, no flags (no name, no comment), mtime 0, OS 255.
        #expect(Array(bytes.prefix(4)) == [0x1f, 0x8b, 8, 0])
        #expect(Array(bytes[4..<8]) == [0, 0, 0, 0])
        #expect(bytes[9] == 255)
        // The CRC32C of the content, as a file read whole gives it.
        var sums = Checksums()
        sums.update(text)
        #expect(first.contentCRC32C == sums.crc32cBase64())
        if size > 100_000 { #expect(bytes.count * 4 < size, "log text should compress well: \(bytes.count) of \(size)") }
    }

    /// A large file is compressed into an unnamed temporary file, not memory; nothing is left
    /// in the temporary folder, and the copy is read with `pread` like any file.
    @Test func aLargeFileIsCompressedIntoAnUnnamedFile() throws {
        let directory = try TemporaryDirectory()
        let scratch = try TemporaryDirectory()
        let file = try directory.write("big.log", Self.logText(5 << 20))
        let gzipped = try ByteSource(filePath: file.path).gzipped(level: 1, temporaryFolder: scratch.path)
        #expect(gzipped.source.memoryData == nil)
        #expect(gzipped.source.openFile != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
        #expect(try Self.gunzip(try Self.bytes(gzipped.source), in: directory) == Self.logText(5 << 20))
        // Messages name the file, not the copy.
        #expect(gzipped.source.filePath == file.path)
    }

    /// Whether the file changed is asked of the file, not of its compressed copy.
    @Test func aFileChangedAfterItWasCompressedIsCaught() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("app.log", Self.logText(2 << 20))
        let gzipped = try ByteSource(filePath: file.path).gzipped(level: 6, temporaryFolder: directory.path)
        #expect(gzipped.source.unchangedOrWhy() == nil)
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("one more line\n".utf8))
        try handle.close()
        #expect(gzipped.source.unchangedOrWhy()?.contains("changed while it was uploaded") == true)
    }

    @Test func levelsOutsideOneToNineAreRefused() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("a.txt", Data("a".utf8))
        #expect(throws: StorageFailure.self) { try ByteSource(filePath: file.path).gzipped(level: 0, temporaryFolder: directory.path) }
        #expect(throws: StorageFailure.self) { try ByteSource(filePath: file.path).gzipped(level: 10, temporaryFolder: directory.path) }
    }
}
