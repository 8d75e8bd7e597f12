import Foundation

extension S3MultipartSession {
    /// What a multipart upload is, all a later process needs to resume it: the key, S3's upload
    /// id, the object's size and the part size, and whether it was created with CRC32C
    /// checksums. Its `id` is the session id a journal keeps:
    /// `s3mpu2:SIZE:PARTSIZE:BASE64URL(KEY):UPLOADID` (`s3mpu1:` for one created without
    /// checksums, by an earlier Hoist), checked field by field when read back.
    struct Plan: Equatable, Sendable {
        let key: String
        let uploadID: String
        let size: Int64
        let partSize: Int64
        /// Created with `x-amz-checksum-algorithm: CRC32C` and `x-amz-checksum-type: FULL_OBJECT`:
        /// each part goes with its CRC32C, and Complete names them and the whole object's (S3
        /// refuses a Complete whose checksums are not the kind the upload was created with).
        let checksummed: Bool

        init(key: String, uploadID: String, size: Int64, partSize: Int64, checksummed: Bool = true) {
            self.key = key
            self.uploadID = uploadID
            self.size = size
            self.partSize = partSize
            self.checksummed = checksummed
        }

        /// The plan a session id names, or nil for text that is not one (any other form, a
        /// size or part size out of S3's bounds, a key that is not UTF-8, an upload id outside
        /// the allow-list).
        init?(id: String) {
            guard id.count <= 4096, id.hasPrefix("s3mpu1:") || id.hasPrefix("s3mpu2:") else { return nil }
            let fields = id.dropFirst("s3mpu1:".count).split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count == 4, let size = Int64(fields[0]), let partSize = Int64(fields[1]),
                  size > 0, (S3Backend.Configuration.minimumPartSize...(5 << 30)).contains(partSize),
                  (size + partSize - 1) / partSize <= S3Backend.Configuration.maximumParts,
                  let keyData = Data(base64Encoded: Self.unURLSafe(String(fields[2]))),
                  let key = String(data: keyData, encoding: .utf8), (1...1024).contains(keyData.count),
                  S3MultipartSession.isValidUploadID(String(fields[3]))
            else { return nil }
            self.init(key: key, uploadID: String(fields[3]), size: size, partSize: partSize, checksummed: id.hasPrefix("s3mpu2:"))
        }

        var id: String {
            let key = Data(key.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
            return "s3mpu\(checksummed ? 2 : 1):\(size):\(partSize):\(key):\(uploadID)"
        }

        private static func unURLSafe(_ text: String) -> String {
            text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        }

        var partCount: Int { Int((size + partSize - 1) / partSize) }

        /// Where part `number` (1-based) starts in the object, and its length.
        func range(of number: Int) -> (offset: Int64, length: Int64) {
            let offset = Int64(number - 1) * partSize
            return (offset, min(partSize, size - offset))
        }
    }

    /// An upload id as S3 and its peers write them: 1 to 1024 of letters, digits and `._~+/=-`.
    static func isValidUploadID(_ id: String) -> Bool {
        (1...1024).contains(id.count) && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._~+/=-".contains($0)) }
    }

    /// The part size for an object of `size`: the configured one, or the storage's chunk size
    /// when smaller, never under S3's 5 MiB, and large enough for at most 10,000 parts.
    static func partSize(for size: Int64, configured: Int64, chunkSize: Int64?) -> Int64 {
        var part = max(S3Backend.Configuration.minimumPartSize, min(configured, chunkSize ?? .max))
        let fewest = (size + S3Backend.Configuration.maximumParts - 1) / S3Backend.Configuration.maximumParts
        part = max(part, fewest)
        return part
    }
}
