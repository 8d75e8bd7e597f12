/// Files renamed within the watched roots since a pass last took them, for `hoist watch`: each
/// new path with the path whose object may hold its bytes (a chain `a` → `b` → `c` is `c` from
/// `a`: `b` was never stored). Pure bookkeeping of `FolderWatch.Batch`es.
struct Renames {
    /// Each renamed file's path now and the path it had when a pass last saw it.
    private(set) var origins: [String: String] = [:]

    mutating func note(_ batch: FolderWatch.Batch) {
        for (from, to) in batch.renames {
            let origin = origins.removeValue(forKey: from) ?? from
            // Back at its own name: nothing to copy (its object, if any, is still its own).
            origins[to] = origin == to ? nil : origin
        }
        // A file deleted or moved out since it was renamed has nothing left to copy to.
        for path in batch.removed { origins[path] = nil }
    }

    /// The renames a pass takes: of its `paths`, or every one for a whole pass. Taken ones are
    /// forgotten (a pass decides: copied or uploaded).
    mutating func take(_ paths: [String], whole: Bool) -> [String: String] {
        if whole {
            defer { origins = [:] }
            return origins
        }
        var taken: [String: String] = [:]
        for path in paths { if let origin = origins.removeValue(forKey: path) { taken[path] = origin } }
        return taken
    }
}
