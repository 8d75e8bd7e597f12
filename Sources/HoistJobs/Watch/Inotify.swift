import Glibc

/// Linux inotify, thinly: one descriptor, watches added by folder, and the kernel's records read
/// into values. The raw buffer is parsed here and nowhere else (`parse`).
final class Inotify {
    /// One record the kernel wrote.
    struct Event: Equatable {
        let watch: Int32
        let mask: UInt32
        let cookie: UInt32
        /// The name in the watched folder, empty for an event of the folder itself.
        let name: String

        var isFolder: Bool { mask & UInt32(IN_ISDIR) != 0 }
        var overflowed: Bool { mask & UInt32(IN_Q_OVERFLOW) != 0 }
        /// The watch is gone (its folder deleted or moved off the file system, or removed).
        var watchEnded: Bool { mask & UInt32(IN_IGNORED) != 0 }
    }

    /// Why a watch could not be added.
    struct AddFailure: Error {
        let errno: Int32
        /// The user's watches are all taken (`fs.inotify.max_user_watches`).
        var limitReached: Bool { errno == ENOSPC }
    }

    /// What the watcher listens for on each folder.
    static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

    let descriptor: Int32

    /// Nil with errno when the kernel gives no instance (`fs.inotify.max_user_instances`).
    init?() {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if descriptor < 0 { return nil }
    }

    deinit { close(descriptor) }

    /// Watches `folder`: its watch descriptor (the same one again for a folder watched already).
    func add(_ folder: String) -> Result<Int32, AddFailure> {
        let watch = inotify_add_watch(descriptor, folder, Self.mask)
        return watch < 0 ? .failure(AddFailure(errno: errno)) : .success(watch)
    }

    func remove(_ watch: Int32) { _ = inotify_rm_watch(descriptor, watch) }

    /// The records waiting now (none when there are none: the descriptor does not block).
    func read() -> [Event] {
        var events: [Event] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { return events }
            events += Self.parse(buffer[0..<count])
        }
    }

    /// The records in `bytes`: each a `struct inotify_event` (wd, mask, cookie, len) and `len`
    /// bytes of NUL-padded name.
    static func parse(_ bytes: ArraySlice<UInt8>) -> [Event] {
        var events: [Event] = []
        var offset = bytes.startIndex
        func word(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        }
        while bytes.endIndex - offset >= 16 {
            let length = Int(word(offset + 12))
            let nameStart = offset + 16
            guard nameStart + length <= bytes.endIndex else { break }
            let name = bytes[nameStart..<(nameStart + length)].prefix { $0 != 0 }
            events.append(Event(watch: Int32(bitPattern: word(offset)), mask: word(offset + 4), cookie: word(offset + 8),
                                name: String(decoding: name, as: UTF8.self)))
            offset = nameStart + length
        }
        return events
    }
}
