import Foundation
import HoistStorage

/// What a local bucket keeps of object `path` (in the bucket folder `bucket`), read as a user
/// would (`getfattr -n user.hoist.object`, `cat .hoist/meta/PATH.json`): the JSON fields of
/// the object file's attribute, or of its sidecar; nil when there is none.
public enum LocalBucketFiles {
    public static func attribute(of path: String, in bucket: String) -> [String: Any]? {
        let descriptor = open(bucket + "/" + path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard case .value(let bytes) = ExtendedAttribute.read(LocalBucket.metadataAttribute, ofOpen: descriptor) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    }

    public static func sidecar(of path: String, in bucket: String) -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: bucket + "/.hoist/meta/" + path + ".json") else { return nil }
        return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    }
}
