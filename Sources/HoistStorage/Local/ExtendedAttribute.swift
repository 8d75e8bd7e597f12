import Foundation
private import CHoistSystem

/// The extended-attribute calls a local bucket makes (`fsetxattr`, `getxattr`): the thin
/// wrapper, the only place they touch pointers. Values are bytes; what they mean is the caller's.
package enum ExtendedAttribute {
    /// The most a value may hold: the kernel's own limit for one value (`XATTR_SIZE_MAX`), so a
    /// value read back is never larger, whatever put it there.
    package static let limit = 64 << 10

    /// What setting an attribute did.
    package enum Setting: Equatable {
        case set
        /// The file system does not take it: too large (ENOSPC, E2BIG, ERANGE: ext4 keeps an
        /// inode's attributes in one block) or no such attributes at all (ENOTSUP). The errno.
        case refused(Int32)
    }

    /// Sets attribute `name` of the open file `descriptor` to `value`, created or replaced.
    /// - Throws: the `errno` of any other failure (EIO, EPERM, EROFS...).
    package static func set(_ name: String, to value: [UInt8], on descriptor: Int32) throws(POSIXError) -> Setting {
        guard value.count <= limit else { return .refused(E2BIG) }
        let result = value.withUnsafeBytes { hoist_set_attribute(descriptor, name, $0.baseAddress, UInt($0.count)) }
        if result == 0 { return .set }
        let code = errno
        switch code {
        case ENOSPC, E2BIG, ERANGE, ENOTSUP, EOPNOTSUPP: return .refused(code)
        default: throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }

    /// What reading an attribute found.
    package enum Reading: Equatable {
        case value([UInt8])
        /// The file has no such attribute (ENODATA), or its file system none at all (ENOTSUP).
        case absent
        /// It could not be read (a value over `limit`, /proc missing, EIO...): the errno.
        case unreadable(Int32)
    }

    /// Attribute `name` of the file `located` (an `O_PATH` descriptor: read through
    /// /proc/self/fd, the file not opened), at most `limit` bytes.
    package static func read(_ name: String, ofLocated located: Int32) -> Reading {
        read { hoist_get_attribute_located(located, name, $0, $1) }
    }

    /// Attribute `name` of the open file `descriptor`, at most `limit` bytes.
    package static func read(_ name: String, ofOpen descriptor: Int32) -> Reading {
        read { hoist_get_attribute(descriptor, name, $0, $1) }
    }

    /// One call with a buffer that holds what a local bucket writes (a few hundred bytes), a
    /// second with `limit` only when the value is longer.
    private static func read(_ call: (UnsafeMutableRawPointer?, UInt) -> Int) -> Reading {
        for capacity in [1024, limit] {
            var code: Int32 = 0
            let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
                let length = call(buffer.baseAddress, UInt(capacity))
                if length < 0 { code = errno }
                count = max(0, min(length, capacity))
            }
            if code == 0 { return .value(bytes) }
            switch code {
            case ERANGE where capacity < limit: continue
            case ENODATA, ENOTSUP, EOPNOTSUPP: return .absent
            default: return .unreadable(code)
            }
        }
        return .unreadable(ERANGE)
    }
}
