import Foundation

/// A text with placeholders filled per file: `{relpath}`, `{dir}`, `{name}`, `{stem}`, `{ext}`,
/// `{job}`, `{hostname}`, `{env:VAR}`, `{mtime:FORMAT}`, `{now:FORMAT}` (strftime formats, such
/// as `{mtime:%Y/%m/%d}`). `{{` and `}}` are literal braces.
public struct Template: Decodable, Sendable, Equatable, CustomStringConvertible {
    public let text: String
    let parts: [Part]

    /// `{relpath}`: a file's path below its root, a file set's default destination.
    public static let relativePath = try! Template(parsing: "{relpath}")

    enum Part: Equatable, Sendable {
        case literal(String)
        case relpath, dir, name, stem, ext, job, hostname
        case env(String)
        case mtime(String)
        case now(String)
    }

    /// Whether the text holds a `..` path segment of its own (between slashes, or at an end),
    /// which no file's values can make valid: `../../etc/{name}`.
    var hasLiteralParentSegment: Bool {
        let shape = parts.map { part in if case .literal(let text) = part { text } else { "\u{0}" } }.joined()
        return shape.split(separator: "/", omittingEmptySubsequences: false).contains("..")
    }

    public static let placeholders = ["relpath", "dir", "name", "stem", "ext", "job", "hostname", "env:VAR", "mtime:FORMAT", "now:FORMAT"]

    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, Template.init(parsing:)) }

    /// `literal` as written, then (when `relpath`) the file's path below its root: what
    /// `hoist cp` names objects with. Braces in `literal` are text, not placeholders.
    public init(literal: String, relpath: Bool = false) {
        text = literal.replacingOccurrences(of: "{", with: "{{").replacingOccurrences(of: "}", with: "}}") + (relpath ? "{relpath}" : "")
        parts = (literal.isEmpty ? [] : [.literal(literal)]) + (relpath ? [.relpath] : [])
    }

    public init(parsing text: String) throws(ValueError) {
        self.text = text
        // Templates become object names and header values: neither may hold a control character.
        if let control = text.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            throw ValueError("bad template '\(text.debugDescription.dropFirst().dropLast())': it contains the control character U+\(String(format: "%04X", control.value)), which object names and header values cannot")
        }
        var parts: [Part] = []
        var literal = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            let next = text.index(after: index)
            if character == "{", next < text.endIndex, text[next] == "{" {
                literal.append("{")
                index = text.index(after: next)
                continue
            }
            if character == "}", next < text.endIndex, text[next] == "}" {
                literal.append("}")
                index = text.index(after: next)
                continue
            }
            if character == "}" { throw ValueError("bad template '\(text)': '}' without '{' (write '}}' for a brace)") }
            guard character == "{" else {
                literal.append(character)
                index = next
                continue
            }
            guard let close = text[next...].firstIndex(of: "}") else {
                throw ValueError("bad template '\(text)': '{' is never closed")
            }
            if !literal.isEmpty { parts.append(.literal(literal)) }
            literal = ""
            parts.append(try Self.placeholder(String(text[next..<close]), in: text))
            index = text.index(after: close)
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    private static func placeholder(_ body: String, in text: String) throws(ValueError) -> Part {
        let (name, argument) = body.firstIndex(of: ":").map { (String(body[..<$0]), String(body[body.index(after: $0)...])) }
            ?? (body, nil)
        switch (name, argument) {
        case ("relpath", nil): return .relpath
        case ("dir", nil): return .dir
        case ("name", nil): return .name
        case ("stem", nil): return .stem
        case ("ext", nil): return .ext
        case ("job", nil): return .job
        case ("hostname", nil): return .hostname
        case ("env", let variable?) where !variable.isEmpty: return .env(variable)
        case ("mtime", let format?) where !format.isEmpty: return .mtime(format)
        case ("now", let format?) where !format.isEmpty: return .now(format)
        case ("env", _), ("mtime", _), ("now", _):
            throw ValueError("bad template '\(text)': {\(name)} needs an argument, as {\(name):\(name == "env" ? "VAR" : "%Y-%m-%d")}")
        default:
            throw ValueError("bad template '\(text)': unknown placeholder {\(body)}; use one of "
                + placeholders.map { "{\($0)}" }.joined(separator: ", "))
        }
    }

    public var description: String { text }

    /// What a template is filled with for one file.
    public struct Context: Sendable {
        /// The path relative to the file set's root, `/`-separated.
        public var relativePath: String
        public var modified: Date
        public var job: String
        public var now: Date
        public var hostname: String
        public var environment: [String: String]
        public var timeZone: TimeZone

        public init(relativePath: String, modified: Date, job: String, now: Date = Date(),
                    hostname: String = ProcessInfo.processInfo.hostName,
                    environment: [String: String] = ProcessInfo.processInfo.environment, timeZone: TimeZone = .current) {
            self.relativePath = relativePath
            self.modified = modified
            self.job = job
            self.now = now
            self.hostname = hostname
            self.environment = environment
            self.timeZone = timeZone
        }
    }

    /// The filled-in text. - Throws: `ValueError` for an unset `{env:VAR}`.
    public func render(_ context: Context) throws(ValueError) -> String {
        let path = context.relativePath
        // The common destinations (`{relpath}`, `prefix/{relpath}`) need no splitting of the path.
        if parts.allSatisfy({ if case .literal = $0 { true } else { $0 == .relpath } }) {
            var result = ""
            for part in parts {
                if case .literal(let text) = part { result += text } else { result += path }
            }
            return result
        }
        let slash = path.lastIndex(of: "/")
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        var result = ""
        for part in parts {
            switch part {
            case .literal(let text): result += text
            case .relpath: result += path
            case .dir: result += slash.map { String(path[..<$0]) } ?? ""
            case .name: result += name
            case .stem: result += dot.map { String(name[..<$0]) } ?? name
            case .ext: result += dot.map { String(name[name.index(after: $0)...]) } ?? ""
            case .job: result += context.job
            case .hostname: result += context.hostname
            case .env(let variable):
                guard let value = context.environment[variable] else {
                    throw ValueError("template '\(text)': environment variable \(variable) is not set")
                }
                result += value
            case .mtime(let format): result += Self.strftime(format, context.modified, context.timeZone)
            case .now(let format): result += Self.strftime(format, context.now, context.timeZone)
            }
        }
        return result
    }

    static func strftime(_ format: String, _ date: Date, _ zone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
        var moment = tm()
        moment.tm_year = Int32(clamping: (c.year ?? 1970) - 1900)
        moment.tm_mon = Int32(clamping: (c.month ?? 1) - 1)
        moment.tm_mday = Int32(clamping: c.day ?? 1)
        moment.tm_hour = Int32(clamping: c.hour ?? 0)
        moment.tm_min = Int32(clamping: c.minute ?? 0)
        moment.tm_sec = Int32(clamping: c.second ?? 0)
        moment.tm_wday = Int32(clamping: (c.weekday ?? 1) - 1)
        moment.tm_yday = Int32(clamping: (calendar.ordinality(of: .day, in: .year, for: date) ?? 1) - 1)
        var buffer = [CChar](repeating: 0, count: 256)
        let count = Foundation.strftime(&buffer, buffer.count, format, &moment)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
