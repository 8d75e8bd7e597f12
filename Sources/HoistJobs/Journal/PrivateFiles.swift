import Foundation
import HoistStorage

/// How the journal's files are made: private to the job's user (a journal holds resumable
/// session URLs, which are credentials), and never through a symbolic link put in their place.
enum PrivateFiles {
    /// Makes `folder` and any missing folders above it, each new one 0700 (existing ones keep
    /// their mode).
    static func makeFolder(_ folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    /// Refuses anything but a regular file (or nothing yet) at any of `paths` (a journal, its WAL
    /// and shared-memory files, its lock): SQLite would follow a symbolic link and write wherever
    /// it leads, and a device, a FIFO or a folder is no journal (`/dev/null` included: a run keeps
    /// its journal).
    static func refuseNonRegular(_ paths: [String], what: String = "the journal file") throws {
        for path in paths {
            var info = stat()
            if lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFLNK {
                throw JournalError(message: "\(path) is a symbolic link: Hoist opens its journal files only where they are. "
                    + "Remove the link, or name the real file as the journal (the manifest's journal:).")
            }
            do {
                if try OutputFile.state(of: path, what: what) == .nullDevice {
                    throw OutputFile.Refused(description: "\(what) \(path) is the null device: a run needs a journal it can read back")
                }
            } catch {
                throw JournalError(message: "\(error). Name a regular file as the journal (the manifest's journal:).")
            }
        }
    }

    /// Refuses journal files another user owns, or that others may write: their rows decide
    /// which files a run skips and where it resumes, and their lock which run goes.
    static func refuseForeign(_ paths: [String]) throws {
        for path in paths {
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_uid != geteuid() {
                throw JournalError(message: "\(path) belongs to another user (uid \(info.st_uid)): Hoist uses only journal files its own user made. "
                    + "Remove it, or name another journal (the manifest's journal:).")
            }
            if info.st_mode & 0o022 != 0 {
                throw JournalError(message: "\(path) may be written by other users (mode \(String(info.st_mode & 0o777, radix: 8))): "
                    + "Hoist uses only journal files no one else can change. chmod go-w it, or name another journal (the manifest's journal:).")
            }
        }
    }

    /// Creates `path` empty with mode 0600 when nothing is there (SQLite then gives its WAL and
    /// shared-memory files the same mode); an existing file is left as it is.
    static func createPrivately(_ path: String) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if descriptor >= 0 { close(descriptor) }
    }

    /// Opens `path` read-write, creating it 0600, without following a link there; a regular file only.
    /// - Returns: the descriptor, or -1 with `errno` set (ELOOP for a link, EINVAL for what is not a file).
    static func openPrivately(_ path: String) -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return -1 }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            errno = EINVAL
            return -1
        }
        return descriptor
    }
}
