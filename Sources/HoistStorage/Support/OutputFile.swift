import Foundation

/// What may stand where Hoist writes or replaces a file (metrics, the log file, the journal and
/// its lock, a local bucket's files): a regular file, or nothing yet. The null device means
/// "none" where writing nothing makes sense (`--metrics-file /dev/null`, `--log-file /dev/null`:
/// an operator's way to turn them off, never a file renamed over `/dev/null`); anything else (a
/// folder, a FIFO, a device, a socket, a symbolic link) is refused, with a message that says so.
public enum OutputFile {
    public enum State: Sendable, Equatable {
        case absent, regular, nullDevice
    }

    public struct Refused: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// What is at `path` now. The null device is recognised also through a link to it.
    /// - Parameter what: what the file is, for the message ("the metrics file").
    /// - Throws: `Refused` for anything that is neither a regular file nor the null device.
    public static func state(of path: String, what: String) throws(Refused) -> State {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return .absent }
            throw Refused(description: "\(what) \(path) cannot be checked: \(String(cString: strerror(errno)))")
        }
        if (info.st_mode & S_IFMT) == S_IFREG { return .regular }
        var target = stat()
        if stat(path, &target) == 0, isNullDevice(target) { return .nullDevice }
        throw Refused(description: "\(what) \(path) is \(kind(info.st_mode)), not a regular file: Hoist writes only a regular file there "
            + "(or none, with /dev/null). Name another path, or remove what is there")
    }

    /// Whether `info` is the null device (character device 1:3), wherever its node lies.
    public static func isNullDevice(_ info: stat) -> Bool {
        (info.st_mode & S_IFMT) == S_IFCHR && info.st_rdev == 0x103   // makedev(1, 3), glibc's encoding for small numbers
    }

    /// What a file's type is, in words.
    public static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a folder"
        case S_IFLNK: "a symbolic link"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        default: "not a file"
        }
    }
}
