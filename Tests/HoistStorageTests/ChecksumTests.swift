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
}
