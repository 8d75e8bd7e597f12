import Foundation

/// A place in a bucket: the bucket's root, a "folder", or an object.
///
/// ```swift
/// let storageRef = Storage.storage().reference()
/// let spaceRef = storageRef.child("images/space.jpg")
/// spaceRef.fullPath          // "images/space.jpg"
/// spaceRef.name              // "space.jpg"
/// spaceRef.parent()?.name    // "images"
/// ```
///
/// As in FirebaseStorage, two references are equal (`isEqual`, `==`) when their storages are
/// equal and their paths are the same; `copy()` makes an equal one.
public final class StorageReference: NSObject, Sendable {
    /// The service that made this reference.
    public let storage: Storage
    let path: StoragePath

    init(storage: Storage, path: StoragePath) {
        self.storage = storage
        self.path = path
    }

    /// The bucket's name.
    public var bucket: String { path.bucket }
    /// The path in the bucket, without the bucket: `images/space.jpg`; empty at the root.
    public var fullPath: String { path.object ?? "" }
    /// The last part of the path: `space.jpg`; empty at the root.
    public var name: String { path.object.map { String($0.split(separator: "/").last ?? "") } ?? "" }

    /// The bucket's root.
    public func root() -> StorageReference { StorageReference(storage: storage, path: path.root) }

    /// The reference one level up, or nil at the root.
    public func parent() -> StorageReference? {
        path.parent().map { StorageReference(storage: storage, path: $0) }
    }

    /// A reference below this one. `path` may hold `/`; repeated, leading and trailing
    /// slashes are removed (`"/a//b/"` is `"a/b"`).
    public func child(_ path: String) -> StorageReference {
        StorageReference(storage: storage, path: self.path.child(path))
    }

    /// `gs://bucket/path`.
    public override var description: String { "gs://\(bucket)/\(fullPath)" }

    /// A new reference to the same place in the same storage.
    public override func copy() -> Any { StorageReference(storage: storage, path: path) }

    /// True for a reference to the same path in an equal storage.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? StorageReference else { return false }
        return storage.isEqual(other.storage) && path == other.path
    }

    /// As FirebaseStorage: the storage's hash combined with the bucket's.
    public override var hash: Int { storage.hash ^ path.bucket.hashValue }
}
