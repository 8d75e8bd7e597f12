import Foundation
import HoistStorage

/// A rate in bytes per second: `50MB/s`, `512KiB/s`.
public struct ByteRate: Decodable, Sendable, Equatable {
    public let bytesPerSecond: Int64
    public init(bytesPerSecond: Int64) { self.bytesPerSecond = bytesPerSecond }
    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, ByteRate.parse) }

    public static func parse(_ text: String) throws(ValueError) -> ByteRate {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasSuffix("/s") else {
            throw ValueError("bad rate '\(text)': write a size per second, such as 50MB/s or 512KiB/s")
        }
        let size: ByteSize
        do {
            size = try ByteSize.parse(String(trimmed.dropLast(2)))
        } catch {
            if error.message.contains("too large") { throw ValueError("rate '\(text)' is too large: at most 8 EiB/s") }
            if let suggestion = ByteSize.suggestion(for: String(trimmed.dropLast(2))) {
                throw ValueError("bad rate '\(text)': units are case-sensitive (did you mean '\(suggestion)/s'?)")
            }
            throw ValueError("bad rate '\(text)': write a size per second, such as 50MB/s or 512KiB/s")
        }
        guard size.bytes > 0 else { throw ValueError("bad rate '\(text)': it must be more than 0") }
        return ByteRate(bytesPerSecond: size.bytes)
    }
}
