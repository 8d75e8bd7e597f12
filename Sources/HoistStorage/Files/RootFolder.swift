import Foundation
private import CHoistSystem
import Synchronization

/// A file set's root folder, held open for a run from before its walk: the run's files are
/// opened beneath it, so moving the root or a folder in it, or putting a link anywhere on
/// the way, cannot lead a file's open elsewhere.
package final class RootFolder: Sendable {
    /// Read by `ByteSource.openWalked`, which locates a file beneath it.
    let descriptor: Int32
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
                      ctimeNanoseconds: info.ctimeNanoseconds)
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
        guard let (file, info) = openRegularFile(relative) else { return nil }
        defer { close(file) }
        guard info.st_size <= limit else { return nil }
        return try? FileHandle(fileDescriptor: file, closeOnDealloc: false).readToEnd() ?? Data()
    }

    /// The regular file at `relative` (below this root, no link followed on the way or at its
    /// end) open for reading, with what `fstat` says of it; nil for anything else. The caller
    /// closes the descriptor.
    package func openRegularFile(_ relative: String) -> (descriptor: Int32, info: stat)? {
        guard let folder = folder(holding: relative) else { return nil }
        defer { if folder.descriptor != descriptor { close(folder.descriptor) } }
        let file = openat(folder.descriptor, folder.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return nil }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(file)
            return nil
        }
        return (file, info)
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
