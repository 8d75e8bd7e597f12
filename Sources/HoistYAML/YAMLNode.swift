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
        self.message = message
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

    public var description: String {
        guard more.isEmpty else { return all.map(\.description).joined(separator: "\n") }
        guard let sourceLine else { return summary }
        let caret = String(repeating: " ", count: max(0, mark.column - 1)) + "^"
        return "\(summary)\n    \(sourceLine)\n    \(caret)"
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
