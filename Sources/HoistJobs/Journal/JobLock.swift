import Foundation
import Synchronization

/// One run of a job at a time: an exclusive `flock` on `JOURNAL.lock`.
public final class JobLock: JobRunLock {
    private let descriptor: Int32
    private let released = Mutex(false)

    /// Another run holds the lock.
    public struct Busy: Error, CustomStringConvertible {
        /// The process holding it, as it wrote itself there.
        public let holder: String
        public var description: String { "another run holds the job (pid \(holder))" }
    }

    /// A lock file that cannot be made or opened: says which and why.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Takes the lock, waiting for it when `wait`, else failing at once when another run holds it.
    /// - Throws: `Busy` when another run holds it; `Unavailable` when the lock file cannot be opened.
    public init(path: String, wait: Bool) throws {
        let folder = (path as NSString).deletingLastPathComponent
        try? PrivateFiles.makeFolder(folder)
        // Not through a link put in its place, and not a device or a FIFO opened at all: the
        // lock is truncated and written below.
        do { try PrivateFiles.refuseNonRegular([path], what: "the lock file") } catch { throw Unavailable(description: "\(error)") }
        descriptor = PrivateFiles.openPrivately(path)
        if descriptor >= 0 {
            do { try PrivateFiles.refuseForeign([path]) } catch {
                close(descriptor)
                throw Unavailable(description: "\(error)")
            }
        }
        guard descriptor >= 0 else {
            if errno == ELOOP || errno == EINVAL {
                throw Unavailable(description: "the lock file \(path) is a symbolic link or not a file: Hoist writes it only where it is. Remove it.")
            }
            throw Unavailable(description: "cannot open the lock file \(path): \(String(cString: strerror(errno))). "
                + "Give this user write access to \(folder), or name another journal (journal: in the manifest).")
        }
        while flock(descriptor, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
            let reason = errno
            if reason == EINTR { continue }
            close(descriptor)
            if reason == EWOULDBLOCK { throw Busy(holder: Self.holder(path)) }
            throw Unavailable(description: "cannot lock \(path): \(String(cString: strerror(reason))).")
        }
        _ = ftruncate(descriptor, 0)
        let pid = "\(getpid())\n"
        _ = pid.withCString { write(descriptor, $0, strlen($0)) }
    }

    /// Lets the next run in (also when this object goes, or the process ends).
    public func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { close(descriptor) }
    }

    deinit { release() }

    /// The process that holds the lock, as it wrote itself there: a process id, digits only
    /// (anything else in the file is someone else's text, not shown), or "unknown".
    public static func holder(_ path: String) -> String {
        let text = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        return !text.isEmpty && text.count <= 10 && text.allSatisfy(\.isASCII) && text.allSatisfy(\.isNumber) ? text : "unknown"
    }
}
