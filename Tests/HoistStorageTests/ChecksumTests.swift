import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

@Suite struct ChecksumTests {
    @Test func crc32cKnownAnswers() {
        var sums = Checksums()
        sums.update(Data("123456789".utf8))
        #expect(sums.crc32c == 0xE306_9283)
        // GCS's own example: the CRC32C of "hello world" is yZRlqg== in its JSON.
        var hello = Checksums()
        hello.update(Data("hello world".utf8))
        #expect(hello.crc32cBase64() == "yZRlqg==")
        #expect(hello.md5Base64() == "XrY7u+Ae7tCTyyK7j1rNww==")
    }

    /// The CRC32C instruction runs over three blocks at once (8 KiB, then 256 bytes), their CRCs
    /// combined after: at every length around those blocks' edges, from any alignment, from any
    /// starting CRC, it gives what the byte table gives.
    @Test func hardwareAndTableAgree() {
        #expect(Checksums.crc32cIsHardwareAccelerated == true)
        var generator = SystemRandomNumberGenerator()
        let data = (0..<(3 * 8192 * 3 + 64)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var lengths = Array(0...64)
        for block in [256, 8192] {
            for multiple in 1...3 { lengths += (3 * block * multiple - 9...3 * block * multiple + 9).map { $0 } }
        }
        lengths += [3 * 8192 + 3 * 256 + 7, 2 * 3 * 8192 + 2 * 3 * 256 + 15, data.count - 64]
        data.withUnsafeBytes { bytes in
            for length in lengths {
                for offset in [0, 1, 3, 8, 13] {
                    let piece = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
                    let seed = UInt32.random(in: 0...UInt32.max, using: &generator)
                    var sum = Checksums.CRC32C()
                    sum.update(piece)
                    #expect(sum.value == Checksums.crc32cByTable(0, piece), "length \(length), offset \(offset)")
                    var seeded = Checksums.CRC32C(value: seed)
                    seeded.update(piece)
                    #expect(seeded.value == Checksums.crc32cByTable(seed, piece), "length \(length), offset \(offset)")
                }
            }
        }
    }

    @Test func piecewiseEqualsWhole() {
        let data = patternData(1_000_003)
        var whole = Checksums()
        whole.update(data)
        var pieces = Checksums()
        var start = 0
        for size in [1, 7, 4096, 65_537, 500_000] {
            pieces.update(data[start..<start + size])
            start += size
        }
        pieces.update(data[start...])
        #expect(pieces.crc32c == whole.crc32c)
        #expect(pieces.md5Base64() == whole.md5Base64())
        #expect(whole.md5Base64() == md5Base64(data))
    }

    /// Fed as the curl engine feeds it (pieces, resends below the frontier, a resend that starts
    /// below and ends beyond it), a frontier's CRC32C equals the whole object's.
    @Test func frontierCountsEachByteOnce() {
        let data = patternData(9 << 20 + 12_345)
        var whole = Checksums()
        whole.update(data)
        let frontier = ChecksumFrontier()
        data.withUnsafeBytes { bytes in
            var position = 0
            var step = 0
            while position < bytes.count {
                let size = min([4096, 16_384, 524_288, 1_000_003][step % 4], bytes.count - position)
                frontier.add(UnsafeRawBufferPointer(rebasing: bytes[position..<position + size]), at: Int64(position))
                if step % 5 == 4 {
                    // A resend from earlier (a connection reset): counted once.
                    let back = max(0, position - 700_000)
                    frontier.add(UnsafeRawBufferPointer(rebasing: bytes[back..<position + size]), at: Int64(back))
                }
                position += size
                step += 1
            }
        }
        #expect(frontier.frontier == Int64(data.count))
        #expect(frontier.crc32c == whole.crc32cBase64())
        #expect(frontier.crc32c == crc32cBase64(data))
    }

    /// A frontier that catches up from a file (a resumed session).
    @Test func frontierCatchesUpFromAFile() throws {
        let directory = try TemporaryDirectory()
        let data = patternData(3 << 20 + 7)
        let file = try directory.write("big.bin", data)
        let frontier = ChecksumFrontier()
        data.withUnsafeBytes { frontier.add(UnsafeRawBufferPointer(rebasing: $0[0..<50_000]), at: 0) }
        try frontier.catchUp(to: Int64(data.count), from: ByteSource(filePath: file.path))
        #expect(frontier.crc32c == crc32cBase64(data))
    }

    @Test func randomIDsAreVersion4AndDistinct() {
        var seen = Set<UUID>()
        for _ in 0..<1000 {   // several 4 KiB refills of the pool
            let id = RandomID.uuid()
            let text = id.uuidString
            #expect(Array(text)[14] == "4")
            #expect("89AB".contains(Array(text)[19]))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    /// The lowercase form (download tokens, boundaries) is the UUID's own text, lowercased.
    @Test func lowercasedRandomIDsAreUUIDText() throws {
        var seen = Set<String>()
        for _ in 0..<300 {
            let text = RandomID.lowercased()
            let id = try #require(UUID(uuidString: text), "\(text)")
            #expect(id.uuidString.lowercased() == text)
            #expect(Array(text)[14] == "4")
            seen.insert(text)
        }
        #expect(seen.count == 300)
    }
}
