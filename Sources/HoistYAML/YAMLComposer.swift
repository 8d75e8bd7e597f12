/// Builds the node tree from libyaml's events: anchors and aliases, merge keys, duplicate keys,
/// and `${VAR}` / `${VAR:-default}` in scalar values.
struct YAMLComposer {
    let source: YAMLSource
    let environment: [String: String]
    /// Whether `${VAR}` in values is replaced (false: the text as written).
    var interpolates = true
    /// Unset variables and duplicate keys found while composing: each is a mistake, all are
    /// reported (in file order) once the document is read, before anything is decoded from it.
    private let unset = Mistakes()
    private final class Mistakes {
        var errors: [YAMLError] = []
        /// Whether every mistake recorded is a duplicate key (the tree is then whole: the first
        /// of the key's values stands).
        var onlyDuplicates = true
    }
    /// Whether duplicate keys alone leave the tree to the caller, with the mistakes in
    /// `recorded`, instead of throwing: decoding goes on, so one validate reports them with the
    /// mistakes in the values (`YAMLMistakesTests.aDuplicateKeyDoesNotHideTheOtherMistakes`).
    var toleratesDuplicateKeys = false
    /// The mistakes recorded while composing that did not stop it.
    var recorded: [YAMLError] { unset.errors }
    /// Whether `substitute` records an unset variable (and goes on) instead of throwing.
    private var collectsUnset = false
    private var events: [YAMLEvent] = []
    private var position = 0
    private var anchors: [String: YAMLNode] = [:]
    /// Sequences and mappings nested deeper than this are an error (not a crash of the stack).
    static let maxDepth = 64

    init(source: YAMLSource, environment: [String: String]) {
        self.source = source
        self.environment = environment
    }

    /// The first document's root, or nil for an empty file.
    /// - Throws: a `YAMLError` with every duplicate key and unset variable of the document in file
    ///   order; after a syntax error, the ones found before it and the syntax error.
    mutating func compose(_ text: String) throws -> YAMLNode? {
        let parsed = YAMLParser.eventsUntilError(in: text, file: source.file)
        events = parsed.events
        position = 0
        guard let syntax = parsed.error else { return try composeFirstDocument() }
        // The events before the error still make a (cut short) tree: read it for the mistakes
        // in it, so one validate shows them with the syntax error.
        var mistakes: [YAMLError] = []
        do {
            _ = try composeFirstDocument()
            mistakes = unset.errors   // duplicate keys, when they did not stop it
        } catch let error as YAMLError {
            mistakes = error.all
        }
        mistakes = mistakes.filter { ($0.mark.line, $0.mark.column) < (syntax.mark.line, syntax.mark.column) }
        throw YAMLError(combining: mistakes + [syntaxError(syntax)])
    }

    private func syntaxError(_ error: YAMLSyntaxError) -> YAMLError {
        var message = error.message
        let line = error.mark.line - 1
        if source.lines.indices.contains(line), source.lines[line].prefix(error.mark.column).contains("\t") {
            message += "; YAML indents with spaces, not tabs"
        }
        return source.error(message, at: error.mark)
    }

    private mutating func composeFirstDocument() throws -> YAMLNode? {
        while position < events.count {
            let event = events[position]
            position += 1
            if case .documentStart = event.kind {
                if position < events.count, case .documentEnd = events[position].kind { return nil }
                collectsUnset = true
                defer { collectsUnset = false }
                let root: YAMLNode
                do {
                    root = try node(isKey: false, depth: 0)
                } catch let error as YAMLError {
                    // A mistake that stops the reading comes with the ones recorded before it.
                    throw YAMLError(combining: unset.errors + [error])
                }
                if !unset.errors.isEmpty, !(toleratesDuplicateKeys && unset.onlyDuplicates) { throw YAMLError(combining: unset.errors) }
                return root
            }
        }
        return nil
    }

    /// The next event; past the end of a stream cut short by a syntax error, an empty scalar, which
    /// completes a pair whose value was never read.
    private mutating func next() -> YAMLEvent {
        defer { position += 1 }
        guard position < events.count else {
            return YAMLEvent(kind: .scalar(value: "", anchor: nil, tag: nil, plain: false), start: events.last?.start ?? YAMLMark(line: 1, column: 1))
        }
        return events[position]
    }

    private mutating func node(isKey: Bool, depth: Int) throws -> YAMLNode {
        let event = next()
        switch event.kind {
        case .sequenceStart, .mappingStart:
            guard depth < Self.maxDepth else {
                throw source.error("nested deeper than \(Self.maxDepth) levels: a manifest needs far fewer", at: event.start)
            }
        default: break
        }
        switch event.kind {
        case .scalar(let value, let anchor, let tag, let plain):
            let text = isKey || !interpolates ? value : try substitute(value, at: event.start, plain: plain)
            return remember(YAMLNode(.scalar(text, plain: plain), mark: event.start, tag: tag), anchor)
        case .alias(let anchor):
            guard let target = anchors[anchor] else {
                throw source.error("unknown alias '*\(anchor)': no anchor '&\(anchor)' before it", at: event.start)
            }
            return target
        case .sequenceStart(let anchor, let tag):
            var items: [YAMLNode] = []
            while !isEnd() { items.append(try node(isKey: false, depth: depth + 1)) }
            _ = next()
            return remember(YAMLNode(.sequence(items), mark: event.start, tag: tag), anchor)
        case .mappingStart(let anchor, let tag):
            var pairs: [(key: YAMLNode, value: YAMLNode)] = []
            var merged: [(key: YAMLNode, value: YAMLNode)] = []
            var seen: [String: YAMLMark] = [:]
            while !isEnd() {
                let key = try node(isKey: true, depth: depth + 1)
                let value = try node(isKey: false, depth: depth + 1)
                if key.scalar == "<<", case .scalar(_, true) = key.kind {
                    merged += try mergePairs(value)
                    continue
                }
                if let name = key.scalar {
                    if let first = seen[name] {
                        // Recorded, not thrown: every duplicate key of the document is reported.
                        unset.errors.append(source.error("duplicate key '\(name)' (first at line \(first.line))", at: key.mark))
                        continue
                    }
                    seen[name] = key.mark
                }
                pairs.append((key, value))
            }
            _ = next()
            for pair in merged {
                guard let name = pair.key.scalar, seen[name] == nil else { continue }
                seen[name] = pair.key.mark
                pairs.append(pair)
            }
            return remember(YAMLNode(.mapping(pairs), mark: event.start, tag: tag), anchor)
        default:
            throw source.error("unexpected YAML event", at: event.start)
        }
    }

    private func isEnd() -> Bool {
        // Past the end only when the stream stops at a syntax error: what is open ends there.
        guard position < events.count else { return true }
        return switch events[position].kind {
        case .sequenceEnd, .mappingEnd: true
        default: false
        }
    }

    private mutating func remember(_ node: YAMLNode, _ anchor: String?) -> YAMLNode {
        if let anchor { anchors[anchor] = node }
        return node
    }

    /// The pairs a merge key brings: from a mapping, or from each mapping of a list (earlier wins).
    private func mergePairs(_ value: YAMLNode) throws -> [(key: YAMLNode, value: YAMLNode)] {
        switch value.kind {
        case .mapping(let pairs):
            return pairs
        case .sequence(let items):
            var result: [(key: YAMLNode, value: YAMLNode)] = []
            for item in items {
                guard case .mapping(let pairs) = item.kind else {
                    throw source.error("a merge key ('<<') takes a mapping or a list of mappings, not \(item.kindName)", at: item.mark)
                }
                result += pairs
            }
            return result
        case .scalar:
            throw source.error("a merge key ('<<') takes a mapping or a list of mappings, not \(value.kindName)", at: value.mark)
        }
    }

    /// Replaces `${VAR}` and `${VAR:-default}` with the environment's values; `$${` is a literal `${`.
    func substitute(_ value: String, at mark: YAMLMark, plain: Bool) throws -> String {
        guard value.contains("${") else { return value }
        var result = ""
        var index = value.startIndex
        while index < value.endIndex {
            if value[index...].hasPrefix("$${") {
                result += "${"
                index = value.index(index, offsetBy: 3)
                continue
            }
            guard value[index...].hasPrefix("${") else {
                result.append(value[index])
                index = value.index(after: index)
                continue
            }
            let column = mark.column + value.distance(from: value.startIndex, to: index) + (plain ? 0 : 1)
            let here = YAMLMark(line: mark.line, column: column)
            guard let close = value[index...].firstIndex(of: "}") else {
                throw source.error("unterminated '${' in \"\(value)\"", at: here)
            }
            let body = value[value.index(index, offsetBy: 2)..<close]
            let name: Substring
            let fallback: Substring?
            if let separator = body.range(of: ":-") {
                name = body[..<separator.lowerBound]
                fallback = body[separator.upperBound...]
            } else {
                name = body
                fallback = nil
            }
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw source.error("bad variable name '\(name)' in '${\(body)}'", at: here)
            }
            if let set = environment[String(name)], !(fallback != nil && set.isEmpty) {
                result += set
            } else if let fallback {
                result += fallback
            } else {
                let error = source.error("environment variable \(name) is not set (write ${\(name):-default} for a default)", at: here)
                guard collectsUnset else { throw error }
                unset.errors.append(error)
                unset.onlyDuplicates = false
            }
            index = value.index(after: close)
        }
        return result
    }
}
