import Foundation

/// An object's metadata in a local bucket: one inode per object. Its GCS object resource (JSON)
/// is the extended attribute `user.hoist.object` of the object's own file, set on the open file
/// before it is put in place, so the object and its metadata appear together and go together
/// (a file put in its place by other means has none). Where the file system does not take the
/// attribute (none at all, or too large: ext4 keeps an inode's attributes in one block), that
/// object's metadata goes to a sidecar, `.hoist/meta/<path>.json`, as every object's did
/// before; a bucket written so is read the same way.
extension LocalBucket {
    /// The attribute holding an object's metadata.
    package static let metadataAttribute = "user.hoist.object"
    /// The most a sidecar may hold (an attribute holds at most `ExtendedAttribute.limit`).
    static let sidecarLimit = 1 << 20

    /// An object's metadata and the file it describes, as they were at one moment.
    struct StoredObject {
        let resource: ObjectResource
        /// The file the metadata was read from (or beside): what a removal may remove.
        let file: RootFolder.Identity
    }

    /// Object `path`'s metadata: its attribute when it has one, else its sidecar (when that
    /// describes the file there: its size), else what the file system says. The file and the
    /// sidecar are found beneath the bucket's folder following no link (`RootFolder`):
    /// through a link, or as one, there is no object. Both are read as hostile input: bounded,
    /// parsed strictly, and kept only when every value is one Hoist writes (`trusted`); an
    /// attribute that is not is no description at all (the file system's is given, not a sidecar's).
    func storedObject(_ path: String, in root: RootFolder? = nil) throws -> StoredObject {
        let notFound = StorageFailure(.objectNotFound, "Object \(path) does not exist.", details: ["bucket": bucket, "object": path])
        guard let root = root ?? openFolder() else { throw notFound }
        let found = root.withRegularFile(path) { located, info, reopen in
            var reading = ExtendedAttribute.read(Self.metadataAttribute, ofLocated: located)
            if reading == .unreadable(ENOENT) {
                // No /proc to read the located file through: the same file opened by name.
                let opened = reopen()
                if opened >= 0 {
                    reading = ExtendedAttribute.read(Self.metadataAttribute, ofOpen: opened)
                    close(opened)
                }
            }
            return (reading, info)
        }
        guard let (reading, info) = found else { throw notFound }
        let file = RootFolder.Identity(info)
        switch reading {
        case .value(let bytes):
            if let resource = trusted(Data(bytes), path: path, size: Int64(info.st_size)) { return StoredObject(resource: resource, file: file) }
        case .absent:
            if let data = root.contents(of: Self.metaRelativePath(path), limit: Self.sidecarLimit),
               let resource = trusted(data, path: path, size: Int64(info.st_size)) {
                return StoredObject(resource: resource, file: file)
            }
        case .unreadable(let code):
            throw StorageFailure(.unknown, "Cannot read the metadata of object \(path) (its attribute \(Self.metadataAttribute)): "
                                     + String(cString: strerror(code)) + ".", details: ["bucket": bucket, "object": path])
        }
        return StoredObject(resource: fileSystemDescription(path, info), file: file)
    }

    /// The resource in `data` when it is one this bucket writes for object `path` of `size`
    /// bytes: strict JSON, its name the path (when given), its size the file's, a generation,
    /// checksums of their digests' lengths, no control character in a header or custom field.
    /// Nil otherwise. The bucket is this one's whatever it says (the folder may have moved).
    func trusted(_ data: Data, path: String, size: Int64) -> ObjectResource? {
        guard var resource = try? ObjectResource(json: data), resource.size == size, resource.name == nil || resource.name == path,
              let generation = resource.generation, generation > 0, (resource.metageneration ?? 1) >= 1,
              Self.isDigest(resource.md5Hash, bytes: 16), Self.isDigest(resource.crc32c, bytes: 4),
              resource.headerFieldWithControlCharacter == nil
        else { return nil }
        resource.bucket = bucket
        resource.name = path
        return resource
    }

    /// Absent, or the base64 of `bytes` bytes.
    private static func isDigest(_ text: String?, bytes: Int) -> Bool {
        guard let text else { return true }
        return Data(base64Encoded: text)?.count == bytes
    }

    /// A file put there by other means, described from the file system. Made as Foundation's
    /// `modificationDate` is, to the bit: the generation a journal recorded stays the same.
    private func fileSystemDescription(_ path: String, _ info: stat) -> ObjectResource {
        let modified = Date(timeIntervalSinceReferenceDate: Double(info.st_mtim.tv_sec) - Date.timeIntervalBetween1970AndReferenceDate
                                + Double(info.st_mtim.tv_nsec) / 1e9)
        return ObjectResource(
            bucket: bucket, name: path, size: Int64(info.st_size),
            generation: Int64(modified.timeIntervalSince1970 * 1_000_000), metageneration: 1,
            timeCreated: modified, updated: modified,
            contentType: ContentType.forPath(path) ?? ContentType.fallback)
    }

    /// Gives the part about to become object `path` its metadata, `encoded`: its attribute, set
    /// on the open file, else (the file system refused it) its sidecar, written before the
    /// object is put in place. Whether it went to the sidecar.
    func describe(_ part: LocalPart, path: String, with encoded: [UInt8]) throws -> Bool {
        switch try ExtendedAttribute.set(Self.metadataAttribute, to: encoded, on: part.descriptor) {
        case .set: return false
        case .refused(let code): noteSidecar(code, path: path)
        }
        let meta = metaPath(path)
        let folder = Self.parent(meta)
        if knownFolders.withLock({ $0[Self.parent(objectPath(path))] }) != true {
            // Made here, for the first sidecar beside it: checked as the bucket's state folders are.
            let mode: [FileAttributeKey: Any] = [.posixPermissions: 0o755]
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: mode)
            try checkStateFolders(existingOnly: false)
            try checkNoLinkOnTheWay(path)
            knownFolders.withLock { $0[Self.parent(objectPath(path))] = true }
        }
        // Each object fsynced on its own, or (a journal's batches) all at once by `persist()`:
        // then the sidecar is written once, in place, with no temporary file to create and rename.
        if syncsEachObject {
            try Data(encoded).write(to: URL(fileURLWithPath: meta), options: .atomic)
        } else {
            try Self.writeInPlace(Data(encoded), to: meta)
        }
        return true
    }

    /// Says once per bucket (a run's) that an object's metadata went to a sidecar, and why.
    private func noteSidecar(_ code: Int32, path: String) {
        let why = code == ENOTSUP || code == EOPNOTSUPP
            ? "its file system takes no user extended attributes"
            : "its file system did not take its metadata as an extended attribute (\(String(cString: strerror(code))))"
        sidecarNote.withLock { note in
            if note == nil {
                note = "The local bucket \(directoryPath) keeps the metadata of object \(path), and of others like it, in a sidecar "
                    + "file under \(Self.reservedName)/meta/: \(why)."
            }
        }
    }

    /// What a run should be told of this bucket: that some objects' metadata went to sidecars.
    public var notes: [String] { sidecarNote.withLock { $0.map { [$0] } ?? [] } }
}
