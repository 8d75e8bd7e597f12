import Foundation

extension ObjectResource {
    /// Why `copy`, the description of a copy of this object, does not hold its bytes, or nil
    /// when it does: the same size, and every checksum both carry (CRC32C, MD5) equal, at least
    /// one of them. A copy with no checksum in common with its source proves nothing (an S3
    /// server that keeps no CRC32C, a multipart ETag that is no MD5): that is a mismatch too, and
    /// the caller uploads instead.
    package func copyMismatch(_ copy: ObjectResource) -> String? {
        if let size, copy.size != size {
            return "\(copy.size.map(String.init) ?? "no") bytes, the source \(size)"
        }
        var compared = false
        for (name, mine, theirs) in [("crc32c", crc32c, copy.crc32c), ("md5", md5Hash, copy.md5Hash)] {
            guard let mine, let theirs else { continue }
            guard mine == theirs else { return "\(name) \(theirs), the source's \(mine)" }
            compared = true
        }
        return compared ? nil : "no checksum to compare with the source's"
    }

    /// The failure for a copy of `source` to `destination` that `copyMismatch` refused.
    package static func copyFailure(_ why: String, bucket: String, source: String, destination: String, deleted: Bool) -> StorageFailure {
        StorageFailure(
            .nonMatchingChecksum,
            "The copy of \(source) at \(destination) does not hold the source's bytes: \(why)."
                + (deleted ? " The copy was deleted; upload the file instead." : " Upload the file instead."),
            details: ["bucket": bucket, "object": destination, "source": source])
    }
}
