/// A file pattern: `*` (any run of characters but `/`), `?` (one character but `/`), `**` (any
/// run of folders), `[a-z]` and `[!a-z]` (one character of a class), `{a,b}` (alternatives).
/// A pattern without `/` matches a file's name in any folder; one with `/` matches the whole
/// path relative to the file set's root.
public struct Glob: Decodable, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    private let alternatives: [[Token]]
    private let matchesNameOnly: Bool

    enum Token: Equatable, Sendable {
        case literal(Character)
        case any            // ?
        case star           // *
        case globstar       // ** (crosses /)
        case globstarSlash  // **/ : zero or more whole folders
        case set([ClosedRange<Character>], negated: Bool)
    }

    public init(from decoder: any Decoder) throws { self = try parseScalar(decoder, Glob.init(parsing:)) }

    public init(parsing pattern: String) throws(ValueError) {
        guard !pattern.isEmpty else { throw ValueError("bad glob '': a pattern cannot be empty") }
        self.pattern = pattern
        matchesNameOnly = !pattern.contains("/")
        var tokens: [[Token]] = []
        for alternative in try Self.expandBraces(pattern) {
            tokens.append(try Self.tokenize(alternative, whole: pattern))
        }
        alternatives = tokens
    }

    public var description: String { pattern }

    /// True when `path` (relative, `/`-separated) matches.
    public func matches(_ path: String) -> Bool {
        let subject: Substring
        if matchesNameOnly, let slash = path.lastIndex(of: "/") {
            subject = path[path.index(after: slash)...]
        } else {
            subject = Substring(path)
        }
        let characters = Array(subject)
        return alternatives.contains { Self.match($0[...], characters[...]) }
    }

    private static func expandBraces(_ pattern: String) throws(ValueError) -> [String] {
        guard let open = pattern.firstIndex(of: "{") else {
            if pattern.contains("}") { throw ValueError("bad glob '\(pattern)': '}' without '{'") }
            return [pattern]
        }
        var depth = 0
        var close: String.Index?
        var commas: [String.Index] = []
        var index = open
        while index < pattern.endIndex {
            switch pattern[index] {
            case "{": depth += 1
            case "}":
                depth -= 1
                if depth == 0 { close = index }
            case "," where depth == 1: commas.append(index)
            default: break
            }
            if close != nil { break }
            index = pattern.index(after: index)
        }
        guard let close else { throw ValueError("bad glob '\(pattern)': '{' is never closed") }
        let head = pattern[..<open], tail = pattern[pattern.index(after: close)...]
        var options: [Substring] = []
        var start = pattern.index(after: open)
        for comma in commas {
            options.append(pattern[start..<comma])
            start = pattern.index(after: comma)
        }
        options.append(pattern[start..<close])
        var result: [String] = []
        for option in options {
            result += try expandBraces(String(head) + option + tail)
        }
        return result
    }

    private static func tokenize(_ pattern: String, whole: String) throws(ValueError) -> [Token] {
        var tokens: [Token] = []
        let characters = Array(pattern)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            switch character {
            case "?": tokens.append(.any)
            case "*":
                if index + 1 < characters.count, characters[index + 1] == "*" {
                    let atStart = index == 0 || characters[index - 1] == "/"
                    if atStart, index + 2 < characters.count, characters[index + 2] == "/" {
                        tokens.append(.globstarSlash)
                        index += 3
                        continue
                    }
                    tokens.append(.globstar)
                    index += 2
                    continue
                }
                tokens.append(.star)
            case "[":
                guard let end = characters[(index + 1)...].firstIndex(of: "]"), end > index + 1 else {
                    throw ValueError("bad glob '\(whole)': '[' is never closed")
                }
                var body = Array(characters[(index + 1)..<end])
                let negated = body.first == "!" || body.first == "^"
                if negated { body.removeFirst() }
                guard !body.isEmpty else { throw ValueError("bad glob '\(whole)': '[]' holds no characters") }
                var ranges: [ClosedRange<Character>] = []
                var i = 0
                while i < body.count {
                    if i + 2 < body.count, body[i + 1] == "-" {
                        guard body[i] <= body[i + 2] else {
                            throw ValueError("bad glob '\(whole)': range '\(body[i])-\(body[i + 2])' goes backwards")
                        }
                        ranges.append(body[i]...body[i + 2])
                        i += 3
                    } else {
                        ranges.append(body[i]...body[i])
                        i += 1
                    }
                }
                tokens.append(.set(ranges, negated: negated))
                index = end
            case "]": throw ValueError("bad glob '\(whole)': ']' without '['")
            default: tokens.append(.literal(character))
            }
            index += 1
        }
        return tokens
    }

    private static func match(_ tokens: ArraySlice<Token>, _ text: ArraySlice<Character>) -> Bool {
        guard let token = tokens.first else { return text.isEmpty }
        let rest = tokens.dropFirst()
        switch token {
        case .literal(let expected):
            guard text.first == expected else { return false }
            return match(rest, text.dropFirst())
        case .any:
            guard let first = text.first, first != "/" else { return false }
            return match(rest, text.dropFirst())
        case .set(let ranges, let negated):
            guard let first = text.first, first != "/", ranges.contains(where: { $0.contains(first) }) != negated else { return false }
            return match(rest, text.dropFirst())
        case .star:
            var remaining = text
            while true {
                if match(rest, remaining) { return true }
                guard let first = remaining.first, first != "/" else { return false }
                remaining = remaining.dropFirst()
            }
        case .globstar:
            var remaining = text
            while true {
                if match(rest, remaining) { return true }
                guard !remaining.isEmpty else { return false }
                remaining = remaining.dropFirst()
            }
        case .globstarSlash:
            var remaining = text
            while true {
                if match(rest, remaining) { return true }
                guard let slash = remaining.firstIndex(of: "/") else { return false }
                remaining = remaining[(slash + 1)...]
            }
        }
    }
}
