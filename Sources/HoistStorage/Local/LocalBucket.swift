import Foundation
import Synchronization

/// The embedded default backend: a directory whose files are the objects.
///
/// Object `a/b.txt` is the file `DIR/a/b.txt`. Hoist's own state lives under `DIR/.hoist/`,
/// outside the object namespace: `meta/<path>.json` holds each object's metadata (the GCS
/// object resource), `uploads/<id>.part` and `<id>.json` hold unfinished sessions. An upload
/// is written to its `.part` file and renamed into place when complete, so no partial object
/// is ever visible, and a cancelled or failed upload leaves nothing.
public final class LocalBucket: StorageBackend {
    /// The bucket's directory, absolute.
    public let directory: URL
    public var bucket: String { directory.lastPathComponent }
    private let commitLock = Mutex(())

    static let reservedName = ".hoist"

    public init(directory: String) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
    }

    var uploadsDirectory: URL { directory.appendingPathComponent("\(Self.reservedName)/uploads", isDirectory: true) }
    private var metaDirectory: URL { directory.appendingPathComponent("\(Self.reservedName)/meta", isDirectory: true) }

    func objectURL(_ path: String) -> URL { directory.appendingPathComponent(path, isDirectory: false) }
    private func metaURL(_ path: String) -> URL { metaDirectory.appendingPathComponent(path + ".json") }

    /// Rejects paths a directory cannot hold safely.
    func validate(_ path: String) throws {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !segments.contains(where: { $0.isEmpty }) else {
            throw StorageErrorCode.invalidArgument.error("Object path '\(path)' is empty or has an empty segment.")
        }
        if segments.contains(where: { $0 == "." || $0 == ".." }) {
            throw StorageErrorCode.invalidArgument.error("Object path '\(path)' may not contain '.' or '..' segments.")
        }
        if segments.first == Substring(Self.reservedName) {
            throw StorageErrorCode.invalidArgument.error(
                "Object path '\(path)' is reserved: a local bucket keeps its own state under '\(Self.reservedName)/'.")
        }
    }

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        try validate(path)
        try prepareBucket()
        let descriptor = LocalSessionDescriptor(path: path, attributes: attributes.writable, size: size)
        let id = UUID().uuidString.lowercased()
        do {
            try JSONEncoder().encode(descriptor).write(to: uploadsDirectory.appendingPathComponent("\(id).json"))
        } catch {
            throw Self.ioError(error, doing: "starting upload of \(path)")
        }
        return try LocalUploadSession(bucket: self, id: id, descriptor: descriptor)
    }

    public func resumeUpload(id: String) async throws -> any UploadSession {
        guard !id.isEmpty, id.allSatisfy({ $0.isHexDigit || $0 == "-" }),
              let data = try? Data(contentsOf: uploadsDirectory.appendingPathComponent("\(id).json")),
              let descriptor = try? JSONDecoder().decode(LocalSessionDescriptor.self, from: data)
        else {
            throw StorageErrorCode.objectNotFound.error("Upload session \(id) does not exist.", userInfo: ["session": id])
        }
        return try LocalUploadSession(bucket: self, id: id, descriptor: descriptor)
    }

    public func metadata(of path: String) async throws -> ObjectResource {
        try validate(path)
        return try commitLock.withLock { _ in try storedMetadata(of: path) }
    }

    /// The bucket's folder exists (or can be made) and this user can write to it.
    public func checkAccess() async throws {
        try prepareBucket()
        guard access(uploadsDirectory.path, W_OK) == 0 else {
            throw StorageErrorCode.unauthorized.error(
                "Cannot write to the bucket folder \(directory.path): give this user write access.", userInfo: ["bucket": bucket])
        }
    }

    public func delete(_ path: String, generation: Int64?) async throws {
        try validate(path)
        try commitLock.withLock { _ in
            guard let stored = try? storedMetadata(of: path), generation == nil || stored.generation == generation else { return }
            do {
                try FileManager.default.removeItem(at: objectURL(path))
                try? FileManager.default.removeItem(at: metaURL(path))
            } catch {
                throw Self.ioError(error, doing: "deleting \(path)")
            }
        }
    }

    public func downloadURL(for path: String) async throws -> URL {
        _ = try await metadata(of: path)
        return objectURL(path)
    }

    public func downloadURL(for path: String, stored: ObjectResource) async throws -> URL {
        try validate(path)
        return objectURL(path)
    }

    /// Creates the bucket's directory and its state folders on first use.
    private func prepareBucket() throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw StorageErrorCode.bucketNotFound.error(
                "Bucket \(bucket) does not exist: \(directory.path) is not a directory.", userInfo: ["bucket": bucket])
        }
        do {
            try FileManager.default.createDirectory(at: uploadsDirectory, withIntermediateDirectories: true)
        } catch {
            throw StorageErrorCode.bucketNotFound.error(
                "Bucket \(bucket) does not exist and cannot be created at \(directory.path): \(error.localizedDescription)",
                userInfo: ["bucket": bucket])
        }
    }

    private func storedMetadata(of path: String) throws -> ObjectResource {
        let object = objectURL(path)
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: object.path),
              attributes[.type] as? FileAttributeType == .typeRegular
        else {
            throw StorageErrorCode.objectNotFound.error(
                "Object \(path) does not exist.", userInfo: ["bucket": bucket, "object": path])
        }
        if let data = try? Data(contentsOf: metaURL(path)),
           let resource = try? JSONDecoder().decode(ObjectResource.self, from: data),
           resource.size == (attributes[.size] as? NSNumber)?.int64Value {
            return resource
        }
        // A file put there by other means: describe it from the file system.
        let modified = attributes[.modificationDate] as? Date ?? Date()
        return ObjectResource(
            bucket: bucket, name: path, size: (attributes[.size] as? NSNumber)?.int64Value ?? 0,
            generation: Int64(modified.timeIntervalSince1970 * 1_000_000), metageneration: 1,
            timeCreated: modified, updated: modified,
            contentType: ContentType.forPath(path) ?? ContentType.fallback)
    }

    /// Makes an upload visible: writes its metadata, then renames its part file into place.
    func commit(partFile: URL, path: String, attributes: ObjectResource, size: Int64, md5Hash: String, crc32c: String)
        throws -> ObjectResource
    {
        try commitLock.withLock { _ in
            let previous = try? storedMetadata(of: path)
            let now = Date()
            let micros = Int64(now.timeIntervalSince1970 * 1_000_000)
            var resource = attributes.writable
            resource.bucket = bucket
            resource.name = path
            resource.size = size
            resource.md5Hash = md5Hash
            resource.crc32c = crc32c
            resource.generation = max(micros, (previous?.generation ?? 0) + 1)
            resource.metageneration = 1
            resource.timeCreated = now
            resource.updated = now
            if resource.contentType == nil { resource.contentType = ContentType.fallback }

            let object = objectURL(path)
            let meta = metaURL(path)
            try checkNoObjectAbove(path)
            try checkNoLinkOnTheWay(path)
            do {
                let fm = FileManager.default
                try fm.createDirectory(at: object.deletingLastPathComponent(), withIntermediateDirectories: true)
                try fm.createDirectory(at: meta.deletingLastPathComponent(), withIntermediateDirectories: true)
                var isDirectory: ObjCBool = false
                if fm.fileExists(atPath: object.path, isDirectory: &isDirectory), isDirectory.boolValue {
                    throw StorageErrorCode.invalidArgument.error(
                        "Object \(path) cannot be stored: objects exist below \(path)/ in a local bucket.")
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                let encoded = try encoder.encode(resource)
                try encoded.write(to: meta, options: .atomic)
                // Return what a later metadata read returns (times at the file's millisecond precision).
                resource = try JSONDecoder().decode(ObjectResource.self, from: encoded)
                if rename(partFile.path, object.path) != 0 {
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
            } catch {
                throw Self.ioError(error, doing: "storing \(path)")
            }
            return resource
        }
    }

    /// A symbolic link already inside the bucket (`DIR/a -> /etc`) must not take an object
    /// outside it: refuse a path whose folders, or its metadata's, go through one.
    private func checkNoLinkOnTheWay(_ path: String) throws {
        for walk in [path, ".hoist/meta/" + path] {
            var current = directory
            for segment in walk.split(separator: "/").dropLast() {
                current.appendPathComponent(String(segment))
                var info = stat()
                if lstat(current.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFLNK {
                    throw StorageErrorCode.invalidArgument.error(
                        "Object \(path) cannot be stored: \(current.path) is a symbolic link, and objects stay inside the local bucket.")
                }
            }
        }
    }

    /// A directory cannot hold both `a` and `a/b`: refuse `a/b` while object `a` exists.
    private func checkNoObjectAbove(_ path: String) throws {
        var prefix = ""
        for segment in path.split(separator: "/").dropLast() {
            prefix += prefix.isEmpty ? String(segment) : "/\(segment)"
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: objectURL(prefix).path, isDirectory: &isDirectory), !isDirectory.boolValue {
                throw StorageErrorCode.invalidArgument.error(
                    "Object \(path) cannot be stored: object \(prefix) exists, and a local bucket cannot hold both.")
            }
        }
    }

    /// Turns a file-system error into a storage error.
    static func ioError(_ error: any Error, doing what: String) -> NSError {
        let nsError = error as NSError
        if nsError.domain == StorageErrorDomain { return nsError }
        var posix: Int32?
        if let error = error as? POSIXError { posix = error.code.rawValue }
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            posix = Int32(underlying.code)
        }
        let code: StorageErrorCode
        switch (posix, nsError.code) {
        case (EACCES?, _), (EPERM?, _), (EROFS?, _), (_, CocoaError.fileWriteNoPermission.rawValue),
             (_, CocoaError.fileReadNoPermission.rawValue), (_, CocoaError.fileWriteVolumeReadOnly.rawValue):
            code = .unauthorized
        case (ENOSPC?, _), (EDQUOT?, _), (_, CocoaError.fileWriteOutOfSpace.rawValue):
            code = .quotaExceeded
        case (ENOTDIR?, _), (EISDIR?, _), (EEXIST?, _):
            code = .invalidArgument
        default:
            code = .unknown
        }
        return code.error("Failed \(what): \(nsError.localizedDescription)")
    }
}

/// What a local upload session is, saved as `uploads/<id>.json` so another process can resume it.
struct LocalSessionDescriptor: Codable, Sendable {
    let path: String
    let attributes: ObjectResource
    let size: Int64
}
