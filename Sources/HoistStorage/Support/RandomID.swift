import Foundation
import Synchronization
private import CHoistSystem

/// Identifiers made per upload, without Foundation's `UUID()`: on Linux that opens, reads and
/// closes `/dev/urandom` for every UUID (three system calls, seven UUIDs per small upload in
/// `strace`). These take their bytes from the system's CSPRNG 4 KiB at a time (one `getrandom(2)`
/// per 256 UUIDs), each byte handed out once.
enum RandomID {
    /// Random bytes from `getrandom(2)`, not yet handed out.
    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var used = 4096
    }
    private static let pool = Mutex(Pool())

    /// A random (version 4) UUID from the system's CSPRNG, as unguessable as Foundation's:
    /// download tokens are made with it.
    static func uuid() -> UUID {
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { target in
            pool.withLock { pool in
                if pool.used + 16 > pool.bytes.count {
                    pool.bytes.withUnsafeMutableBytes { buffer in
                        var filled = 0
                        while filled < buffer.count {
                            let got = hoist_getrandom(buffer.baseAddress! + filled, UInt(buffer.count - filled))
                            if got > 0 {
                                filled += got
                            } else if errno != EINTR {
                                // No getrandom (a kernel before 3.17): the standard library's generator.
                                var generator = SystemRandomNumberGenerator()
                                for index in stride(from: filled & ~7, to: buffer.count, by: 8) {
                                    buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: index, as: UInt64.self)
                                }
                                filled = buffer.count
                            }
                        }
                    }
                    pool.used = 0
                }
                pool.bytes.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[pool.used..<pool.used + 16])) }
                // Each byte is given out once: zeroed so no later caller can see it.
                for index in pool.used..<pool.used + 16 { pool.bytes[index] = 0 }
                pool.used += 16
            }
            target[6] = (target[6] & 0x0F) | 0x40   // version 4
            target[8] = (target[8] & 0x3F) | 0x80   // RFC 4122 variant
        }
        return UUID(uuid: uuid)
    }

    /// `uuid()` as lowercase text, as download tokens and session ids are written (made here:
    /// `uuidString.lowercased()` made two strings, every upload).
    static func lowercased() -> String {
        // Written in place into the 36 bytes (appends cost 1,700 instructions a call, three calls a small upload).
        var text = [UInt8](repeating: UInt8(ascii: "-"), count: 36)
        var position = 0
        withUnsafeBytes(of: uuid().uuid) { bytes in
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 { position += 1 }
                text[position] = hexDigit(bytes[index] >> 4)
                text[position + 1] = hexDigit(bytes[index] & 15)
                position += 2
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    private static let counter = Atomic<UInt64>(0)

    /// A handle unique in this process (observer handles: the SDK only promises a string that
    /// `removeObserver(withHandle:)` takes back), with no system call.
    static func handle() -> String {
        "h" + String(counter.add(1, ordering: .relaxed).newValue)
    }
}
