import Foundation

/// Decodes `Decodable` types from YAML, with errors that point into the file.
///
/// ```swift
/// struct Job: Decodable { let name: String; let concurrency: Int? }
/// let job = try YAMLDecoder().decode(Job.self, from: text, file: "jobs/a.yaml")
/// ```
///
/// Every error is a `YAMLError` (`FILE:LINE:COL: message`, with the source line and a caret):
/// syntax errors, wrong types, missing keys, duplicate keys, unknown keys (with a suggestion:
/// a key no `Decodable` asked for is unknown), unset environment variables, and the
/// `DecodingError`s that types throw from their own `init(from:)`.
public struct YAMLDecoder {
    /// Values for `${VAR}`.
    public var environment: [String: String]
    /// Top-level keys starting with this are ignored instead of unknown (as Compose's `x-`
    /// extension keys: a place for anchors). Nil: every top-level key must be asked for.
    public var ignoredTopLevelPrefix: String?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// The document's node tree (nil for an empty document).
    public func compose(_ text: String, file: String) throws -> YAMLNode? {
        var composer = YAMLComposer(source: YAMLSource(file: file, text: text), environment: environment)
        return try composer.compose(text)
    }

    /// The document's node tree with `${VAR}` left as written: to read a section that sets
    /// variables before the rest is read with them (see `substitute(_:file:text:)`).
    /// Duplicate keys do not stop it (the first value stands; `decode` reports them).
    public func composeUninterpolated(_ text: String, file: String) throws -> YAMLNode? {
        var composer = YAMLComposer(source: YAMLSource(file: file, text: text), environment: environment)
        composer.interpolates = false
        composer.toleratesDuplicateKeys = true
        return try composer.compose(text)
    }

    /// A scalar of an uninterpolated tree with `${VAR}` replaced from `environment`.
    /// - Throws: `YAMLError` at the variable for an unset one; at the node for a collection.
    public func substitute(_ node: YAMLNode, file: String, text: String) throws -> String {
        let source = YAMLSource(file: file, text: text)
        guard case .scalar(let value, let plain) = node.kind else {
            throw source.error("expected a scalar, found \(node.kindName)", at: node.mark)
        }
        return try YAMLComposer(source: source, environment: environment).substitute(value, at: node.mark, plain: plain)
    }

    /// Decodes `T` from the document. Mistakes the decoding can go on past (a bad value of an
    /// optional key, a value a type reports with `Decoder.report(_:)`, unknown keys) are all
    /// collected: the error thrown is the first in file order, the others in its `more`.
    public func decode<T: Decodable>(_ type: T.Type, from text: String, file: String) throws -> T {
        let source = YAMLSource(file: file, text: text)
        var composer = YAMLComposer(source: source, environment: environment)
        composer.toleratesDuplicateKeys = true
        let root = try composer.compose(text) ?? YAMLNode(.mapping([]), mark: YAMLMark(line: 1, column: 1))
        // Duplicate keys, reported with the rest.
        let context = DecodingContext(source: source, root: root)
        context.issues = composer.recorded
        let value: T
        do {
            value = try T(from: NodeDecoder(node: root, codingPath: [], context: context))
        } catch {
            // Keys after the one that stopped the decoding were never asked for: no unknown-key check.
            throw YAMLError(combining: context.issues + [try context.located(error)])
        }
        context.checkUnknownKeys(root, ignoringTopLevelPrefix: ignoredTopLevelPrefix)
        if !context.issues.isEmpty { throw YAMLError(combining: context.issues) }
        return value
    }
}

extension Decoder {
    /// Reports a mistake in a value and goes on decoding: a `YAMLDecoder` collects it (and throws
    /// every mistake at the end, in file order); any other decoder throws it at once.
    public func report(_ error: DecodingError) throws {
        guard let decoder = self as? NodeDecoder else { throw error }
        decoder.context.issues.append(decoder.context.locate(error, root: decoder.context.root))
    }
}

extension Decoder {
    /// The text of the node being decoded when it is a plain (unquoted, untagged) scalar, which
    /// YAML may read as a number or a boolean; nil for a quoted scalar, a collection, or any
    /// other decoder.
    public var plainScalar: String? {
        guard let decoder = self as? NodeDecoder, case .scalar(let text, plain: true) = decoder.node.kind, decoder.node.tag == nil else { return nil }
        return text
    }

    /// Adds `explain(key)` to the message of each unknown key of the mapping being decoded
    /// ("unknown key 'region': a file: storage takes only url"); no-op for any other decoder.
    public func explainUnknownKeys(_ explain: @escaping (String) -> String) {
        guard let decoder = self as? NodeDecoder else { return }
        decoder.context.explanations[ObjectIdentifier(decoder.node)] = explain
    }

    /// " in files[0].include[1]": where the value being decoded is, for messages.
    public var place: String { DecodingContext.place(codingPath) }
}

extension KeyedDecodingContainer {
    /// The required value at `key`. When it is missing or bad, a `YAMLDecoder` (`decoder`, the
    /// one this container came from) records the mistake and goes on with `placeholder` (never
    /// seen: the decoding throws at its end), so the mistakes after it are found in the same
    /// pass; any other decoder throws it at once.
    public func decode<T: Decodable>(_ type: T.Type, forKey key: Key, in decoder: any Decoder,
                                     placeholder: @autoclosure () -> T) throws -> T {
        do {
            return try decode(type, forKey: key)
        } catch {
            guard let decoder = decoder as? NodeDecoder else { throw error }
            decoder.context.issues.append(try decoder.context.located(error))
            // The value was not all read: its keys are not checked.
            if case .mapping(let pairs) = decoder.node.kind,
               let child = pairs.first(where: { $0.key.scalar == key.stringValue })?.value {
                decoder.context.failed.insert(ObjectIdentifier(child))
            }
            return placeholder()
        }
    }
}

/// What the containers learn while decoding: which keys each mapping was asked for.
final class DecodingContext {
    let source: YAMLSource
    let root: YAMLNode
    /// For each mapping decoded by a keyed container: the keys asked for (nil: any key is fine).
    var asked: [ObjectIdentifier: Set<String>?] = [:]
    /// Mistakes decoding went on past.
    var issues: [YAMLError] = []
    /// Nodes whose decoding failed part way: their keys are not checked.
    var failed: Set<ObjectIdentifier> = []
    /// What a mapping's decoder adds to the message of an unknown key in it.
    var explanations: [ObjectIdentifier: (String) -> String] = [:]

    init(source: YAMLSource, root: YAMLNode) {
        self.source = source
        self.root = root
    }

    /// Any error from decoding as a located `YAMLError`.
    func located(_ error: any Error) throws -> YAMLError {
        switch error {
        case let error as YAMLError: return error
        case let error as DecodingError: return locate(error, root: root)
        default: throw error
        }
    }

    /// Records the error of an optional value that failed, so decoding goes on without it.
    func recordFailure(_ error: any Error, at node: YAMLNode) throws {
        issues.append(try located(error))
        failed.insert(ObjectIdentifier(node))
    }

    func error(_ message: String, at node: YAMLNode) -> YAMLError { source.error(message, at: node.mark) }

    /// Turns a `DecodingError` from a type's own `init(from:)` into a located error.
    func locate(_ error: DecodingError, root: YAMLNode) -> YAMLError {
        func node(at path: [any CodingKey]) -> YAMLNode {
            var current = root
            for key in path {
                switch current.kind {
                case .mapping(let pairs):
                    guard let next = pairs.first(where: { $0.key.scalar == key.stringValue })?.value else { return current }
                    current = next
                case .sequence(let items):
                    guard let index = key.intValue, items.indices.contains(index) else { return current }
                    current = items[index]
                case .scalar:
                    return current
                }
            }
            return current
        }
        switch error {
        case .dataCorrupted(let context):
            return self.error(context.debugDescription, at: node(at: context.codingPath))
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return self.error(context.debugDescription, at: node(at: context.codingPath))
        case .keyNotFound(let key, let context):
            return self.error("missing required key '\(key.stringValue)'\(Self.place(context.codingPath))",
                              at: node(at: context.codingPath))
        @unknown default:
            return self.error("\(error)", at: root)
        }
    }

    /// " in files[0]" for messages.
    static func place(_ path: [any CodingKey]) -> String {
        guard !path.isEmpty else { return "" }
        var text = ""
        for key in path {
            if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
        }
        return " in \(text)"
    }

    /// Records every key that no decoder asked for.
    func checkUnknownKeys(_ root: YAMLNode, ignoringTopLevelPrefix prefix: String?) {
        var visited = Set<ObjectIdentifier>()
        func walk(_ node: YAMLNode) {
            guard visited.insert(ObjectIdentifier(node)).inserted, !failed.contains(ObjectIdentifier(node)) else { return }
            switch node.kind {
            case .scalar: return
            case .sequence(let items): for item in items { walk(item) }
            case .mapping(let pairs):
                let entry = asked[ObjectIdentifier(node)]
                for pair in pairs {
                    if case .some(.some(let known)) = entry, let name = pair.key.scalar, !known.contains(name) {
                        if node === root, let prefix, name.hasPrefix(prefix) { continue }
                        var message = "unknown key '\(name)'"
                        if let suggestion = Self.closest(to: name, in: known) { message += " (did you mean '\(suggestion)'?)" }
                        if let explain = explanations[ObjectIdentifier(node)] { message += ": " + explain(name) }
                        issues.append(error(message, at: pair.key))
                        continue
                    }
                    if entry != nil { walk(pair.value) }
                }
            }
        }
        walk(root)
    }

    /// The known key nearest to `name` by edit distance, if near enough to be a typo.
    static func closest(to name: String, in known: Set<String>) -> String? {
        let scored = known.map { ($0, distance(name.lowercased(), $0.lowercased())) }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        guard let best = scored.first, best.1 <= max(2, name.count / 3) else { return nil }
        return best.0
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}

/// The `Decoder` over one node.
struct NodeDecoder: Decoder {
    let node: YAMLNode
    let codingPath: [any CodingKey]
    let context: DecodingContext
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .mapping(let pairs) = node.kind else {
            throw context.error("expected a mapping\(DecodingContext.place(codingPath)), found \(node.kindName)", at: node)
        }
        let id = ObjectIdentifier(node)
        if context.asked[id] == nil { context.asked[id] = .some(Set<String>()) }
        return KeyedDecodingContainer(KeyedContainer<Key>(node: node, pairs: pairs, codingPath: codingPath, context: context))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .sequence(let items) = node.kind else {
            throw context.error("expected a list\(DecodingContext.place(codingPath)), found \(node.kindName)", at: node)
        }
        return UnkeyedContainer(items: items, codingPath: codingPath, context: context)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueContainer(node: node, codingPath: codingPath, context: context)
    }
}

private struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "\(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let node: YAMLNode
    let pairs: [(key: YAMLNode, value: YAMLNode)]
    let codingPath: [any CodingKey]
    let context: DecodingContext

    /// Asking for all keys means any key is fine (a dictionary).
    var allKeys: [Key] {
        context.asked[ObjectIdentifier(node)] = .some(nil)
        return pairs.compactMap { $0.key.scalar.flatMap(Key.init(stringValue:)) }
    }

    private func value(_ key: Key) -> YAMLNode? {
        if case .some(.some(var known)) = context.asked[ObjectIdentifier(node)] {
            known.insert(key.stringValue)
            context.asked[ObjectIdentifier(node)] = .some(known)
        }
        return pairs.first { $0.key.scalar == key.stringValue }?.value
    }

    private func required(_ key: Key) throws -> YAMLNode {
        guard let found = value(key) else {
            throw context.error("missing required key '\(key.stringValue)'\(DecodingContext.place(codingPath))", at: node)
        }
        return found
    }

    func contains(_ key: Key) -> Bool { value(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { value(key)?.isNull ?? true }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let child = try required(key)
        return try T(from: NodeDecoder(node: child, codingPath: codingPath + [key], context: context))
    }

    /// A value that does not decode is recorded as a mistake and read as absent, so that the
    /// decoding goes on and finds the mistakes after it.
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let child = value(key), !child.isNull else { return nil }
        do {
            return try T(from: NodeDecoder(node: child, codingPath: codingPath + [key], context: context))
        } catch {
            try context.recordFailure(error, at: child)
            return nil
        }
    }

    // The protocol's own `decodeIfPresent` for the standard types calls `decode`, which throws:
    // a bad `concurrency: eight` would stop the decoding of its whole section and hide the
    // mistakes after it. These send them to the collecting one above.
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try collecting(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try collecting(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try collecting(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try collecting(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try collecting(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try collecting(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try collecting(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try collecting(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try collecting(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try collecting(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try collecting(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try collecting(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try collecting(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try collecting(type, key) }

    private func collecting<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        try decodeIfPresent(type, forKey: key) as T?
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try NodeDecoder(node: try required(key), codingPath: codingPath + [key], context: context).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try NodeDecoder(node: try required(key), codingPath: codingPath + [key], context: context).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { NodeDecoder(node: node, codingPath: codingPath, context: context) }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        NodeDecoder(node: try required(key), codingPath: codingPath + [key], context: context)
    }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let items: [YAMLNode]
    let codingPath: [any CodingKey]
    let context: DecodingContext
    var currentIndex = 0

    init(items: [YAMLNode], codingPath: [any CodingKey], context: DecodingContext) {
        self.items = items
        self.codingPath = codingPath
        self.context = context
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private mutating func nextDecoder() throws -> NodeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "the list has no more items"))
        }
        defer { currentIndex += 1 }
        return NodeDecoder(node: items[currentIndex], codingPath: codingPath + [IndexKey(currentIndex)], context: context)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, items[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: try nextDecoder()) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try nextDecoder().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try nextDecoder().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try nextDecoder() }
}

private struct SingleValueContainer: SingleValueDecodingContainer {
    let node: YAMLNode
    let codingPath: [any CodingKey]
    let context: DecodingContext

    func decodeNil() -> Bool { node.isNull }

    private func text(_ expected: String) throws -> String {
        guard let text = node.scalar else {
            throw context.error("expected \(expected)\(DecodingContext.place(codingPath)), found \(node.kindName)", at: node)
        }
        return text
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        switch try text("true or false") {
        case "true", "True", "TRUE", "yes", "on": return true
        case "false", "False", "FALSE", "no", "off": return false
        case let other: throw context.error("expected true or false\(DecodingContext.place(codingPath)), got '\(other)'", at: node)
        }
    }

    func decode(_ type: String.Type) throws -> String {
        if node.isNull { throw context.error("expected a string\(DecodingContext.place(codingPath)), found null", at: node) }
        return try text("a string")
    }

    func decode(_ type: Double.Type) throws -> Double {
        let raw = try text("a number")
        guard let value = Double(raw.replacingOccurrences(of: "_", with: "")) else {
            throw context.error("expected a number\(DecodingContext.place(codingPath)), got '\(raw)'", at: node)
        }
        return value
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let raw = try text("an integer")
        let cleaned = raw.replacingOccurrences(of: "_", with: "")
        let value = cleaned.hasPrefix("0x") ? T(cleaned.dropFirst(2), radix: 16) : T(cleaned)
        guard let value else {
            throw context.error("expected an integer\(DecodingContext.place(codingPath)), got '\(raw)'", at: node)
        }
        return value
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try T(from: NodeDecoder(node: node, codingPath: codingPath, context: context))
    }
}
