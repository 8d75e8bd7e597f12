import Foundation

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

    /// Bytes in memory.
    public init(data: Data) {
        storage = .memory(data)
        size = Int64(data.count)
        opened = nil
    }

    /// The file at `path`, as it is now, opened.
    /// - Throws: `objectNotFound` when it does not exist, `unauthorized` when it cannot be
    ///   read, `invalidArgument` when it is not a regular file.
    public convenience init(filePath path: String) throws {
        try self.init(opening: path, followingLinks: true, expecting: nil)
    }

    /// The regular file at `path` itself, not what a symbolic link there leads to: `putFile`
    /// refuses links. With `identity` (a device and an inode), it must be that very file: a job
    /// passes the file its walk found, so a file or folder swapped in after that check is not
    /// read (`ByteSourceTests.aFileSwappedAfterItsCheckIsNotRead`).
    /// - Throws: as `init(filePath:)`; `invalidArgument` for a link or another file.
    convenience init(regularFileAt path: String, expecting identity: (device: UInt64, inode: UInt64)? = nil) throws {
        try self.init(opening: path, followingLinks: false, expecting: identity)
    }

    /// Opens the file once: its checks (`fstat` of what was opened) and every read of it are of
    /// the same file, whatever happens at `path` meanwhile. `O_NONBLOCK` keeps a FIFO put there
    /// from blocking the open; it is refused as not regular.
    private init(opening path: String, followingLinks: Bool, expecting identity: (device: UInt64, inode: UInt64)?) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (followingLinks ? 0 : O_NOFOLLOW))
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR:
                throw StorageFailure(.objectNotFound, "File \(path) does not exist.", details: ["file": path])
            case ELOOP where !followingLinks:
                throw StorageFailure(.invalidArgument, "\(path) is not a regular file.", details: ["file": path])
            case EACCES, EPERM:
                throw StorageFailure(.unauthorized, "Permission denied reading file \(path).", details: ["file": path])
            default:
                throw StorageFailure(.unknown, "Cannot open \(path): \(String(cString: strerror(code))).", details: ["file": path])
            }
        }
        let file = OpenFile(path: path, descriptor: descriptor)
        guard let info = file.status(), (info.st_mode & S_IFMT) == S_IFREG else {
            throw StorageFailure(.invalidArgument, "\(path) is not a regular file.", details: ["file": path])
        }
        if let identity, (UInt64(info.st_dev), UInt64(info.st_ino)) != identity {
            throw StorageFailure(.invalidArgument, "\(path) was replaced after it was checked: not read.", details: ["file": path])
        }
        storage = .file(file)
        opened = FileStatus(info)
        size = opened!.size
    }

    /// The file's size and modification time when it was opened; nil for bytes in memory.
    private let opened: FileStatus?

    /// Why the file is no longer as it was opened (its size or modification time differ), or nil
    /// when it is unchanged (and for bytes in memory). The open file is asked, not its path: what
    /// matters is whether the bytes read are the bytes it had. A file written over in place is
    /// caught; one replaced by another (saved anew, renamed over) or removed was read whole as it
    /// was, and the next run finds the new one.
    public func changeSinceOpened() -> String? {
        guard case .file(let file) = storage, let opened else { return nil }
        guard let info = file.status() else { return "\(file.path) could not be checked after it was uploaded" }
        let now = FileStatus(info)
        if now.size != opened.size {
            return "\(file.path) changed while it was uploaded: its size went from \(opened.size) to \(now.size) bytes"
        }
        if (now.modified, now.modifiedNanoseconds) != (opened.modified, opened.modifiedNanoseconds) {
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
        case .memory(let data): Reader(data: data, offset: offset)
        case .file(let file): Reader(file: file, offset: offset, end: size)
        }
    }

    /// Reads a source forward, one piece at a time. Not for sharing between threads.
    public final class Reader {
        private let data: Data?
        /// The source's open file (read with `pread` at `offset`: no seek, no `fstat` per
        /// piece as `FileHandle` makes).
        private let file: OpenFile?
        private let end: Int64
        /// Where the next `read` starts.
        public private(set) var offset: Int64

        fileprivate init(data: Data, offset: Int64) {
            self.data = data
            file = nil
            end = Int64(data.count)
            self.offset = offset
        }

        fileprivate init(file: OpenFile, offset: Int64, end: Int64) {
            data = nil
            self.file = file
            self.end = end
            self.offset = offset
        }

        /// Up to `count` bytes; empty at the end of the source.
        public func read(upTo count: Int) throws -> Data {
            let piece: Data
            if let data {
                let start = data.startIndex + Int(offset)
                piece = data[start..<min(start + count, data.endIndex)]
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
            let got = piece.withUnsafeMutableBytes { file.read(into: $0, at: offset) }
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
    }
}
