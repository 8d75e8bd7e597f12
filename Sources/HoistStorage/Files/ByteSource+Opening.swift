import Foundation
private import CHoistSystem
import Synchronization

/// Opening the files an upload reads: a path located first and checked, then that very file
/// opened, so no check is of one file and the read of another.
extension ByteSource {
    /// What `openWalked` found at a job's file's path.
    package enum Walked {
        /// The file, opened, and what `fstat` says of it.
        case opened(ByteSource, stat)
        /// Nothing is there.
        case missing
        /// A link is there, or a folder above it became one: the path leads out of place.
        case elsewhere
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
    static func openRegular(_ path: String, followingLinks: Bool) throws -> (OpenFile, stat) {
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
}
