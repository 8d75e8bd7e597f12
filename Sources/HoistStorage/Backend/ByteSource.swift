import Foundation
private import CHoistSystem
import Synchronization

/// The bytes of one upload: a `Data` in memory or a file read piece by piece, so a large file
/// never sits in memory whole.
public final class ByteSource: Sendable {
    private enum Storage: Sendable {
        case memory(Data)
        case file(OpenFile)
    }

    private let storage: Storage
    /// The number of bytes to upload.
    public let size: Int64
    /// Where these bytes start in the file or data: 0, or a slice's start (`slice(from:length:)`).
    let base: Int64

    /// Bytes in memory.
    public init(data: Data) {
        storage = .memory(data)
        size = Int64(data.count)
        opened = nil
        watched = nil
        base = 0
    }

    /// A compressed copy of `original` (`gzipped`), in memory: whether it changed is asked of
    /// the original's file.
    init(compressed data: Data, of original: ByteSource) {
        storage = .memory(data)
        size = Int64(data.count)
        opened = original.opened
        watched = original.watched ?? original.openFile
        base = 0
    }

    /// A compressed copy of `original` in a temporary file of `size` bytes.
    init(compressed file: OpenFile, size: Int64, of original: ByteSource) {
        storage = .file(file)
        self.size = size
        opened = original.opened
        watched = original.watched ?? original.openFile
        base = 0
    }

    /// The file at `path`, as it is now, opened.
    /// - Throws: `objectNotFound` when it does not exist, `unauthorized` when it cannot be
    ///   read, `invalidArgument` when it is not a regular file.
    public convenience init(filePath path: String) throws {
        let (file, info) = try Self.openRegular(path, followingLinks: true)
        self.init(file: file, info: info)
    }

    /// The regular file at `path` itself, not what a symbolic link there leads to: `putFile`
    /// refuses links.
    /// - Throws: as `init(filePath:)`; `invalidArgument` for a link.
    convenience init(regularFileAt path: String) throws {
        let (file, info) = try Self.openRegular(path, followingLinks: false)
        self.init(file: file, info: info)
    }

    private init(file: OpenFile, info: stat) {
        storage = .file(file)
        opened = FileStatus(info)
        size = Int64(info.st_size)
        watched = nil
        base = 0
    }

    private init(slicing source: ByteSource, from start: Int64, length: Int64) {
        storage = source.storage
        opened = source.opened
        watched = source.watched
        base = source.base + start
        size = length
    }

    /// `length` bytes of this source from `start`: one part of a parallel upload. The same open
    /// file (or data), and whether it changed is asked of the whole file.
    func slice(from start: Int64, length: Int64) -> ByteSource {
        ByteSource(slicing: self, from: max(0, min(start, size)), length: max(0, min(length, size - start)))
    }

    /// What `openWalked` found at a job's file's path.
    package enum Walked {
        /// The file, opened, and what `fstat` says of it.
        case opened(ByteSource, stat)
        /// Nothing is there.
        case missing
        /// A link is there, or a folder above it became one: the path leads out of place.
        case elsewhere
    }

    /// A file set's root folder, held open for a run from before its walk: the run's files are
    /// opened beneath it, so moving the root or a folder in it, or putting a link anywhere on
    /// the way, cannot lead a file's open elsewhere.
    package final class RootFolder: Sendable {
        fileprivate let descriptor: Int32
        /// Folders below the root are located one `openat(O_NOFOLLOW)` at a time, as where
        /// `openat2` is missing (tests of that way).
        let walkingFolderByFolder: Bool

        /// The folder at `path` (links followed: the manifest names it); nil when it is not a
        /// folder that can be opened.
        package init?(_ path: String, walkingFolderByFolder: Bool = false) {
            descriptor = hoist_open_folder(path)
            self.walkingFolderByFolder = walkingFolderByFolder
            guard descriptor >= 0 else { return nil }
        }

        deinit { if descriptor >= 0 { close(descriptor) } }

        /// What `remove(_:ifStill:)` did.
        package enum Removal: Sendable, Equatable {
            case removed
            /// Nothing there any more.
            case gone
            /// Another file, or this one changed (size, time, inode), or a link: left alone.
            case changed
            case failed(String)
        }

        /// What a file must still be for `remove(_:ifStill:)` to remove it: the one that was read.
        package struct Identity: Sendable, Equatable {
            package let device: UInt64
            package let inode: UInt64
            package let size: Int64
            /// Seconds (with nanoseconds) of the last modification.
            package let mtime: Double
            /// The status change time in nanoseconds: a content written and its mtime set back
            /// still changes it, and no user can set it back.
            package let ctimeNanoseconds: Int64

            package init(device: UInt64, inode: UInt64, size: Int64, mtime: Double, ctimeNanoseconds: Int64) {
                self.device = device
                self.inode = inode
                self.size = size
                self.mtime = mtime
                self.ctimeNanoseconds = ctimeNanoseconds
            }

            /// What `lstat`/`fstat` says of a file now.
            package init(_ info: stat) {
                self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                          mtime: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9,
                          ctimeNanoseconds: Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec))
            }
        }

        /// Removes the file at `relative` (below this root) only while it is still the regular
        /// file `expected` (device, inode, size, mtime, ctime): its folder is located beneath
        /// the root following no link (`openat2`, as uploads open files), the file checked with
        /// `fstatat(AT_SYMLINK_NOFOLLOW)` in that folder and unlinked from that same folder, so a
        /// folder swapped for a link on the way leads nowhere and a link swapped in is never
        /// followed. (A file renamed over it between the check and the unlink, a few system
        /// calls, is removed in its place: no unlink can be conditional.)
        package func remove(_ relative: String, ifStill expected: Identity) -> Removal {
            if relative.contains("/"), !ByteSource.resolveBeneath.load(ordering: .relaxed) {
                return .failed("this system has no openat2 (Linux 5.6), so no file below the root's top is removed")
            }
            do {
                return try removeFile(relative) { info in
                    let now = Identity(info)
                    return now.device == expected.device && now.inode == expected.inode && now.size == expected.size
                        && abs(now.mtime - expected.mtime) < 0.001 && now.ctimeNanoseconds == expected.ctimeNanoseconds
                }
            } catch {
                return .failed(String(cString: strerror(error.code.rawValue)))
            }
        }

        /// Removes the regular file at `relative` (below this root) if `accepts` what
        /// `fstatat(AT_SYMLINK_NOFOLLOW)` says of it, located as `remove(_:ifStill:)` says: a
        /// link on the way leads nowhere (`.gone`), and a link, folder or device there is left
        /// (`.changed`). Never `.failed`: a failed call throws its `errno`.
        package func removeFile(_ relative: String, if accepts: (stat) -> Bool = { _ in true }) throws(POSIXError) -> Removal {
            guard let folder = folder(holding: relative) else { return .gone }
            defer { if folder.descriptor != descriptor { close(folder.descriptor) } }
            var info = stat()
            guard fstatat(folder.descriptor, folder.name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                guard errno == ENOENT || errno == ENOTDIR else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                return .gone
            }
            guard (info.st_mode & S_IFMT) == S_IFREG, accepts(info) else { return .changed }
            guard unlinkat(folder.descriptor, folder.name, 0) == 0 else {
                guard errno == ENOENT else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                return .gone
            }
            return .removed
        }

        /// What `fstatat(AT_SYMLINK_NOFOLLOW)` says of `relative` itself (below this root, located
        /// following no link on the way); nil when nothing is there or only through a link.
        package func status(of relative: String) -> stat? {
            guard let folder = folder(holding: relative) else { return nil }
            defer { if folder.descriptor != descriptor { close(folder.descriptor) } }
            var info = stat()
            return fstatat(folder.descriptor, folder.name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
        }

        /// `body` given the regular file at `relative` (below this root, no link followed on the
        /// way or at its end) located with `O_PATH` (not opened: a device or FIFO put there sees
        /// nothing) and what `fstat` says of that very file; nil for anything else. What `body`
        /// reads through the descriptor (an extended attribute) is that file's, at that moment.
        /// `reopen` opens the same file for reading where /proc is missing (the located file
        /// cannot be read through it): by name again, and only while it is still that file
        /// (device and inode), else -1; the caller closes it.
        package func withRegularFile<T>(
            _ relative: String, _ body: (_ located: Int32, _ info: stat, _ reopen: () -> Int32) -> T
        ) -> T? {
            guard let folder = folder(holding: relative) else { return nil }
            defer { if folder.descriptor != descriptor { close(folder.descriptor) } }
            let located = hoist_locate_in(folder.descriptor, folder.name)
            guard located >= 0 else { return nil }
            defer { close(located) }
            var info = stat()
            guard fstat(located, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            return body(located, info) {
                let opened = openat(folder.descriptor, folder.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
                var now = stat()
                guard opened >= 0 else { return -1 }
                guard fstat(opened, &now) == 0, now.st_dev == info.st_dev, now.st_ino == info.st_ino else {
                    close(opened)
                    return -1
                }
                return opened
            }
        }

        /// The bytes of the regular file at `relative` (below this root, no link followed on the
        /// way or at its end), at most `limit` of them; nil for anything else.
        package func contents(of relative: String, limit: Int) -> Data? {
            guard let folder = folder(holding: relative) else { return nil }
            defer { if folder.descriptor != descriptor { close(folder.descriptor) } }
            let file = openat(folder.descriptor, folder.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard file >= 0 else { return nil }
            defer { close(file) }
            var info = stat()
            guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= limit else { return nil }
            return try? FileHandle(fileDescriptor: file, closeOnDealloc: false).readToEnd() ?? Data()
        }

        /// Whether `relative` is a folder below this root reached following no link.
        package func holdsFolder(_ relative: String) -> Bool {
            guard let located = locateFolder(relative) else { return false }
            close(located)
            return true
        }

        /// Removes the folder at `relative` (below this root, never the root) if it is empty
        /// and a folder, not a link; whether it did.
        @discardableResult
        package func removeEmptyFolder(_ relative: String) -> Bool {
            guard !relative.isEmpty, let folder = folder(holding: relative) else { return false }
            defer { if folder.descriptor != descriptor { close(folder.descriptor) } }
            return unlinkat(folder.descriptor, folder.name, AT_REMOVEDIR) == 0
        }

        /// The folder holding `relative` (located beneath the root, no link followed; the
        /// root's own descriptor for a name at the top) and the last name; nil when it is not
        /// there, not a folder, or only reached through a link.
        private func folder(holding relative: String) -> (descriptor: Int32, name: String)? {
            let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
            guard let last = parts.last, !last.isEmpty, last != ".", last != ".." else { return nil }
            guard parts.count > 1 else { return (descriptor, String(last)) }
            return locateFolder(parts.dropLast().joined(separator: "/")).map { ($0, String(last)) }
        }

        /// The folder `relative` below the root, opened (`O_PATH`) following no link anywhere on
        /// the way: `openat2` beneath the root, or without it (or `walkingFolderByFolder`) one
        /// `openat(O_NOFOLLOW)` a folder, which gives the same answer (no `..` is walked). Nil
        /// when it is not there, not a folder, only reached through a link, or names `.`, `..`
        /// or an empty folder.
        private func locateFolder(_ relative: String) -> Int32? {
            let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
            guard !parts.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else { return nil }
            var located: Int32 = -1
            var walking = walkingFolderByFolder || !ByteSource.resolveBeneath.load(ordering: .relaxed)
            if !walking {
                located = hoist_locate_beneath(descriptor, relative)
                if located < 0, errno == ENOSYS || errno == EPERM || errno == EINVAL {
                    ByteSource.resolveBeneath.store(false, ordering: .relaxed)   // as `openWalked` does
                    walking = true
                }
            }
            if walking {
                located = descriptor
                for part in parts {
                    let next = hoist_locate_folder_in(located, String(part))
                    if located != descriptor { close(located) }
                    located = next
                    guard next >= 0 else { break }
                }
            }
            guard located >= 0 else { return nil }
            var info = stat()
            guard fstat(located, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
                close(located)
                return nil
            }
            return located
        }
    }

    /// Whether `openat2` answers here (Linux 5.6, and no seccomp filter refusing it); turned off
    /// for good at its first ENOSYS. Tests turn it off to run the way without it.
    package static let resolveBeneath = Atomic<Bool>(true)

    /// A file a job's walk found, opened for its upload if it still may be, as what was found.
    /// The path is first located without being opened (`O_PATH`) and checked with `fstat` of
    /// what was located, then that very file is opened for reading: no check is of one file and
    /// the read of another, and nothing but a regular file is opened (a device or FIFO swapped
    /// in is not: `ByteSourceTests.onlyRegularFilesAreOpened`).
    /// - Beneath `root` (a folder file set): `relativePath` is located with `openat2`, following
    ///   no link on the way and not leaving the root (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`).
    ///   Any regular file found so is a file of the set, the walked one or another saved in its
    ///   place (`ByteSourceTests.aLinkSwappedInOnTheWayLeadsElsewhere`, `aMovedRootIsNotFollowed`).
    /// - Without a root folder (a set whose root is a file) or `openat2`: `path` is located not
    ///   following a link at its end, and must be the walked `device` and `inode`, or another file
    ///   whose kernel path (readlink of /proc/self/fd) is `realPath()`. Weaker: a folder on the
    ///   way swapped for a link into another mount namespace can pass that path check.
    /// - With `followingLinks` (a set that follows links) the path may lead anywhere, as the walk
    ///   allowed; it must still be a regular file.
    /// - Throws: `invalidArgument` for something not a regular file where the file was,
    ///   `unauthorized` when it cannot be read.
    package static func openWalked(
        _ path: String, relativePath: String, beneath root: RootFolder?, device: UInt64, inode: UInt64,
        followingLinks: Bool, realPath: () -> String
    ) throws -> Walked {
        let located: (descriptor: Int32, info: stat)
        let beneath = !followingLinks && root != nil && resolveBeneath.load(ordering: .relaxed)
        if beneath, let root {
            let descriptor = hoist_locate_beneath(root.descriptor, relativePath)
            if descriptor < 0, errno == ENOSYS || errno == EPERM || errno == EINVAL {
                // No openat2 here (an old kernel, or a seccomp filter that refuses it).
                resolveBeneath.store(false, ordering: .relaxed)
                return try openWalked(path, relativePath: relativePath, beneath: nil, device: device, inode: inode,
                                      followingLinks: false, realPath: realPath)
            }
            guard descriptor >= 0 else {
                let code = errno
                switch code {
                case ENOENT, ENOTDIR: return .missing
                case ELOOP, EXDEV: return .elsewhere   // a link on the way, or out of the root
                default: throw openFailure(code, path)
                }
            }
            located = (descriptor, try status(of: descriptor, path: path))
        } else {
            guard let found = try locate(path, followingLinks: followingLinks) else { return .missing }
            located = found
        }
        defer { close(located.descriptor) }
        let info = located.info
        if (info.st_mode & S_IFMT) == S_IFLNK, !followingLinks { return .elsewhere }
        if !followingLinks, !beneath, (UInt64(info.st_dev), UInt64(info.st_ino)) != (device, inode) {
            // Another file: read only where the walk found its file. The kernel's path of what
            // was located, not a second look at the path.
            guard let found = descriptorPath(located.descriptor), found == Array(realPath().utf8) else { return .elsewhere }
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw StorageFailure(.invalidArgument, "\(path) is not a regular file.", details: ["file": path])
        }
        return .opened(ByteSource(file: try reopen(located, path: path), info: info), info)
    }

    /// How many files `contentCRC32C(ofFileAt:followingLinks:)` has read in this process: a
    /// test's proof that a run read no file it need not.
    package static let contentReads = Atomic<Int>(0)

    /// The CRC32C (base64 of the big-endian value, as GCS writes it) of the regular file at
    /// `path`, read 1 MiB at a time (a link at its end is followed only when `followingLinks`).
    package static func contentCRC32C(ofFileAt path: String, followingLinks: Bool) throws -> String {
        var crc = Checksums.CRC32C()
        try readWhole(path, followingLinks: followingLinks) { crc.update($0) }
        return crc.base64()
    }

    /// The CRC32C and MD5 (base64, as GCS writes them) and the size of the regular file at `path`,
    /// read once, 1 MiB at a time (a link at its end is followed only when `followingLinks`):
    /// what a removal compares with the object's checksums read at that moment (the removal gate).
    package static func contentDigests(ofFileAt path: String, followingLinks: Bool) throws -> (crc32c: String, md5: String, size: Int64) {
        var sums = Checksums()
        let size = try readWhole(path, followingLinks: followingLinks) { sums.update($0) }
        return (sums.crc32cBase64(), sums.md5Base64(), size)
    }

    /// Reads the regular file at `path` whole, 1 MiB at a time, handing each piece to `body`
    /// (counted in `contentReads`); the bytes read.
    @discardableResult
    private static func readWhole(_ path: String, followingLinks: Bool, _ body: (UnsafeRawBufferPointer) -> Void) throws -> Int64 {
        let (file, info) = try openRegular(path, followingLinks: followingLinks)
        contentReads.add(1, ordering: .relaxed)
        let reader = Reader(file: file, offset: 0, base: 0, end: Int64(info.st_size))
        var size: Int64 = 0
        while case let piece = try reader.read(upTo: 1 << 20), !piece.isEmpty {
            piece.withUnsafeBytes { body($0) }
            size += Int64(piece.count)
        }
        return size
    }

    /// `path` opened for reading if it is a regular file (located first: see `openWalked`).
    private static func openRegular(_ path: String, followingLinks: Bool) throws -> (OpenFile, stat) {
        guard let located = try locate(path, followingLinks: followingLinks) else {
            throw StorageFailure(.objectNotFound, "File \(path) does not exist.", details: ["file": path])
        }
        defer { close(located.descriptor) }
        guard (located.info.st_mode & S_IFMT) == S_IFREG else {
            throw StorageFailure(.invalidArgument, "\(path) is not a regular file.", details: ["file": path])
        }
        return (try reopen(located, path: path), located.info)
    }

    /// `path` located (`O_PATH`: not opened, so no driver is asked anything) and its `fstat`;
    /// nil when nothing is there. The caller closes the descriptor.
    private static func locate(_ path: String, followingLinks: Bool) throws -> (descriptor: Int32, info: stat)? {
        let descriptor = hoist_locate(path, followingLinks ? 1 : 0)
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG: return nil   // (as stat(2) failing said before)
            default: throw openFailure(code, path)
            }
        }
        return (descriptor, try status(of: descriptor, path: path))
    }

    /// `fstat` of a descriptor just located; it is closed when that fails.
    private static func status(of descriptor: Int32, path: String) throws -> stat {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw openFailure(code, path)
        }
        return info
    }

    /// The located regular file opened for reading: through `/proc/self/fd`, the very file
    /// located. Without `/proc`, the path is opened again (not following a link) and must still
    /// be that file.
    private static func reopen(_ located: (descriptor: Int32, info: stat), path: String) throws -> OpenFile {
        var descriptor = hoist_reopen_for_reading(located.descriptor)
        if descriptor < 0, errno == ENOENT {
            descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            if descriptor >= 0 {
                var info = stat()
                guard fstat(descriptor, &info) == 0, info.st_dev == located.info.st_dev, info.st_ino == located.info.st_ino else {
                    close(descriptor)
                    throw StorageFailure(.invalidArgument, "\(path) was replaced while it was opened: not read.", details: ["file": path])
                }
            }
        }
        guard descriptor >= 0 else { throw openFailure(errno, path) }
        return OpenFile(path: path, descriptor: descriptor)
    }

    /// Why `path` could not be opened, from the `errno` of the call that failed: `unauthorized`
    /// when permission was refused, else `unknown` in the system's words.
    private static func openFailure(_ code: Int32, _ path: String) -> StorageFailure {
        if code == EACCES || code == EPERM {
            return StorageFailure(.unauthorized, "Permission denied reading file \(path).", details: ["file": path])
        }
        return StorageFailure(.unknown, "Cannot open \(path): \(String(cString: strerror(code))).", details: ["file": path])
    }

    /// `path` with every link resolved (realpath(3)), as the kernel names open files; `path`
    /// itself when it cannot be resolved.
    package static func realPath(_ path: String) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard realpath(path, &buffer) != nil else { return path }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The kernel's path of an open descriptor, as bytes; nil when `/proc` cannot say.
    private static func descriptorPath(_ descriptor: Int32) -> [UInt8]? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = hoist_descriptor_path(descriptor, &buffer, UInt(buffer.count))
        guard length >= 0 else { return nil }
        return buffer[..<Int(length)].map { UInt8(bitPattern: $0) }
    }

    /// The file's size and modification time when it was opened; nil for bytes in memory.
    private let opened: FileStatus?
    /// The file whose changes `changeSinceOpened` looks for when it is not the one read: the
    /// original of a compressed copy. Nil: the source's own file.
    private let watched: OpenFile?

    /// Why the file is no longer as it was opened (its size or modification time differ), or nil
    /// when it is unchanged (and for bytes in memory). The open file is asked, not its path: what
    /// matters is whether the bytes read are the bytes it had. A file written over in place is
    /// caught; one replaced by another (saved anew, renamed over) or removed was read whole as it
    /// was, and the next run finds the new one.
    public func changeSinceOpened() -> String? {
        guard let file = watched ?? openFile, let opened else { return nil }
        guard let info = file.status() else { return "\(file.path) could not be checked after it was uploaded" }
        let now = FileStatus(info)
        if now.size != opened.size {
            return "\(file.path) changed while it was uploaded: its size went from \(opened.size) to \(now.size) bytes"
        }
        if (now.modified, now.modifiedNanoseconds) != (opened.modified, opened.modifiedNanoseconds)
            || (now.changed != opened.changed && now.links == opened.links) {
            // A ctime that moved on with the mtime put back: written in place, then `touch -d`
            // (not a link removed or renamed over it: those leave the bytes read whole).
            return "\(file.path) changed while it was uploaded: it was modified"
        }
        return nil
    }

    /// What a backend says when it stops before storing an object because the file changed
    /// while it was read; nil when the file is as it was opened.
    public func unchangedOrWhy() -> String? {
        changeSinceOpened().map { "\($0); nothing was stored. Upload it again once it is complete." }
    }

    /// The local file's path, for a file source.
    public var filePath: String? {
        if let watched { return watched.path }
        if case .file(let file) = storage { return file.path }
        return nil
    }

    /// The open file, for a file source.
    var openFile: OpenFile? {
        if case .file(let file) = storage { return file }
        return nil
    }

    /// The bytes, for a source in memory.
    var memoryData: Data? {
        if case .memory(let data) = storage { return data }
        return nil
    }

    /// A reader positioned at `offset`. A file's reader stops at `size`: the source is the
    /// bytes the file had when it was opened (a file that grew is caught by `changeSinceOpened`).
    public func reader(from offset: Int64) throws -> Reader {
        switch storage {
        case .memory(let data): Reader(data: data, offset: offset, base: base, end: size)
        case .file(let file): Reader(file: file, offset: offset, base: base, end: size)
        }
    }

    /// Reads a source forward, one piece at a time. Not for sharing between threads.
    public final class Reader {
        private let data: Data?
        /// The source's open file (read with `pread` at `offset`: no seek, no `fstat` per
        /// piece as `FileHandle` makes).
        private let file: OpenFile?
        private let end: Int64
        /// Where the source starts in the file or data (a slice's start).
        private let base: Int64
        /// Where the next `read` starts, from the source's start.
        public private(set) var offset: Int64

        fileprivate init(data: Data, offset: Int64, base: Int64, end: Int64) {
            self.data = data
            file = nil
            self.base = base
            self.end = end
            self.offset = offset
        }

        fileprivate init(file: OpenFile, offset: Int64, base: Int64, end: Int64) {
            data = nil
            self.file = file
            self.base = base
            self.end = end
            self.offset = offset
        }

        /// Up to `count` bytes; empty at the end of the source.
        public func read(upTo count: Int) throws -> Data {
            let piece: Data
            if let data {
                let start = data.startIndex + Int(base + offset)
                piece = data[start..<min(start + max(0, min(count, Int(end - offset))), data.endIndex)]
            } else if let file {
                piece = try readFile(file, upTo: Int(max(0, min(Int64(count), end - offset))))
            } else {
                piece = Data()
            }
            offset += Int64(piece.count)
            return piece
        }

        /// Up to `count` bytes of the file from `offset`: fewer only at its end.
        private func readFile(_ file: OpenFile, upTo count: Int) throws -> Data {
            guard count > 0 else { return Data() }
            var piece = Data(count: count)
            let got = piece.withUnsafeMutableBytes { file.read(into: $0, at: base + offset) }
            guard got >= 0 else {
                throw StorageFailure(
                    .unknown, "Reading \(file.path) failed: \(String(cString: strerror(Int32(-got)))).", details: ["file": file.path])
            }
            if got < count { piece.removeSubrange(got...) }
            return piece
        }
    }
}

/// A file open for reading: opened once by the source that checked it, read with `pread` by
/// every reader and request body that sends its bytes (no second open of a path that may lead
/// elsewhere by then), and closed when the last of them lets it go.
final class OpenFile: Sendable {
    /// The path it was opened at, for messages.
    let path: String
    private let descriptor: Int32

    /// Takes `descriptor`, an open file that this object closes.
    init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Fills `buffer` from `offset`, retrying short reads: the count read, short only at the end
    /// of the file; `-errno` when a read fails.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var got = 0
        while got < buffer.count {
            let count = pread(descriptor, base + got, buffer.count - got, off_t(offset) + off_t(got))
            if count < 0, errno == EINTR { continue }
            if count < 0 { return -Int(errno) }
            if count == 0 { break }
            got += count
        }
        return got
    }

    /// What `fstat(2)` says of the open file; nil when it fails.
    func status() -> stat? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? info : nil
    }
}

/// What `stat(2)` says of a path: enough to tell a regular file, its size, and whether it changed.
struct FileStatus: Sendable, Equatable {
    let isRegular: Bool
    let size: Int64
    /// Seconds and nanoseconds of the last modification.
    let modified: Int64
    let modifiedNanoseconds: Int
    /// The status change time, in nanoseconds: moves on with every write, whatever the mtime says
    /// (and when a link to the file is made or removed).
    let changed: Int64
    /// How many names the file has.
    let links: UInt64

    init?(_ path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }

    init(_ status: stat) {
        isRegular = (status.st_mode & S_IFMT) == S_IFREG
        size = Int64(status.st_size)
        modified = Int64(status.st_mtim.tv_sec)
        modifiedNanoseconds = Int(status.st_mtim.tv_nsec)
        changed = Int64(status.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(status.st_ctim.tv_nsec)
        links = UInt64(status.st_nlink)
    }
}
