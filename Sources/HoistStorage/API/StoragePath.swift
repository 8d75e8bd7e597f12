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
        path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }

    func child(_ path: String) -> StoragePath {
        let tail = Self.normalize(path)
        guard !tail.isEmpty else { return self }
        return StoragePath(bucket: bucket, object: object.map { "\($0)/\(tail)" } ?? tail)
    }

    func parent() -> StoragePath? {
        guard let object else { return nil }
        guard let slash = object.lastIndex(of: "/") else { return StoragePath(bucket: bucket) }
        return StoragePath(bucket: bucket, object: String(object[..<slash]))
    }

    var root: StoragePath { StoragePath(bucket: bucket) }

    /// Parses `gs://bucket/path` or a Firebase download URL
    /// (`https://host/v0/b/bucket/o/percent%2Fencoded?...`).
    static func parse(_ string: String) -> StoragePath? {
        if string.hasPrefix("gs://") {
            let rest = string.dropFirst("gs://".count)
            let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bucket = parts.first, !bucket.isEmpty else { return nil }
            return StoragePath(bucket: String(bucket), object: parts.count > 1 ? String(parts[1]) : nil)
        }
        guard string.hasPrefix("http://") || string.hasPrefix("https://") else { return nil }
        let noQuery = string.split(separator: "?", maxSplits: 1).first.map(String.init) ?? string
        let components = noQuery.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        // ["https:", host, "v0", "b", bucket, "o", object...]
        guard components.count >= 5, components[2] == "v0", components[3] == "b" else { return nil }
        let bucket = components[4].removingPercentEncoding ?? components[4]
        guard components.count > 5 else { return StoragePath(bucket: bucket) }
        guard components[5] == "o" else { return nil }
        let object = components.dropFirst(6).joined(separator: "/")
        return StoragePath(bucket: bucket, object: object.removingPercentEncoding ?? object)
    }
}
