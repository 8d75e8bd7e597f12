import Crypto
import Foundation
private import CHoistChecksum

/// CRC32C and MD5 of a byte stream, fed piece by piece as it is read.
struct Checksums {
    private var md5 = Insecure.MD5()
    private(set) var crc32c: UInt32 = 0

    mutating func update(_ data: Data) {
        md5.update(data: data)
        crc32c = data.withUnsafeBytes { hoist_crc32c_update(crc32c, $0.baseAddress, $0.count) }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        md5.update(bufferPointer: bytes)
        crc32c = hoist_crc32c_update(crc32c, bytes.baseAddress, bytes.count)
    }

    /// Base64 of the MD5 digest, as GCS's `md5Hash`.
    func md5Base64() -> String { Data(md5.finalize()).base64EncodedString() }

    /// Base64 of the big-endian CRC32C, as GCS's `crc32c`.
    func crc32cBase64() -> String { Self.base64(crc32c: crc32c) }

    static func base64(crc32c: UInt32) -> String {
        withUnsafeBytes(of: crc32c.bigEndian) { Data($0) }.base64EncodedString()
    }

    /// True when the CPU's CRC32C instruction is in use.
    static var crc32cIsHardwareAccelerated: Bool { hoist_crc32c_hardware() != 0 }
}
