import Foundation
import HoistStorage

/// A crontab schedule: five fields (minute hour day-of-month month day-of-week) with `*`, lists,
/// ranges, steps and names (`jan`, `mon`), or one of `@hourly`, `@daily`, `@weekly`, `@monthly`,
/// `@yearly`.
public struct CronExpression: Decodable, Sendable, Equatable, CustomStringConvertible {
    /// The expression as written.
    public let text: String
    /// The allowed values of each field.
    public let fields: [Set<Int>]

    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, CronExpression.parse) }

    private init(text: String, fields: [Set<Int>]) {
        self.text = text
        self.fields = fields
    }

    public var description: String { text }

    static let shorthands = ["@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                             "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"]
    static let specs: [(name: String, range: ClosedRange<Int>, names: [String])] = [
        ("minute", 0...59, []), ("hour", 0...23, []), ("day of month", 1...31, []),
        ("month", 1...12, ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]),
        ("day of week", 0...7, ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
    ]

    public static func parse(_ text: String) throws(ValueError) -> CronExpression {
        let expanded = shorthands[text.trimmingCharacters(in: .whitespaces).lowercased()] ?? text
        let parts = expanded.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 5 else {
            throw ValueError("bad cron expression '\(text)': it needs 5 fields (minute hour day-of-month month day-of-week), found \(parts.count)")
        }
        var fields: [Set<Int>] = []
        for (part, spec) in zip(parts, specs) {
            fields.append(try field(String(part), spec, whole: text))
        }
        return CronExpression(text: text, fields: fields)
    }

    private static func field(_ text: String, _ spec: (name: String, range: ClosedRange<Int>, names: [String]), whole: String)
        throws(ValueError) -> Set<Int>
    {
        func value(_ token: Substring) throws(ValueError) -> Int {
            if let number = Int(token) {
                guard spec.range.contains(number) else {
                    throw ValueError("bad cron expression '\(whole)': \(spec.name) \(number) is out of range \(spec.range.lowerBound)-\(spec.range.upperBound)")
                }
                return number
            }
            if let index = spec.names.firstIndex(of: token.lowercased()) {
                return spec.name == "month" ? index + 1 : index
            }
            throw ValueError("bad cron expression '\(whole)': '\(token)' is not a valid \(spec.name)")
        }
        var result = Set<Int>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let stepParts = item.split(separator: "/", omittingEmptySubsequences: false)
            guard stepParts.count <= 2, !item.isEmpty else {
                throw ValueError("bad cron expression '\(whole)': '\(item)' is not a valid \(spec.name)")
            }
            var step = 1
            if stepParts.count == 2 {
                guard let parsed = Int(stepParts[1]), parsed > 0 else {
                    throw ValueError("bad cron expression '\(whole)': step '\(stepParts[1])' in the \(spec.name) field must be a positive number")
                }
                step = parsed
            }
            let base = stepParts[0]
            var low = spec.range.lowerBound, high = spec.range.upperBound
            if base != "*" {
                let bounds = base.split(separator: "-", omittingEmptySubsequences: false)
                guard bounds.count <= 2 else {
                    throw ValueError("bad cron expression '\(whole)': '\(item)' is not a valid \(spec.name)")
                }
                low = try value(bounds[0])
                high = bounds.count == 2 ? try value(bounds[1]) : (stepParts.count == 2 ? spec.range.upperBound : low)
                guard low <= high else {
                    throw ValueError("bad cron expression '\(whole)': range \(base) in the \(spec.name) field goes backwards")
                }
            }
            for number in stride(from: low, through: high, by: step) { result.insert(number) }
        }
        if spec.name == "day of week", result.contains(7) { result.remove(7); result.insert(0) }
        return result
    }
}
