import Foundation
import Synchronization

/// Identifiers made per upload, without Foundation's `UUID()`: on Linux that opens, reads and
/// closes `/dev/urandom` for every UUID (three system calls, seven UUIDs per small upload in
/// `strace`); these cost two `getrandom(2)` calls, or none.
enum RandomID {
    /// A random (version 4) UUID from the system's CSPRNG (`SystemRandomNumberGenerator`:
    /// `getrandom(2)` on Linux, no file opened), as unguessable as Foundation's: download tokens
    /// are made with it.
    static func uuid() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var bytes = (generator.next() as UInt64, generator.next() as UInt64)
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { target in
            withUnsafeBytes(of: &bytes) { target.copyMemory(from: $0) }
            target[6] = (target[6] & 0x0F) | 0x40   // version 4
            target[8] = (target[8] & 0x3F) | 0x80   // RFC 4122 variant
        }
        return UUID(uuid: uuid)
    }

    /// `uuid()` as lowercase text, as download tokens and session ids are written.
    static func lowercased() -> String { uuid().uuidString.lowercased() }

    private static let counter = Atomic<UInt64>(0)

    /// A handle unique in this process (observer handles: the SDK only promises a string that
    /// `removeObserver(withHandle:)` takes back), with no system call.
    static func handle() -> String {
        "h" + String(counter.add(1, ordering: .relaxed).newValue)
    }
}
