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

    /// A file just opened (`openRegular`, `openWalked`), with what `fstat` says of it.
    init(file: OpenFile, info: stat) {
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

        init(data: Data, offset: Int64, base: Int64, end: Int64) {
            self.data = data
            file = nil
            self.base = base
            self.end = end
            self.offset = offset
        }

        init(file: OpenFile, offset: Int64, base: Int64, end: Int64) {
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
