import Foundation

/// A file found under a file set's root.
public struct WalkedFile: Sendable {
    /// The absolute path.
    public let path: String
    /// The path below the root, `/`-separated.
    public let relativePath: String
    public internal(set) var size: Int64
    public internal(set) var modified: Date
    /// The device and inode the walk found at `path`: the file an upload must still find there.
    public var device: UInt64 = 0
    public var inode: UInt64 = 0
    /// The modification and status-change times in nanoseconds: with the inode and size, what
    /// `skipUnchanged: checksum` keeps a file's hash under (a content written and its mtime set
    /// back still changes the ctime, which no user can set).
    public var modifiedNanoseconds: Int64 = 0
    public var changedNanoseconds: Int64 = 0

    /// `INODE:SIZE:MTIME:CTIME`, the status a content hash is kept under. Written digit by digit
    /// into one buffer: made for every uploaded file, where interpolation cost 4,400 instructions.
    public var statusKey: String {
        // Filled from the end: the last number's last digit first.
        var bytes = [UInt8](repeating: 0, count: 4 * 21)
        var position = bytes.count
        func prepend(_ magnitude: UInt64, negative: Bool) {
            var rest = magnitude
            repeat {
                position -= 1
                bytes[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            if negative {
                position -= 1
                bytes[position] = UInt8(ascii: "-")
            }
        }
        func prepend(_ value: Int64) {
            prepend(value.magnitude, negative: value < 0)
            position -= 1
            bytes[position] = UInt8(ascii: ":")
        }
        prepend(changedNanoseconds)
        prepend(modifiedNanoseconds)
        prepend(size)
        prepend(inode, negative: false)
        return String(decoding: bytes[position...], as: UTF8.self)
    }
}

/// Something the walk could not see: a folder that cannot be listed, a name that is not UTF-8.
public struct WalkProblem: Sendable, CustomStringConvertible {
    /// The path (with U+FFFD for bytes that are not UTF-8).
    public let path: String
    public let message: String
    /// A file or folder inside the root that the job cannot upload: the run counts it as failed.
    /// (A missing root, or a link loop that was skipped on purpose, is not.)
    public let isFailure: Bool
    public var description: String { "\(path): \(message)" }
}

/// Walks a folder tree depth-first in sorted order, one file at a time: memory holds the
/// folders on the current path, never the whole tree. Names starting with `.` are skipped
/// unless `hidden`; symbolic links are skipped unless `followSymlinks`, and then a link back
/// to a folder on the current path (a loop) is skipped. A root that is a file is walked as
/// that one file, named by its last component (`hoist cp FILE`).
public struct FileWalker: Sequence, IteratorProtocol {
    private struct Frame {
        let path: String
        let relative: String
        /// The folder's entries in walk order, each with what `lstat` said (nil: it failed, with errno).
        var entries: [Entry]
        var next = 0
        let identity: FileIdentity
    }

    private struct Entry {
        let name: String
        /// What `lstat` said (nil: it failed, with `error`).
        let status: Status?
        let error: Int32
        /// A folder to walk into (a link to one, when links are followed).
        let isFolder: Bool
        /// The name's bytes, and a `/` after a folder's: entries sort by it.
        let key: [UInt8]

        init(name: String, status: Status?, error: Int32, isFolder: Bool) {
            self.name = name
            self.status = status
            self.error = error
            self.isFolder = isFolder
            key = isFolder ? Array(name.utf8) + [0x2F] : Array(name.utf8)
        }
    }

    /// The part of a `stat` the walk keeps (a whole `stat` is 144 bytes, moved by every sort).
    private struct Status {
        let mode: UInt32
        let size: Int64
        let seconds: Int
        let nanoseconds: Int
        let device: UInt64
        let inode: UInt64
        let changed: Int64

        init(_ info: stat) {
            mode = UInt32(info.st_mode)
            size = Int64(info.st_size)
            seconds = Int(info.st_mtim.tv_sec)
            nanoseconds = Int(info.st_mtim.tv_nsec)
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            changed = Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec)
        }

        var kind: UInt32 { mode & UInt32(S_IFMT) }
    }

    private struct FileIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    private var stack: [Frame] = []
    private var ancestors: Set<FileIdentity> = []
    private let hidden: Bool
    private let followSymlinks: Bool
    /// A folder below the root (its relative path) that is not walked: a local bucket inside it.
    private let skipping: String?
    /// Folders (absolute, links resolved) that a followed link may not lead into: the local
    /// bucket and the hooks' output folder, whose files the next run must not upload.
    private let fencedOff: [String]
    /// The root, when it is a file.
    private var single: WalkedFile?
    /// What could not be read, with why; the walk goes on without them.
    public private(set) var problems: [WalkProblem] = []
    /// The root as given, which names the links not followed when the walk ends.
    private let root: String
    /// Links not followed (`followSymlinks` off), told as one problem at the end of the walk.
    private var unfollowedLinks = 0
    private var firstUnfollowedLink = ""

    public init(root: String, hidden: Bool = false, followSymlinks: Bool = false, skipping: String? = nil, fencedOff: [String] = []) {
        self.hidden = hidden
        self.root = root
        self.followSymlinks = followSymlinks
        self.skipping = skipping
        self.fencedOff = fencedOff
        var info = stat()
        let found = stat(root, &info) == 0 || errno != ENOENT
        if found, (info.st_mode & S_IFMT) == S_IFDIR {
            push(path: root, relative: "", identity: FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
        } else if (info.st_mode & S_IFMT) == S_IFREG {
            // Named by the root's own name; read through a link's target (uploads open regular files).
            var link = stat()
            let isLink = lstat(root, &link) == 0 && (link.st_mode & S_IFMT) == S_IFLNK
            let path = isLink ? URL(fileURLWithPath: root).resolvingSymlinksInPath().path : root
            single = Self.file(path, relative: (root as NSString).lastPathComponent, Status(info))
        } else if found {
            // A missing root is the job's to tell (an error, or a note for an optional set).
            problems.append(WalkProblem(path: root, message: "not a readable folder", isFailure: false))
        }
    }

    private mutating func push(path: String, relative: String, identity: FileIdentity) {
        // FileManager lists as root would, whatever the folder's mode: ask the kernel first.
        guard access(path, R_OK | X_OK) == 0 else {
            problems.append(WalkProblem(path: path, message: "cannot list the folder: \(String(cString: strerror(errno))); its files are not uploaded",
                                        isFailure: true))
            return
        }
        do {
            var names = try FileManager.default.contentsOfDirectory(atPath: path)
            if !hidden { names.removeAll { $0.hasPrefix(".") } }
            // Entries are looked up relative to the folder (no path walk per name).
            let folder = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if folder >= 0 { close(folder) } }
            var entries = names.map { name -> Entry in
                var info = stat()
                guard folder >= 0, fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                    return Entry(name: name, status: nil, error: folder >= 0 ? errno : EACCES, isFolder: false)
                }
                var isFolder = (info.st_mode & S_IFMT) == S_IFDIR
                if !isFolder, followSymlinks, (info.st_mode & S_IFMT) == S_IFLNK {
                    var target = stat()
                    isFolder = fstatat(folder, name, &target, 0) == 0 && (target.st_mode & S_IFMT) == S_IFDIR
                }
                return Entry(name: name, status: Status(info), error: 0, isFolder: isFolder)
            }
            // Full paths in byte order (a folder `a` sorts as `a/`, after `a.txt` and `a-b`): the
            // order of a journal's rows by source, so a plan can read them alongside the walk.
            entries.sort { $0.key.lexicographicallyPrecedes($1.key) }
            stack.append(Frame(path: path, relative: relative, entries: entries, identity: identity))
            ancestors.insert(identity)
        } catch {
            problems.append(WalkProblem(path: path, message: "cannot list the folder; its files are not uploaded", isFailure: true))
        }
    }

    public mutating func next() -> WalkedFile? {
        if let single {
            self.single = nil
            return single
        }
        while var frame = stack.last {
            guard frame.next < frame.entries.count else {
                ancestors.remove(frame.identity)
                stack.removeLast()
                continue
            }
            let entry = frame.entries[frame.next]
            let name = entry.name
            frame.next += 1
            stack[stack.count - 1] = frame
            let path = frame.path + "/" + name
            let relative = frame.relative.isEmpty ? name : frame.relative + "/" + name
            guard var status = entry.status else {
                // Linux names are bytes; FileManager shows bytes that are not UTF-8 as U+FFFD, so
                // such a file cannot be opened by its name: fail it loudly rather than skip it.
                let why = entry.error
                if name.unicodeScalars.contains("\u{FFFD}") {
                    problems.append(WalkProblem(path: path, message: "the name is not valid UTF-8 (shown with U+FFFD): Hoist cannot upload it; rename it",
                                                isFailure: true))
                } else if why != ENOENT {
                    problems.append(WalkProblem(path: path, message: "cannot be read: \(String(cString: strerror(why)))", isFailure: true))
                }
                continue
            }
            var target = path
            if status.kind == UInt32(S_IFLNK) {
                guard followSymlinks else {
                    if unfollowedLinks == 0 { firstUnfollowedLink = relative }
                    unfollowedLinks += 1
                    continue
                }
                var info = stat()
                guard stat(path, &info) == 0 else {
                    let why = errno == ENOENT ? "does not exist" : "cannot be read: \(String(cString: strerror(errno)))"
                    problems.append(WalkProblem(path: path, message: "a symbolic link whose target \(why), skipped", isFailure: false))
                    continue
                }
                status = Status(info)
                // A followed link to a file is read through its target (uploads open regular files).
                target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
                if let fence = fencedOff.first(where: { target == $0 || target.hasPrefix($0 + "/") }) {
                    problems.append(WalkProblem(path: path, message: "a symbolic link into \(fence) (the local bucket or the hooks' output folder), skipped",
                                                isFailure: false))
                    continue
                }
            }
            let identity = FileIdentity(device: status.device, inode: status.inode)
            switch status.kind {
            case UInt32(S_IFDIR):
                if ancestors.contains(identity) {
                    problems.append(WalkProblem(path: path, message: "a link back to a folder above it (loop), skipped", isFailure: false))
                    continue
                }
                if relative == skipping { continue }
                push(path: path, relative: relative, identity: identity)
            case UInt32(S_IFREG):
                return Self.file(target, relative: relative, status)
            default:
                continue
            }
        }
        if unfollowedLinks > 0 {
            problems.append(WalkProblem(path: root, message: unfollowedLinks == 1
                ? "a symbolic link not followed: \(firstUnfollowedLink)"
                : "\(unfollowedLinks) symbolic links not followed (the first: \(firstUnfollowedLink))", isFailure: false))
            unfollowedLinks = 0
        }
        return nil
    }

    private static func file(_ path: String, relative: String, _ status: Status) -> WalkedFile {
        var file = WalkedFile(path: path, relativePath: relative, size: status.size,
                              modified: modified(seconds: status.seconds, nanoseconds: status.nanoseconds))
        file.device = status.device
        file.inode = status.inode
        file.modifiedNanoseconds = Int64(status.seconds) &* 1_000_000_000 &+ Int64(status.nanoseconds)
        file.changedNanoseconds = status.changed
        return file
    }

    /// A modification time as the walk keeps it. Some file systems (tmpfs, btrfs) keep any 64-bit
    /// time: clamped to years 1-9999, so templates, hooks and the journal always get a time they
    /// can represent.
    static func modified(seconds: Int, nanoseconds: Int) -> Date {
        Date(timeIntervalSince1970: Swift.min(Swift.max(Double(seconds) + Double(nanoseconds) / 1e9, -62_135_596_800), 253_402_300_799))
    }
}

extension WalkedFile {
    /// Takes the size and modification time of `info`, the file as it is now, as the walk reads them.
    mutating func update(from info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = FileWalker.modified(seconds: Int(info.st_mtim.tv_sec), nanoseconds: Int(info.st_mtim.tv_nsec))
        modifiedNanoseconds = Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec)
        changedNanoseconds = Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec)
    }
}
