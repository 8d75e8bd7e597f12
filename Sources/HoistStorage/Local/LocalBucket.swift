import Foundation
import Synchronization
private import CHoistSystem

/// The embedded default backend: a directory whose files are the objects.
///
/// Object `a/b.txt` is the file `DIR/a/b.txt`, its metadata (the GCS object resource) the file's
/// extended attribute (`LocalBucket+Metadata.swift`). Hoist's own state lives under `DIR/.hoist/`,
/// outside the object namespace: `meta/<path>.json` holds the metadata of an object whose file
/// system did not take it as an attribute (and every object's in a bucket written before),
/// `uploads/<id>.part` and `<id>.json` hold unfinished large sessions. A
/// large upload is written to its `.part` file and renamed into place when complete; a small
/// one is written to an unnamed file (`O_TMPFILE`) in `uploads/` and linked into place. No
/// partial object is ever visible, and a cancelled, failed or killed upload leaves nothing.
public final class LocalBucket: StorageBackend {
    /// The bucket's directory, absolute.
    public let directory: URL
    /// `directory` as a path: objects' paths are made from it with plain string joins on the hot path.
    let directoryPath: String
    public var bucket: String { directory.lastPathComponent }
    /// An object's file and its sidecar change together: commits, deletes and metadata reads of one
    /// path take turns, under the lock of the path's stripe. Other paths go on at the same time
    /// (one lock for the bucket made a run's concurrent commits wait on each other).
    private let stripes: [Stripe] = (0..<64).map { _ in Stripe() }
    private final class Stripe: Sendable {
        let lock = Mutex(())
    }
    /// True once a caller takes durability into its own hands (`deferPersistence`): objects
    /// are then not fsynced one by one, and `persist()` syncs the file system once.
    private let deferred = Atomic<Bool>(false)

    static let reservedName = ".hoist"
    /// Uploads larger than this keep a session file (`uploads/ID.json`) so another process can
    /// resume them; smaller ones are written in one go and start again after a crash.
    static let sessionFileThreshold: Int64 = 8 << 20
    /// The state folders exist (checked once).
    private let prepared = Atomic<Bool>(false)
    /// Folders known to exist below the bucket: no `mkdir -p` per object; each with whether
    /// sidecars may be beside its objects (their folder in `.hoist/meta` exists).
    let knownFolders = Mutex<[String: Bool]>([:])
    /// Said once: some objects' metadata went to sidecars (`notes`).
    let sidecarNote = Mutex<String?>(nil)
    /// The last generation given out: generations only grow, without reading the previous one.
    private let lastGeneration = Atomic<Int64>(0)
    /// Small uploads go to unnamed files, until the file system says it has none (or /proc,
    /// through which they are linked, is missing): then to named part files.
    private let unnamedFilesWork = Atomic<Bool>(access("/proc/self/fd", F_OK) == 0)

    public init(directory: String) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
        directoryPath = self.directory.path
    }

    var uploadsDirectory: URL { directory.appendingPathComponent("\(Self.reservedName)/uploads", isDirectory: true) }
    /// `uploadsDirectory` as a path, for a session's files: joined as strings on the hot path.
    var uploadsPath: String { directoryPath + "/\(Self.reservedName)/uploads" }

    /// Where object `path` and its metadata sidecar live: plain string joins (the upload path
    /// makes them for every object).
    func objectPath(_ path: String) -> String { directoryPath + "/" + path }
    func metaPath(_ path: String) -> String { directoryPath + "/" + Self.metaRelativePath(path) }
    /// Object `path`'s sidecar, relative to the bucket's folder.
    static func metaRelativePath(_ path: String) -> String { reservedName + "/meta/" + path + ".json" }
    func objectURL(_ path: String) -> URL { URL(fileURLWithPath: objectPath(path), isDirectory: false) }

    /// Rejects paths a directory cannot hold safely.
    func validate(_ path: String) throws {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !segments.contains(where: { $0.isEmpty }) else {
            throw StorageFailure(.invalidArgument, "Object path '\(path)' is empty or has an empty segment.")
        }
        if segments.contains(where: { $0 == "." || $0 == ".." }) {
            throw StorageFailure(.invalidArgument, "Object path '\(path)' may not contain '.' or '..' segments.")
        }
        if segments.first == Substring(Self.reservedName) {
            throw StorageFailure(
                .invalidArgument, "Object path '\(path)' is reserved: a local bucket keeps its own state under '\(Self.reservedName)/'.")
        }
    }

    public func startUpload(to path: String, attributes: ObjectResource, size: Int64) async throws -> any UploadSession {
        try validate(path)
        if !prepared.load(ordering: .relaxed) {
            try prepareBucket()
            if !prepared.exchange(true, ordering: .relaxed) { sweep() }
        }
        let descriptor = LocalSessionDescriptor(path: path, attributes: attributes.writable, size: size)
        let id = newSessionID(size: size)
        // Only a large upload is worth resuming in another process: a small one starts again.
        if size > Self.sessionFileThreshold {
            do {
                try Self.writeNew(JSONEncoder().encode(descriptor), to: uploadsPath + "/\(id).json")
            } catch {
                throw Self.ioError(error, doing: "starting upload of \(path)")
            }
        }
        return try LocalUploadSession(bucket: self, id: id, descriptor: descriptor, fresh: true)
    }

    public func resumeUpload(id: String, for path: String) async throws -> any UploadSession {
        let session = try await resumeUpload(id: id)
        guard let local = session as? LocalUploadSession, local.objectPath == path else {
            throw StorageFailure(.invalidArgument, "Upload session \(id) stores another object than \(path): not resumed.",
                                 details: ["session": id])
        }
        return session
    }

    public func resumeUpload(id: String) async throws -> any UploadSession {
        guard !id.isEmpty, id.count <= 64, id.allSatisfy({ $0.isHexDigit || $0 == "-" }),
              let data = Self.readWithoutLinks(uploadsPath + "/\(id).json"),
              let descriptor = try? JSONDecoder().decode(LocalSessionDescriptor.self, from: data)
        else {
            throw StorageFailure(.objectNotFound, "Upload session \(id) does not exist.", details: ["session": id])
        }
        // A descriptor is read back from the bucket's own folder, which others may have written:
        // its object path gets every check a new upload's gets.
        do {
            try validate(descriptor.path)
            guard descriptor.size >= 0 else { throw StorageFailure(.invalidArgument, "size \(descriptor.size)") }
            if let field = descriptor.attributes.headerFieldWithControlCharacter {
                throw StorageFailure(.invalidArgument, "its \(field) holds a control character")
            }
        } catch let failure as StorageFailure {
            throw StorageFailure(.invalidArgument, "Upload session \(id) is damaged and was not resumed: \(failure.message)",
                                 details: ["session": id])
        }
        return try LocalUploadSession(bucket: self, id: id, descriptor: descriptor)
    }

    public func metadata(of path: String) async throws -> ObjectResource {
        try validate(path)
        return try locked(path) { try storedObject(path).resource }
    }

    public func deferPersistence() {
        deferred.store(true, ordering: .relaxed)
    }

    /// Whether each stored object is fsynced as it is stored (the default for library callers).
    public var syncsEachObject: Bool { !deferred.load(ordering: .relaxed) }

    /// One `syncfs` of the file system holding the bucket: every object stored so far, with
    /// its metadata and its directory entry, is on stable storage when it returns.
    public func persist() throws {
        guard deferred.load(ordering: .relaxed) else { return }
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw StorageFailure(.unknown, "Cannot open bucket folder \(directory.path) to sync it: \(String(cString: strerror(errno))).")
        }
        defer { close(descriptor) }
        guard hoist_syncfs(descriptor) == 0 else {
            throw StorageFailure(.unknown, "Syncing bucket folder \(directory.path) failed: \(String(cString: strerror(errno))).")
        }
    }

    /// The bucket's folder exists (or can be made) and this user can write to it.
    public func checkAccess() async throws {
        try prepareBucket()
        guard access(uploadsDirectory.path, W_OK) == 0 else {
            throw StorageFailure(
                .unauthorized, "Cannot write to the bucket folder \(directory.path): give this user write access.", details: ["bucket": bucket])
        }
    }

    public func delete(_ path: String, generation: Int64?) async throws {
        try validate(path)
        try locked(path) {
            guard let root = openFolder(), let stored = try? storedObject(path, in: root),
                  generation == nil || stored.resource.generation == generation else { return }
            _ = try remove(path, being: stored.file, in: root)
        }
    }

    /// Under the object's lock: deleted only while its metadata, read at that moment from the
    /// file itself (or its sidecar), still says `generation`, and only that very file.
    public func deleteObject(_ path: String, generation: Int64) async throws -> DeleteOutcome {
        try validate(path)
        return try locked(path) {
            guard let root = openFolder(), let stored = try? storedObject(path, in: root) else { return .absent }
            guard stored.resource.generation == generation else { return .changed }
            return try remove(path, being: stored.file, in: root)
        }
    }

    /// A new file with the source's bytes and metadata and a generation of its own, committed as
    /// an upload's. The source's file is opened under its object's lock, while its metadata says
    /// `generation` (and it is the file that metadata was read from); as an object is replaced by a new file renamed or linked into place, never
    /// written over, what is open stays that generation's bytes while they are copied (outside
    /// the lock: the destination's commit takes its own, which may be the same stripe's). They
    /// are checksummed as they are written and must be the source's. Never a rename (the source
    /// stays), nor a hard link: two names of one file would change together were one written over
    /// in place, and an object with no metadata of its own has its file's mtime as its generation.
    public func copy(from source: String, to destination: String, ifSourceGeneration generation: Int64?) async throws -> CopyOutcome {
        try validate(source)
        try validate(destination)
        let opened: (file: OpenFile, info: stat, stored: ObjectResource)? = try locked(source) {
            let missing = StorageFailure(.objectNotFound, "Object \(source) does not exist.", details: ["bucket": bucket, "object": source])
            guard let root = openFolder() else { throw missing }
            let object = try storedObject(source, in: root)
            if let generation, object.resource.generation != generation { return nil }
            guard let (descriptor, info) = root.openRegularFile(source) else { throw missing }
            // The file opened must be the one whose metadata was read: else it changed between.
            guard RootFolder.Identity(info) == object.file else {
                close(descriptor)
                return nil
            }
            return (OpenFile(path: objectPath(source), descriptor: descriptor), info, object.resource)
        }
        guard let opened else { return .sourceChanged }
        let bytes = ByteSource(file: opened.file, info: opened.info)
        let session = try await startUpload(to: destination, attributes: opened.stored.writable, size: bytes.size)
        let copied: ObjectResource
        do {
            guard case .finished(let resource) = try await session.send(from: bytes, at: 0, control: TransferControl(), progress: { _ in })
            else { throw StorageFailure(.internalError, "Copying \(source) to \(destination) stopped short.") }
            copied = resource
        } catch {
            await session.abandon()
            throw error
        }
        // Stored metadata's checksums are the source's bytes; a file put there by other means has none
        // but its bytes, read under the lock: then the copy's own are all there is.
        var expected = opened.stored
        if expected.md5Hash == nil, expected.crc32c == nil { expected = copied }
        if let why = expected.copyMismatch(copied) {
            let deleted = (try? await deleteObject(destination, generation: copied.generation ?? -1)) == .deleted
            throw ObjectResource.copyFailure(why, bucket: bucket, source: source, destination: destination, deleted: deleted)
        }
        return .copied(copied)
    }

    /// Removes object `path` and its sidecar, each unlinked from its folder located beneath the
    /// bucket's folder following no link (`RootFolder`): a link on the way, or as the
    /// object, removes nothing (a link at the object's place is left too), and neither does
    /// another file than `file`, the one whose metadata was read (its device, inode, size and
    /// times: a file put in its place since, or one changed, is left).
    private func remove(_ path: String, being file: RootFolder.Identity, in root: RootFolder) throws -> DeleteOutcome {
        do {
            switch try root.removeFile(path, if: { RootFolder.Identity($0) == file }) {
            case .removed: break
            case .gone: return .absent
            case .changed, .failed: return .changed
            }
            _ = try? root.removeFile(Self.metaRelativePath(path))
            return .deleted
        } catch {
            throw Self.ioError(error, doing: "deleting \(path)")
        }
    }

    /// The bucket's folder, held open to find what is in it following no link; nil when it is
    /// not a folder.
    func openFolder() -> RootFolder? { RootFolder(directoryPath) }

    /// The regular files below the bucket's folder whose paths start with `prefix` (not its own
    /// `.hoist` folder, no link followed: neither to the prefix's folder nor below it), in byte
    /// order, 1,000 a page; a page's token is the last path it gave.
    public func list(prefix: String, page: String?) async throws -> ObjectListing {
        let folder = prefix.lastIndex(of: "/").map { String(prefix[..<$0]) } ?? ""
        let start = folder.isEmpty ? directoryPath : directoryPath + "/" + folder
        guard let root = openFolder(), folder.isEmpty || root.holdsFolder(folder),
              let walk = FileManager.default.enumerator(atPath: start) else { return ObjectListing(objects: [], next: nil) }
        var paths: [String] = []
        while let relative = walk.nextObject() as? String {
            let path = folder.isEmpty ? relative : folder + "/" + relative
            if path == Self.reservedName || path.hasPrefix(Self.reservedName + "/") {
                walk.skipDescendants()
                continue
            }
            guard walk.fileAttributes?[.type] as? FileAttributeType == .typeRegular, path.hasPrefix(prefix),
                  page.map({ $0.utf8.lexicographicallyPrecedes(path.utf8) }) ?? true else { continue }
            paths.append(path)
        }
        paths.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let taken = paths.prefix(1000)
        let objects = taken.map { path in
            let stored = try? storedObject(path, in: root).resource
            return ListedObject(path: path, generation: stored?.generation, size: stored?.size)
        }
        return ObjectListing(objects: objects, next: paths.count > 1000 ? taken.last : nil)
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
            throw StorageFailure(
                .bucketNotFound, "Bucket \(bucket) does not exist: \(directory.path) is not a directory.", details: ["bucket": bucket])
        }
        try checkStateFolders(existingOnly: true)
        do {
            // 0755 whatever the umask: a bucket others can write to is open to races on its folders.
            let mode: [FileAttributeKey: Any] = [.posixPermissions: 0o755]
            // `meta/` (sidecars) is made only when an object needs one.
            try FileManager.default.createDirectory(at: uploadsDirectory, withIntermediateDirectories: true, attributes: mode)
        } catch {
            throw StorageFailure(
                .bucketNotFound, "Bucket \(bucket) does not exist and cannot be created at \(directory.path): \(error.localizedDescription)",
                details: ["bucket": bucket])
        }
        try checkStateFolders(existingOnly: false)
    }

    /// The bucket's own state folders are folders, not links to elsewhere: sessions, part files
    /// and sidecars are written there. Checked before any is made (nothing is made through a
    /// link) and after (`meta/` only where it exists: it is made for the first sidecar).
    func checkStateFolders(existingOnly: Bool) throws {
        for name in ["", "/uploads", "/meta"] {
            let path = directoryPath + "/" + Self.reservedName + name
            var info = stat()
            if lstat(path, &info) != 0, existingOnly || name == "/meta" { continue }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw StorageFailure(
                    .invalidArgument, "The local bucket's state folder \(path) is a symbolic link or not a folder: remove it, and Hoist makes it anew.",
                    details: ["bucket": bucket])
            }
        }
    }

    /// An unnamed file in `uploads/` for a small upload's bytes, open for writing; nil where the
    /// file system has none (the caller writes a named part file instead, from then on).
    func openUnnamedFile() throws -> Int32? {
        guard unnamedFilesWork.load(ordering: .relaxed) else { return nil }
        let descriptor = hoist_open_unnamed(uploadsPath, 0o644)
        if descriptor >= 0 { return descriptor }
        let error = errno
        if error == EOPNOTSUPP || error == EISDIR || error == EINVAL {
            unnamedFilesWork.store(false, ordering: .relaxed)
            return nil
        }
        throw Self.ioError(POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO), doing: "creating a file in \(uploadsPath)")
    }

    /// Makes an upload visible: writes its metadata, then puts its bytes in place: a part file
    /// renamed, or an unnamed file linked. Linking cannot replace an object; an unnamed file
    /// for a path that holds one is linked as `spare` (in `uploads/`) and renamed over it.
    func commit(
        _ part: LocalPart, path: String, attributes: ObjectResource, size: Int64, md5Hash: String, crc32c: String
    ) throws -> ObjectResource {
        try locked(path) {
            // At the precision the metadata keeps (milliseconds), so the resource returned is the
            // one a later metadata read gives.
            let now = Date()
            let stamp = RFC3339.date(RFC3339.string(now)) ?? now
            var resource = attributes.writable
            resource.bucket = bucket
            resource.name = path
            resource.size = size
            resource.md5Hash = md5Hash
            resource.crc32c = crc32c
            resource.generation = nextGeneration(now)
            resource.metageneration = 1
            resource.timeCreated = stamp
            resource.updated = stamp
            if resource.contentType == nil { resource.contentType = ContentType.fallback }

            let object = objectPath(path)
            do {
                let folder = Self.parent(object)
                var sidecarsBeside = knownFolders.withLock { $0[folder] }
                if sidecarsBeside == nil {
                    // Checked once per folder: later objects in it go the same way.
                    try checkNoObjectAbove(path)
                    try checkNoLinkOnTheWay(path)
                    let mode: [FileAttributeKey: Any] = [.posixPermissions: 0o755]
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: mode)
                    // Sidecars of this folder's objects (an older bucket's, or fallbacks) are
                    // removed as their objects are stored with attributes: none where their
                    // folder is missing (then no removal is tried per object).
                    var info = stat()
                    sidecarsBeside = lstat(Self.parent(metaPath(path)), &info) == 0
                    knownFolders.withLock { $0[folder] = $0[folder] ?? sidecarsBeside }
                }
                var encoded = [UInt8]()
                encoded.reserveCapacity(512)
                resource.appendJSON(to: &encoded)
                let inSidecar = try describe(part, path: path, with: encoded)
                do {
                    try place(part, at: object)
                } catch {
                    // A folder in the object's place (no stat per object to find it beforehand):
                    // the sidecar just written describes nothing.
                    var status = stat()
                    guard stat(object, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else { throw error }
                    if inSidecar { _ = try? openFolder()?.removeFile(Self.metaRelativePath(path)) }
                    throw StorageFailure(
                        .invalidArgument, "Object \(path) cannot be stored: objects exist below \(path)/ in a local bucket.")
                }
                if !inSidecar, sidecarsBeside == true {
                    // The object's attributes say what it is now: an earlier sidecar would speak
                    // for a file put in its place by other means.
                    _ = try? openFolder()?.removeFile(Self.metaRelativePath(path))
                }
            } catch {
                throw Self.ioError(error, doing: "storing \(path)")
            }
            return resource
        }
    }

    /// Puts an upload's bytes at `object`: renames a part file, or links an unnamed file (through
    /// `spare` when an object is there: a link cannot replace it, a rename can).
    private func place(_ part: LocalPart, at object: String) throws {
        switch part {
        case .named(let file, _):
            if rename(file, object) != 0 { throw Self.lastError }
        case .unnamed(let descriptor, let spare):
            if hoist_link_open_file(descriptor, object) == 0 { return }
            guard errno == EEXIST else { throw Self.lastError }
            guard hoist_link_open_file(descriptor, spare) == 0, rename(spare, object) == 0 else {
                let error = Self.lastError
                unlink(spare)
                throw error
            }
        }
    }

    /// Runs `body` holding the lock of `path`'s stripe.
    private func locked<T: Sendable>(_ path: String, _ body: () throws -> T) throws -> T {
        var hasher = Hasher()
        hasher.combine(path)
        return try stripes[Int(UInt(bitPattern: hasher.finalize()) % UInt(stripes.count))].lock.withLock { _ in try body() }
    }

    /// The folder of a path (everything before its last `/`).
    static func parent(_ path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return String(path[..<slash])
    }

    /// Writes a file with one `open`, `write` and `close`: no temporary file, no fsync
    /// (Foundation's `Data.write` fsyncs every file). A symbolic link at `path` is not followed:
    /// it is replaced by the file.
    static func writeInPlace(_ data: Data, to path: String) throws {
        var descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        if descriptor < 0, errno == ELOOP, unlink(path) == 0 {
            descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        }
        guard descriptor >= 0 else { throw Self.lastError }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw POSIXError(.EINVAL) }
        try writeAll(data, to: descriptor)
    }

    /// Creates `path` for writing, failing if anything is there (a link planted at a session's
    /// name included): for a new session's own files.
    static func writeNew(_ data: Data, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Self.lastError }
        defer { close(descriptor) }
        try writeAll(data, to: descriptor)
    }

    /// A regular file's bytes (at most 1 MiB: sidecars and session descriptors are small), not
    /// following a symbolic link at `path`; nil for anything else.
    static func readWithoutLinks(_ path: String, limit: Int = 1 << 20) -> Data? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= limit else { return nil }
        return try? FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readToEnd() ?? Data()
    }

    /// Writes all of `data` at the descriptor's offset (`write` until done, again after EINTR).
    static func writeAll(_ data: Data, to descriptor: Int32) throws {
        try data.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let wrote = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                if wrote < 0, errno == EINTR { continue }
                guard wrote > 0 else { throw Self.lastError }
                done += wrote
            }
        }
    }

    /// A symbolic link already inside the bucket (`DIR/a -> /etc`) must not take an object
    /// outside it: refuse a path whose folders, or its metadata's, go through one.
    func checkNoLinkOnTheWay(_ path: String) throws {
        for walk in [path, ".hoist/meta/" + path] {
            var current = directory
            for segment in walk.split(separator: "/").dropLast() {
                current.appendPathComponent(String(segment))
                var info = stat()
                if lstat(current.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFLNK {
                    throw StorageFailure(
                        .invalidArgument,
                        "Object \(path) cannot be stored: \(current.path) is a symbolic link, and objects stay inside the local bucket.")
                }
            }
        }
    }

    /// A new session id: a UUID for a large upload (resumable by id from any process); for a
    /// small one, `HOST-PID-START-N` (hex): unique within this bucket without reading the random
    /// device each time, and telling `sweep` whose part file it is.
    private func newSessionID(size: Int64) -> String {
        guard size <= Self.sessionFileThreshold else { return UUID().uuidString.lowercased() }
        let serial = sessionSerial.add(1, ordering: .relaxed).newValue
        return "\(Self.processTag)-\(String(serial, radix: 16))"
    }
    private static let processStart = String(UInt64(Date().timeIntervalSince1970 * 1e6), radix: 16)
    private static let processTag = "\(hostTag)-\(String(UInt64(getpid()), radix: 16))-\(processStart)"
    /// This host's name and process-id namespace hashed (FNV-1a, 8 hex digits): a bucket on a
    /// shared volume may hold other hosts' or containers' part files, whose process ids mean
    /// nothing here.
    static let hostTag: String = {
        let namespace = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) ?? ""
        var hash: UInt32 = 2_166_136_261
        for byte in (ProcessInfo.processInfo.hostName + " " + namespace).utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return String(format: "%08x", hash)
    }()
    /// Sessions untouched this long are forgotten, as GCS forgets its own after a week.
    static let sessionLifetime: TimeInterval = 7 * 86_400

    /// Clears what crashed processes left in `uploads/`: a small upload's part file whose process
    /// (on this host) is gone, and any session untouched for `sessionLifetime`. Best effort: a
    /// file that cannot be read or removed is left. Names that are not Hoist's are left alone.
    private func sweep() {
        let folder = uploadsDirectory.path
        // Only Hoist's own folders: not through a link someone put in their place.
        var info = stat()
        for path in [directoryPath + "/" + Self.reservedName, folder] {
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return }
        }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        let now = Date()
        for name in names {
            let stem: Substring
            if name.hasSuffix(".part") || name.hasSuffix(".json") { stem = name.dropLast(5) } else { continue }
            guard !stem.isEmpty, stem.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { continue }
            let fields = stem.split(separator: "-")
            var stale = false
            if fields.count == 4, fields[0] == Self.hostTag, let pid = Int32(fields[1], radix: 16) {
                stale = pid == getpid() ? fields[2] != Self.processStart : kill(pid, 0) != 0 && errno == ESRCH
            }
            let path = folder + "/" + name
            if !stale, let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date {
                stale = now.timeIntervalSince(modified) > Self.sessionLifetime
            }
            if stale { unlink(path) }
        }
    }
    private let sessionSerial = Atomic<Int>(0)

    /// A generation above every one given before (microseconds of the clock, or one more).
    private func nextGeneration(_ now: Date) -> Int64 {
        let micros = Int64(now.timeIntervalSince1970 * 1_000_000)
        var last = lastGeneration.load(ordering: .relaxed)
        while true {
            let next = max(micros, last + 1)
            let (exchanged, current) = lastGeneration.compareExchange(expected: last, desired: next, ordering: .relaxed)
            if exchanged { return next }
            last = current
        }
    }

    /// A directory cannot hold both `a` and `a/b`: refuse `a/b` while object `a` exists.
    private func checkNoObjectAbove(_ path: String) throws {
        var prefix = ""
        for segment in path.split(separator: "/").dropLast() {
            prefix += prefix.isEmpty ? String(segment) : "/\(segment)"
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: objectURL(prefix).path, isDirectory: &isDirectory), !isDirectory.boolValue {
                throw StorageFailure(
                    .invalidArgument, "Object \(path) cannot be stored: object \(prefix) exists, and a local bucket cannot hold both.")
            }
        }
    }

    /// The error the last failed system call left in `errno`.
    static var lastError: POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }

    /// Turns a file-system error into a storage failure.
    static func ioError(_ error: any Error, doing what: String) -> StorageFailure {
        if let failure = error as? StorageFailure { return failure }
        let nsError = error as NSError
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
        return StorageFailure(code, "Failed \(what): \(nsError.localizedDescription)")
    }
}

/// Where a local upload's bytes wait for `commit`: a part file, or an open unnamed file with
/// the name (in `uploads/`) it takes if it has to replace an object.
enum LocalPart {
    case named(String, descriptor: Int32)
    case unnamed(Int32, spare: String)

    /// The part's file, open for writing: its metadata is set on it before it is put in place.
    var descriptor: Int32 {
        switch self {
        case .named(_, let descriptor), .unnamed(let descriptor, _): descriptor
        }
    }
}

/// What a local upload session is, saved as `uploads/<id>.json` so another process can resume it.
struct LocalSessionDescriptor: Codable, Sendable {
    let path: String
    let attributes: ObjectResource
    let size: Int64
}
