/// A YAML document as a tree, every node knowing where it starts in the source.
/// Aliases are resolved (an aliased node is shared) and merge keys (`<<`) are applied.
public final class YAMLNode: Sendable {
    public enum Kind: Sendable {
        case scalar(String, plain: Bool)
        case sequence([YAMLNode])
        case mapping([(key: YAMLNode, value: YAMLNode)])
    }

    public let kind: Kind
    public let mark: YAMLMark
    public let tag: String?

    init(_ kind: Kind, mark: YAMLMark, tag: String? = nil) {
        self.kind = kind
        self.mark = mark
        self.tag = tag
    }

    /// The scalar's text, or nil for a collection.
    public var scalar: String? {
        if case .scalar(let text, _) = kind { return text }
        return nil
    }

    /// True for `null`, `~`, or an empty plain scalar.
    public var isNull: Bool {
        if case .scalar(let text, let plain) = kind, plain, tag == nil {
            return ["", "~", "null", "Null", "NULL"].contains(text)
        }
        return tag == "tag:yaml.org,2002:null"
    }

    /// A mapping's value for a key.
    public subscript(key: String) -> YAMLNode? {
        guard case .mapping(let pairs) = kind else { return nil }
        return pairs.first { $0.key.scalar == key }?.value
    }

    /// What a person calls this kind of node in an error message.
    var kindName: String {
        switch kind {
        case .scalar: isNull ? "null" : "a scalar"
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }
}

/// A problem in a YAML file, located: `FILE:LINE:COL: message`, then the source line and a caret.
public struct YAMLError: Error, CustomStringConvertible, Sendable, Equatable {
    public let file: String
    public let mark: YAMLMark
    public let message: String
    /// The text of the line the mark points into, when known.
    public let sourceLine: String?
    /// Further mistakes in the same file, after this one in file order (`validate` reports each).
    public var more: [YAMLError] = []

    public init(file: String, mark: YAMLMark, message: String, sourceLine: String? = nil) {
        self.file = file
        self.mark = mark
        // One line whatever it quotes (a job name, a path, a value from the manifest): a newline
        // in a value would print a line of its own (the terminal's other controls are escaped
        // where it is printed).
        self.message = message.replacingOccurrences(of: "\n", with: "\\u{A}").replacingOccurrences(of: "\r", with: "\\u{D}")
        self.sourceLine = sourceLine
    }

    /// Several mistakes as one error: the first in file order, the others in `more`.
    /// - Precondition: `errors` is not empty.
    public init(combining errors: [YAMLError]) {
        let sorted = errors.flatMap(\.all).sorted { ($0.mark.line, $0.mark.column) < ($1.mark.line, $1.mark.column) }
        self = sorted[0]
        more = Array(sorted.dropFirst())
    }

    /// This mistake and the ones after it, each on its own (`more` empty).
    public var all: [YAMLError] {
        var first = self
        first.more = []
        return [first] + more.flatMap(\.all)
    }

    /// `FILE:LINE:COL: message`, the first line of `description`.
    public var summary: String { "\(file):\(mark.line):\(mark.column): \(message)" }

    /// The summary, the source line and a caret under the column. A URL's password in either
    /// is shown as `***` (a manifest may hold one: `postgres://hoist:PASSWORD@db/hoist`).
    public var description: String {
        guard more.isEmpty else { return all.map(\.description).joined(separator: "\n") }
        let summary = redactingURLPasswords(summary).text
        guard let sourceLine else { return summary }
        let (line, hidden) = redactingURLPasswords(sourceLine)
        let column = mark.column - 1
        var moved = 0
        for password in hidden where password.start <= column {
            // A caret inside a password points at its `***`; one after it moves with the text.
            moved += column < password.start + password.length ? password.start - column : 3 - password.length
        }
        let caret = String(repeating: " ", count: max(0, column + moved)) + "^"
        return "\(summary)\n    \(line)\n    \(caret)"
    }
}

/// The text of a YAML file, for quoting lines in errors.
struct YAMLSource {
    let file: String
    let lines: [Substring]

    init(file: String, text: String) {
        self.file = file
        lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    }

    func error(_ message: String, at mark: YAMLMark) -> YAMLError {
        let line = mark.line >= 1 && mark.line <= lines.count
            ? String(lines[mark.line - 1]).replacingOccurrences(of: "\r", with: "") : nil
        return YAMLError(file: file, mark: mark, message: message, sourceLine: line)
    }
}

/// `text` with the password of every URL's userinfo (`scheme://user:PASSWORD@host`) shown as
/// `***`, for lines echoed to a terminal or a log (a manifest line naming a database, a proxy).
/// - Returns: the text, and each password hidden: where it started in `text` (in characters)
///   and how long it was.
public func redactingURLPasswords(_ text: String) -> (text: String, hidden: [(start: Int, length: Int)]) {
    guard text.contains("://"), text.contains("@") else { return (text, []) }
    let characters = Array(text)
    var result: [Character] = []
    var hidden: [(start: Int, length: Int)] = []
    var index = 0
    while index < characters.count {
        // At "://" after a scheme.
        if characters[index] == ":", index + 2 < characters.count, characters[index + 1] == "/", characters[index + 2] == "/",
           index > 0, characters[index - 1].isLetter || characters[index - 1].isNumber {
            result += "://"
            index += 3
            // The authority runs to the first '/', '?', '#' or quote; its userinfo to the last '@'
            // in it (as URL parsers read `u:p@ss@host`), spaces included.
            var stop = index
            while stop < characters.count, !"/?#\"'".contains(characters[stop]) { stop += 1 }
            if let end = characters[index..<stop].lastIndex(of: "@"), let colon = characters[index..<end].firstIndex(of: ":") {
                result += characters[index...colon]
                hidden.append((start: colon + 1, length: end - colon - 1))
                result += "***"
                index = end
            }
            continue
        }
        result.append(characters[index])
        index += 1
    }
    return (String(result), hidden)
}
