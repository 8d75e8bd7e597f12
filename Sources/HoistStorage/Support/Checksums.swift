import Crypto
import Foundation
private import CHoistChecksum

/// CRC32C and MD5 of a byte stream, fed piece by piece as it is read.
struct Checksums {
    private var md5 = Insecure.MD5()
    private var crc = CRC32C()
    var crc32c: UInt32 { crc.value }

    /// CRC32C alone (what an upload's verification compares), on the CPU's `crc32` instruction
    /// when it has one.
    struct CRC32C {
        private(set) var value: UInt32

        /// A CRC32C going on from `value` (0 to start).
        init(value: UInt32 = 0) { self.value = value }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            value = hoist_crc32c_update(value, bytes.baseAddress, bytes.count)
        }

        /// Base64 of the big-endian CRC32C, as GCS's `crc32c`.
        func base64() -> String { Checksums.base64(crc32c: value) }
    }

    mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        md5.update(bufferPointer: bytes)
        crc.update(bytes)
    }

    /// Base64 of the MD5 digest, as GCS's `md5Hash`.
    func md5Base64() -> String { Data(md5.finalize()).base64EncodedString() }

    /// The MD5 digest's 16 bytes (S3's `Content-MD5` and ETags).
    func md5Digest() -> [UInt8] { Array(md5.finalize()) }

    /// Base64 of the big-endian CRC32C, as GCS's `crc32c`.
    func crc32cBase64() -> String { crc.base64() }

    static func base64(crc32c: UInt32) -> String {
        withUnsafeBytes(of: crc32c.bigEndian) { Data($0) }.base64EncodedString()
    }

    /// `crc` extended over `bytes` by the table alone, whatever the CPU: what the hardware path
    /// is checked against (`ChecksumTests.hardwareAndTableAgree`).
    static func crc32cByTable(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        hoist_crc32c_update_software(crc, bytes.baseAddress, bytes.count)
    }

    /// The CRC32C of A followed by B, from A's, B's and B's length (zlib's `crc32_combine`, for
    /// Castagnoli): a parallel upload's whole object from its parts' checksums, no byte read again.
    static func crc32cCombine(_ first: UInt32, _ second: UInt32, secondLength: Int64) -> UInt32 {
        hoist_crc32c_combine(first, second, UInt64(max(0, secondLength)))
    }

    /// True when the CPU's CRC32C instruction is in use.
    static var crc32cIsHardwareAccelerated: Bool { hoist_crc32c_hardware() != 0 }
}
