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
public final class StorageReference: Hashable, CustomStringConvertible, Sendable {
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
    public var description: String { "gs://\(bucket)/\(fullPath)" }

    public static func == (lhs: StorageReference, rhs: StorageReference) -> Bool {
        lhs.storage === rhs.storage && lhs.path == rhs.path
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(path) }
}
