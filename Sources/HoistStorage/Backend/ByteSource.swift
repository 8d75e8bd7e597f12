import Foundation

/// The bytes of one upload: a `Data` in memory or a file read piece by piece, so a large file
/// never sits in memory whole.
public final class ByteSource: Sendable {
    private enum Storage: Sendable {
        case memory(Data)
        case file(path: String)
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

    /// The file at `path`, as it is now.
    /// - Throws: `objectNotFound` when it does not exist, `unauthorized` when it cannot be
    ///   read, `invalidArgument` when it is not a regular file.
    public convenience init(filePath path: String) throws {
        try self.init(filePath: path, status: FileStatus(path))
    }

    /// The regular file at `path` itself, not what a symbolic link there leads to: `putFile`
    /// refuses links (one `lstat` where a check for a link and then a `stat` took two).
    /// - Throws: as `init(filePath:)`; `invalidArgument` for a link.
    convenience init(regularFileAt path: String) throws {
        try self.init(filePath: path, status: FileStatus(path, followingLinks: false))
    }

    private init(filePath path: String, status: FileStatus?) throws {
        guard let status else {
            throw StorageFailure(.objectNotFound, "File \(path) does not exist.", details: ["file": path])
        }
        guard status.isRegular else {
            throw StorageFailure(.invalidArgument, "\(path) is not a regular file.", details: ["file": path])
        }
        guard access(path, R_OK) == 0 else {
            throw StorageFailure(.unauthorized, "Permission denied reading file \(path).", details: ["file": path])
        }
        storage = .file(path: path)
        size = status.size
        opened = status
    }

    /// The file's size and modification time when the source was made; nil for bytes in memory.
    private let opened: FileStatus?

    /// Why the file is no longer the one this source was made from (its size or modification
    /// time differ, or it is gone), or nil when it is unchanged (and for bytes in memory).
    public func changeSinceOpened() -> String? {
        guard let path = filePath, let opened else { return nil }
        guard let now = FileStatus(path) else { return "\(path) was removed while it was uploaded" }
        if now.size != opened.size {
            return "\(path) changed while it was uploaded: its size went from \(opened.size) to \(now.size) bytes"
        }
        if (now.modified, now.modifiedNanoseconds) != (opened.modified, opened.modifiedNanoseconds) { return "\(path) changed while it was uploaded: it was modified" }
        return nil
    }

    /// What a backend says when it stops before storing an object because the file changed
    /// while it was read; nil when the file is as it was opened.
    public func unchangedOrWhy() -> String? {
        changeSinceOpened().map { "\($0); nothing was stored. Upload it again once it is complete." }
    }

    /// The local file's path, for a file source.
    public var filePath: String? {
        if case .file(let path) = storage { return path }
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
        case .memory(let data): return Reader(data: data, offset: offset)
        case .file(let path):
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw StorageFailure(.unauthorized, "Cannot open file \(path).", details: ["file": path])
            }
            return Reader(descriptor: descriptor, path: path, offset: offset, end: size)
        }
    }

    /// Reads a source forward, one piece at a time. Not for sharing between threads.
    public final class Reader {
        private let data: Data?
        /// A file's open descriptor (read with `pread` at `offset`: no seek, no `fstat` per
        /// piece as `FileHandle` makes), or -1.
        private let descriptor: Int32
        private let path: String?
        private let end: Int64
        /// Where the next `read` starts.
        public private(set) var offset: Int64

        fileprivate init(data: Data, offset: Int64) {
            self.data = data
            descriptor = -1
            path = nil
            end = Int64(data.count)
            self.offset = offset
        }

        fileprivate init(descriptor: Int32, path: String, offset: Int64, end: Int64) {
            data = nil
            self.descriptor = descriptor
            self.path = path
            self.end = end
            self.offset = offset
        }

        deinit { if descriptor >= 0 { close(descriptor) } }

        /// Up to `count` bytes; empty at the end of the source.
        public func read(upTo count: Int) throws -> Data {
            let piece: Data
            if let data {
                let start = data.startIndex + Int(offset)
                piece = data[start..<min(start + count, data.endIndex)]
            } else if descriptor >= 0 {
                piece = try readFile(upTo: Int(max(0, min(Int64(count), end - offset))))
            } else {
                piece = Data()
            }
            offset += Int64(piece.count)
            return piece
        }

        /// Up to `count` bytes of the file from `offset`: fewer only at its end.
        private func readFile(upTo count: Int) throws -> Data {
            guard count > 0 else { return Data() }
            var piece = Data(count: count)
            let (got, failure) = piece.withUnsafeMutableBytes { buffer -> (Int, Int32) in
                var got = 0
                while got < count {
                    let read = pread(descriptor, buffer.baseAddress! + got, count - got, off_t(offset) + off_t(got))
                    if read < 0, errno == EINTR { continue }
                    if read < 0 { return (got, errno) }
                    if read == 0 { break }
                    got += read
                }
                return (got, 0)
            }
            guard failure == 0 else {
                throw StorageFailure(
                    .unknown, "Reading \(path ?? "file") failed: \(String(cString: strerror(failure))).", details: ["file": path ?? ""])
            }
            if got < count { piece.removeSubrange(got...) }
            return piece
        }
    }
}

/// What `stat(2)` says of a path: enough to tell a regular file, its size, and whether it changed.
struct FileStatus: Sendable, Equatable {
    let isRegular: Bool
    let size: Int64
    /// Seconds and nanoseconds of the last modification.
    let modified: Int64
    let modifiedNanoseconds: Int

    init?(_ path: String, followingLinks: Bool = true) {
        var status = stat()
        guard (followingLinks ? stat(path, &status) : lstat(path, &status)) == 0 else { return nil }
        isRegular = (status.st_mode & S_IFMT) == S_IFREG
        size = Int64(status.st_size)
        modified = Int64(status.st_mtim.tv_sec)
        modifiedNanoseconds = Int(status.st_mtim.tv_nsec)
    }
}
