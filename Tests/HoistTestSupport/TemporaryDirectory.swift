import Foundation
import HoistStorage
import Synchronization

/// A fresh directory under the system's temporary folder, removed when the value goes away, or
/// when the test process exits for one a static keeps (a server's data, the test CA).
public final class TemporaryDirectory: Sendable {
    public let url: URL
    public var path: String { url.path }

    /// - Parameter inMemory: on tmpfs (`/dev/shm`) when it takes the extended attributes a local
    ///   bucket writes, for a test of thousands of files: on this machine's disk (ext4 mounted
    ///   with `discard`) removing 50,000 objects took minutes, each unlink waiting for its discard.
    public init(inMemory: Bool = false) throws {
        let base = inMemory ? Self.memoryFolder ?? FileManager.default.temporaryDirectory : FileManager.default.temporaryDirectory
        url = base.appendingPathComponent("hoist-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        TemporaryFolders.removeAtExit(url)
    }

    deinit { TemporaryFolders.remove(url) }

    /// `/dev/shm` if a file there takes a `user.` extended attribute (tmpfs does since Linux 6.6), else nil.
    static let memoryFolder: URL? = {
        let probe = "/dev/shm/hoist-xattr-probe-\(getpid())-\(UUID().uuidString)"
        let descriptor = open(probe, O_CREAT | O_EXCL | O_WRONLY, 0o600)
        guard descriptor >= 0 else { return nil }
        defer {
            close(descriptor)
            unlink(probe)
        }
        return (try? ExtendedAttribute.set("user.hoist-probe", to: [1], on: descriptor)) == .set ? URL(fileURLWithPath: "/dev/shm") : nil
    }()

    /// Writes `data` to `name` (folders made as needed) and returns its URL.
    @discardableResult
    public func write(_ name: String, _ data: Data) throws -> URL {
        let file = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
        return file
    }
}

/// Temporary folders the tests made, removed at the latest when the process exits.
public enum TemporaryFolders {
    private static let pending: Mutex<Set<URL>> = {
        atexit { TemporaryFolders.removeAll() }
        return Mutex([])
    }()

    /// `url` is removed when the process exits, if nothing removed it before.
    public static func removeAtExit(_ url: URL) {
        _ = pending.withLock { $0.insert(url) }
    }

    /// Removes `url` and all it holds now, even folders a test made unreadable or unwritable.
    public static func remove(_ url: URL) {
        _ = pending.withLock { $0.remove(url) }
        if (try? FileManager.default.removeItem(at: url)) != nil { return }
        // A test took away permissions (chmod 000, a read-only folder): give them back first.
        try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: url.path)
        if let inside = FileManager.default.enumerator(atPath: url.path) {
            for case let path as String in inside {
                try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: url.appendingPathComponent(path).path)
            }
        }
        try? FileManager.default.removeItem(at: url)
    }

    private static func removeAll() {
        for url in pending.withLock({ Array($0) }) { remove(url) }
    }
}
