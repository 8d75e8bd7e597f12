import Crypto
import Foundation
import HoistTestSupport
import Testing

/// A 1 GiB `putFile` through the `hoist` command: byte-exact, and in little memory.
@Suite struct LargeFileTests {
    @Test func oneGibibyteUploadStaysUnder64MiB() async throws {
        try await ExclusiveTests.shared.run { try Self.uploadOneGibibyte() }
    }

    static func uploadOneGibibyte() throws {
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("big.bin")
        // Write 1 GiB in 1 MiB blocks, each different, hashing as we go.
        #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
        let handle = try FileHandle(forWritingTo: file)
        var md5 = Insecure.MD5()
        let block = patternData(1 << 20)
        for index in 0..<1024 {
            var piece = block
            piece[0] = UInt8(index & 0xFF)
            piece[1] = UInt8(index >> 8)
            md5.update(data: piece)
            try handle.write(contentsOf: piece)
        }
        try handle.close()
        let expectedMD5 = Data(md5.finalize()).base64EncodedString()

        let bucketDir = directory.url.appendingPathComponent("bucket")
        let run = try runProcess(hoist, ["cp", "--json", "--storage", "file://" + bucketDir.path, file.path, "big/object.bin"])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let summary = try #require(lines.last ?? nil)
        let peak = try #require(summary["peakRSSBytes"] as? Int)
        print("1 GiB putFile: peak RSS \(peak / 1_048_576) MiB, \(summary["seconds"] ?? "?") s")
        #expect(summary["bytes"] as? Int == 1 << 30)
        #expect(peak < 64 << 20)

        // The stored object is the file, byte for byte, and its md5Hash says so.
        let meta = LocalBucketFiles.attribute(of: "big/object.bin", in: bucketDir.path)
        #expect(meta?["md5Hash"] as? String == expectedMD5)
        #expect(meta?["size"] as? String == "1073741824")
        var stored = Insecure.MD5()
        let reader = try FileHandle(forReadingFrom: bucketDir.appendingPathComponent("big/object.bin"))
        while let piece = try reader.read(upToCount: 4 << 20), !piece.isEmpty { stored.update(data: piece) }
        #expect(Data(stored.finalize()).base64EncodedString() == expectedMD5)
    }
}
