import Foundation
import Synchronization

/// An object's metadata: what you may set before an upload, and what the server reports after.
///
/// ```swift
/// let metadata = StorageMetadata()
/// metadata.contentType = "image/jpeg"
/// metadata.customMetadata = ["camera": "x100"]
/// ref.putFile(from: url, metadata: metadata)
/// ```
///
/// As in FirebaseStorage, two metadata are equal (`isEqual`, `==`) when their
/// `dictionaryRepresentation()`s are, and `copy()` makes an equal one.
public final class StorageMetadata: NSObject, Sendable {
    /// Every field lives in one locked value, so metadata can be shared between tasks safely.
    private let fields: Mutex<ObjectResource>

    /// The bucket that holds the object.
    public var bucket: String { fields.withLock { $0.bucket ?? "" } }
    public var cacheControl: String? {
        get { fields.withLock { $0.cacheControl } }
        set { fields.withLock { $0.cacheControl = newValue } }
    }
    public var contentDisposition: String? {
        get { fields.withLock { $0.contentDisposition } }
        set { fields.withLock { $0.contentDisposition = newValue } }
    }
    public var contentEncoding: String? {
        get { fields.withLock { $0.contentEncoding } }
        set { fields.withLock { $0.contentEncoding = newValue } }
    }
    public var contentLanguage: String? {
        get { fields.withLock { $0.contentLanguage } }
        set { fields.withLock { $0.contentLanguage = newValue } }
    }
    /// The MIME type. `putFile` infers it from the file's extension when unset.
    public var contentType: String? {
        get { fields.withLock { $0.contentType } }
        set { fields.withLock { $0.contentType = newValue } }
    }
    /// Custom key-value metadata.
    public var customMetadata: [String: String]? {
        get { fields.withLock { $0.metadata } }
        set { fields.withLock { $0.metadata = newValue } }
    }
    /// Base64 of the MD5 digest of the object's bytes.
    public var md5Hash: String? { fields.withLock { $0.md5Hash } }
    /// The object's version; a new upload to the same path gets a higher one.
    public var generation: Int64 { fields.withLock { $0.generation ?? 0 } }
    /// The version of this metadata; it starts at 1 for each generation.
    public var metageneration: Int64 { fields.withLock { $0.metageneration ?? 0 } }
    /// The last part of the path, such as `space.jpg`.
    public var name: String? { path.map { String($0.split(separator: "/").last ?? "") } }
    /// The full path in the bucket, such as `images/space.jpg`.
    public internal(set) var path: String? {
        get { fields.withLock { $0.name } }
        set { fields.withLock { $0.name = newValue } }
    }
    /// The object's size in bytes.
    public var size: Int64 { fields.withLock { $0.size ?? 0 } }
    public var timeCreated: Date? { fields.withLock { $0.timeCreated } }
    public var updated: Date? { fields.withLock { $0.updated } }

    /// Empty metadata, to fill in before an upload.
    public override convenience init() { self.init(dictionary: [:]) }

    /// Metadata from a dictionary in the GCS object resource's shape (`name`, `size`,
    /// `metadata` for custom metadata, ...), as `dictionaryRepresentation()` returns it.
    public convenience init(dictionary: [String: AnyHashable]) {
        func int(_ key: String) -> Int64? {
            switch dictionary[key] {
            case let value as Int: Int64(value)
            case let value as Int64: value
            case let value as String: Int64(value)
            default: nil
            }
        }
        func date(_ key: String) -> Date? { (dictionary[key] as? String).flatMap(RFC3339.date) }
        self.init(ObjectResource(
            bucket: dictionary["bucket"] as? String, name: dictionary["name"] as? String, size: int("size"),
            md5Hash: dictionary["md5Hash"] as? String, generation: int("generation"),
            metageneration: int("metageneration"), timeCreated: date("timeCreated"), updated: date("updated"),
            metadata: dictionary["metadata"] as? [String: String]))
        fields.withLock { resource in
            for field in ObjectResource.headerFields { resource[keyPath: field.keyPath] = dictionary[field.name] as? String }
        }
    }

    /// Metadata from a backend's object resource.
    public init(_ resource: ObjectResource) {
        fields = Mutex(resource)
    }

    /// The `Sendable` value backends work with.
    public var resource: ObjectResource { fields.withLock { $0 } }

    /// The metadata as the GCS object resource's JSON keys; unset fields are left out.
    public func dictionaryRepresentation() -> [String: AnyHashable] {
        var result: [String: AnyHashable] = [:]
        let r = resource
        result["bucket"] = r.bucket
        result["name"] = r.name
        result["size"] = r.size
        result["md5Hash"] = r.md5Hash
        result["generation"] = r.generation.map(String.init)
        result["metageneration"] = r.metageneration.map(String.init)
        result["timeCreated"] = r.timeCreated.map(RFC3339.string)
        result["updated"] = r.updated.map(RFC3339.string)
        for field in ObjectResource.headerFields { result[field.name] = r[keyPath: field.keyPath] }
        result["metadata"] = r.metadata
        return result
    }

    /// True once the metadata describes a stored object.
    public var isFile: Bool { path != nil && generation != 0 }
    /// Always false: Cloud Storage has no folder objects.
    public var isFolder: Bool { false }

    /// A new metadata with the same fields.
    public override func copy() -> Any { StorageMetadata(resource) }

    /// True for a `StorageMetadata` with an equal `dictionaryRepresentation()`.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? StorageMetadata else { return false }
        return other.dictionaryRepresentation() == dictionaryRepresentation()
    }

    /// A hash of `dictionaryRepresentation()`, so equal metadata hash alike.
    public override var hash: Int { dictionaryRepresentation().hashValue }

    /// `StorageMetadata` and the dictionary.
    public override var description: String { "StorageMetadata \(dictionaryRepresentation())" }
}
