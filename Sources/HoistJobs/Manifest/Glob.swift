import HoistStorage

/// A file pattern: `*` (any run of characters but `/`), `?` (one character but `/`), `**` (any
/// run of folders), `[a-z]` and `[!a-z]` (one character of a class), `{a,b}` (alternatives).
/// A pattern without `/` matches a file's name in any folder; one with `/` matches the whole
/// path relative to the file set's root.
public struct Glob: Decodable, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    private let alternatives: [[Token]]
    private let matchesNameOnly: Bool
    /// Letters match whatever their case (a file set's `ignoreCase`).
    public let ignoresCase: Bool

    enum Token: Equatable, Sendable {
        case literal(Character)
        case any            // ?
        case star           // *
        case globstar       // ** (crosses /)
        case globstarSlash  // **/ : zero or more whole folders
        case set([ClosedRange<Character>], negated: Bool)
    }

    /// A glob is a string: `include: 42` (a YAML number, or `true`) is refused, with the quotes
    /// that make it a glob of that name.
    public init(from decoder: any Decoder) throws {
        if let text = decoder.plainScalar, let what = Self.typedScalar(text) {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                debugDescription: "expected a glob\(decoder.place), got \(what): write it in quotes ('\(text)') to match a file of that name"))
        }
        self = try parseScalar(decoder) { (text) throws(ValueError) in try Glob(parsing: text) }
    }

    /// "the number 42" or "true" for a plain scalar YAML reads as a number or a boolean, else nil.
    static func typedScalar(_ text: String) -> String? {
        if ["true", "false", "True", "False", "TRUE", "FALSE"].contains(text) { return text }
        let digits = text.replacingOccurrences(of: "_", with: "")
        guard let first = digits.first, first.isNumber || "+-.".contains(first), Double(digits) != nil else { return nil }
        return "the number \(text)"
    }

    /// Braces may make at most this many patterns (`{a,b}{c,d}` makes 4).
    static let maxAlternatives = 256

    public init(parsing pattern: String, ignoringCase: Bool = false) throws(ValueError) {
        guard !pattern.isEmpty else { throw ValueError("bad glob '': a pattern cannot be empty") }
        guard pattern.utf8.count <= 1024, pattern.filter({ $0 == "{" }).count <= 32 else {
            throw ValueError("bad glob '\(pattern.prefix(40))...': at most 1024 bytes and 32 braces")
        }
        self.pattern = pattern
        ignoresCase = ignoringCase
        matchesNameOnly = !pattern.contains("/")
        var tokens: [[Token]] = []
        for alternative in try Self.expandBraces(ignoringCase ? pattern.lowercased() : pattern) {
            tokens.append(try Self.tokenize(alternative, whole: pattern))
        }
        alternatives = tokens
    }

    public var description: String { pattern }

    /// This pattern, matching letters whatever their case (`*.jpg` matches `SCAN.JPG`).
    public func ignoringCase() -> Glob {
        (try? Glob(parsing: pattern, ignoringCase: true)) ?? self
    }

    /// True when `path` (relative, `/`-separated) matches.
    public func matches(_ path: String) -> Bool {
        let subject: Substring
        if matchesNameOnly, let slash = path.lastIndex(of: "/") {
            subject = path[path.index(after: slash)...]
        } else {
            subject = Substring(path)
        }
        let characters = ignoresCase ? Array(subject.lowercased()) : Array(subject)
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
            guard result.count <= maxAlternatives else {
                throw ValueError("bad glob '\(pattern)': its braces make more than \(maxAlternatives) patterns")
            }
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

    /// Whether `tokens` match all of `text`: dynamic programming over (token, position), so a
    /// pattern such as `*a*a*a*a*b` costs tokens × characters, never an exponential backtrack;
    /// it stops at the first token no position can match from (most paths fail within a few).
    private static func match(_ tokens: ArraySlice<Token>, _ text: ArraySlice<Character>) -> Bool {
        let tokens = Array(tokens), text = Array(text)
        let n = text.count
        // nextSlash[j]: the first "/" at or after j (n when none).
        var nextSlash = [Int](repeating: n, count: n + 1)
        if n > 0 { for j in stride(from: n - 1, through: 0, by: -1) { nextSlash[j] = text[j] == "/" ? j : nextSlash[j + 1] } }
        // after[j]: whether the tokens after the current one match text[j...].
        var after = [Bool](repeating: false, count: n + 1)
        after[n] = true
        var row = [Bool](repeating: false, count: n + 1)
        for token in tokens.reversed() {
            for j in stride(from: n, through: 0, by: -1) {
                let here: Character? = j < n ? text[j] : nil
                switch token {
                case .literal(let expected): row[j] = here == expected && after[j + 1]
                case .any: row[j] = here != nil && here != "/" && after[j + 1]
                case .set(let ranges, let negated):
                    if let here, here != "/", ranges.contains(where: { $0.contains(here) }) != negated { row[j] = after[j + 1] } else { row[j] = false }
                case .star: row[j] = after[j] || (here != nil && here != "/" && row[j + 1])
                case .globstar: row[j] = after[j] || (here != nil && row[j + 1])
                case .globstarSlash: row[j] = after[j] || (nextSlash[j] < n && row[nextSlash[j] + 1])
                }
            }
            guard row.contains(true) else { return false }
            swap(&after, &row)
        }
        return after[0]
    }
}
