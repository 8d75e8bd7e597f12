import Foundation
import HoistStorage

/// A span of time: `500ms`, `30s`, `5m`, `2h`, `1d`, or a number of seconds.
public struct TimeSpan: Decodable, Sendable, Equatable {
    public let seconds: Double
    public init(seconds: Double) { self.seconds = seconds }
    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, TimeSpan.parse) }
    /// The longest span a manifest may give: 100 years, so any use of it stays a finite number.
    static let longest = 100 * 365.25 * 86400

    public static func parse(_ text: String) throws(ValueError) -> TimeSpan {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var seconds: Double?
        for (unit, factor) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0)] where trimmed.hasSuffix(unit) {
            if let value = Double(trimmed.dropLast(unit.count)), value >= 0 {
                seconds = value * factor
                break
            }
        }
        if seconds == nil, let value = Double(trimmed), value >= 0 { seconds = value }
        guard let seconds, !seconds.isNaN else {
            throw ValueError("bad duration '\(text)': write a number with ms, s, m, h or d, such as 30s or 5m")
        }
        guard seconds <= TimeSpan.longest else { throw ValueError("duration '\(text)' is too long: at most 100 years") }
        return TimeSpan(seconds: seconds)
    }
}
