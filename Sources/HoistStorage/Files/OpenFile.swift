import Foundation


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

extension stat {
    /// The status change time in nanoseconds: it moves on with every write whatever the mtime
    /// says, and no user can set it back.
    package var ctimeNanoseconds: Int64 { Int64(st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(st_ctim.tv_nsec) }
}

/// What `stat(2)` says of a path: enough to tell a regular file, its size, and whether it changed.
struct FileStatus: Sendable, Equatable {
    let isRegular: Bool
    let size: Int64
    /// Seconds and nanoseconds of the last modification.
    let modified: Int64
    let modifiedNanoseconds: Int
    /// The status change time, in nanoseconds: moves on with every write, whatever the mtime says
    /// (and when a link to the file is made or removed).
    let changed: Int64
    /// How many names the file has.
    let links: UInt64

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
        changed = status.ctimeNanoseconds
        links = UInt64(status.st_nlink)
    }
}
