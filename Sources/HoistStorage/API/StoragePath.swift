import Foundation

/// A bucket and an object path, normalized as Firebase does: `//` folds to `/`, and leading
/// and trailing `/` are trimmed. An empty object path is the bucket's root.
struct StoragePath: Hashable, Sendable {
    let bucket: String
    /// The object's path, or nil at the root.
    let object: String?

    init(bucket: String, object: String? = nil) {
        self.bucket = bucket
        let normalized = object.map(Self.normalize)
        self.object = normalized?.isEmpty == false ? normalized : nil
    }

    static func normalize(_ path: String) -> String {
        // Nearly every path is normal already (a job's destinations are): one scan, no copy.
        var previous = UInt8(ascii: "/")
        var normal = true
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/"), previous == byte { normal = false; break }
            previous = byte
        }
        if normal, previous != UInt8(ascii: "/") || path.isEmpty { return path }
        return path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }

    func child(_ path: String) -> StoragePath {
        let tail = Self.normalize(path)
        guard !tail.isEmpty else { return self }
        return StoragePath(bucket: bucket, normalized: object.map { "\($0)/\(tail)" } ?? tail)
    }

    /// A path whose object is normal already (no second scan).
    private init(bucket: String, normalized object: String) {
        self.bucket = bucket
        self.object = object
    }

    func parent() -> StoragePath? {
        guard let object else { return nil }
        guard let slash = object.lastIndex(of: "/") else { return StoragePath(bucket: bucket) }
        return StoragePath(bucket: bucket, object: String(object[..<slash]))
    }

    var root: StoragePath { StoragePath(bucket: bucket) }

    /// Parses `gs://bucket/path` or a Firebase download URL
    /// (`http[s]://host/v0/b/bucket/o/percent%2Fencoded?...`).
    /// - Throws: `StorageError.pathError` with FirebaseStorage's message.
    static func parse(_ string: String) throws -> StoragePath {
        if string.hasPrefix("gs://") {
            guard let location = try? StorageLocation(parsing: string) else {
                throw StorageError.pathError(message: "Internal error: URI must be in the form of gs://<bucket>/<path/to/object>")
            }
            return StoragePath(bucket: location.bucket, object: location.path)
        }
        guard string.hasPrefix("http://") || string.hasPrefix("https://") else {
            throw StorageError.pathError(message: "Internal error: URL scheme must be one of gs://, http://, or https://")
        }
        let malformed = StorageError.pathError(message:
            "Internal error: URL must be in the form of http[s]://<host>/v0/b/<bucket>/o/<path/to/object>[?token=signed_url_params]")
        // As URL.pathComponents, percent-decoded: ["/", "v0", "b", bucket, "o", object...]
        guard let url = URL(string: string) else { throw malformed }
        let components = url.pathComponents
        guard components.count >= 4, components[1] == "v0", components[2] == "b" else { throw malformed }
        let bucket = components[3]
        guard components.count > 4 else { return StoragePath(bucket: bucket) }
        guard components[4] == "o" else { throw malformed }
        guard components.count > 5 else { return StoragePath(bucket: bucket) }
        return StoragePath(bucket: bucket, object: components[5...].joined(separator: "/"))
    }
}
