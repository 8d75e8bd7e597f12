import Foundation

/// An object's metadata: what you may set before an upload, and what the server reports after.
///
/// ```swift
/// let metadata = StorageMetadata()
/// metadata.contentType = "image/jpeg"
/// metadata.customMetadata = ["camera": "x100"]
/// ref.putFile(from: url, metadata: metadata)
/// ```
public final class StorageMetadata: Equatable, Hashable, CustomStringConvertible {
    /// The bucket that holds the object.
    public let bucket: String
    public var cacheControl: String?
    public var contentDisposition: String?
    public var contentEncoding: String?
    public var contentLanguage: String?
    /// The MIME type. `putFile` infers it from the file's extension when unset.
    public var contentType: String?
    /// Base64 of the MD5 digest of the object's bytes.
    public let md5Hash: String?
    /// The object's version; a new upload to the same path gets a higher one.
    public let generation: Int64
    public var customMetadata: [String: String]?
    /// The version of this metadata; it starts at 1 for each generation.
    public let metageneration: Int64
    /// The last part of the path, such as `space.jpg`.
    public internal(set) var name: String?
    /// The full path in the bucket, such as `images/space.jpg`.
    public internal(set) var path: String?
    /// The object's size in bytes.
    public let size: Int64
    public let timeCreated: Date?
    public let updated: Date?

    /// Empty metadata, to fill in before an upload.
    public convenience init() { self.init(dictionary: [:]) }

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
            contentType: dictionary["contentType"] as? String, cacheControl: dictionary["cacheControl"] as? String,
            contentDisposition: dictionary["contentDisposition"] as? String,
            contentEncoding: dictionary["contentEncoding"] as? String,
            contentLanguage: dictionary["contentLanguage"] as? String,
            metadata: dictionary["metadata"] as? [String: String]))
    }

    /// Metadata from a backend's object resource.
    public init(_ resource: ObjectResource) {
        bucket = resource.bucket ?? ""
        cacheControl = resource.cacheControl
        contentDisposition = resource.contentDisposition
        contentEncoding = resource.contentEncoding
        contentLanguage = resource.contentLanguage
        contentType = resource.contentType
        md5Hash = resource.md5Hash
        generation = resource.generation ?? 0
        customMetadata = resource.metadata
        metageneration = resource.metageneration ?? 0
        path = resource.name
        name = resource.name.map { String($0.split(separator: "/").last ?? "") }
        size = resource.size ?? 0
        timeCreated = resource.timeCreated
        updated = resource.updated
    }

    /// The `Sendable` value backends work with.
    public var resource: ObjectResource {
        ObjectResource(
            bucket: bucket.isEmpty ? nil : bucket, name: path, size: size == 0 ? nil : size, md5Hash: md5Hash,
            generation: generation == 0 ? nil : generation, metageneration: metageneration == 0 ? nil : metageneration,
            timeCreated: timeCreated, updated: updated, contentType: contentType, cacheControl: cacheControl,
            contentDisposition: contentDisposition, contentEncoding: contentEncoding,
            contentLanguage: contentLanguage, metadata: customMetadata)
    }

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
        result["contentType"] = r.contentType
        result["cacheControl"] = r.cacheControl
        result["contentDisposition"] = r.contentDisposition
        result["contentEncoding"] = r.contentEncoding
        result["contentLanguage"] = r.contentLanguage
        result["metadata"] = r.metadata
        return result
    }

    /// True once the metadata describes a stored object.
    public var isFile: Bool { path != nil && generation != 0 }
    /// Always false: Cloud Storage has no folder objects.
    public var isFolder: Bool { false }

    public static func == (lhs: StorageMetadata, rhs: StorageMetadata) -> Bool {
        lhs.dictionaryRepresentation() == rhs.dictionaryRepresentation()
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(dictionaryRepresentation()) }

    public var description: String { "StorageMetadata \(dictionaryRepresentation())" }
}
