private import CYAML

/// A position in a YAML document, 1-based as editors show it.
public struct YAMLMark: Equatable, Sendable, CustomStringConvertible {
    public let line: Int
    public let column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public var description: String { "\(line):\(column)" }
}

/// One libyaml parse event, with where it starts in the source.
public struct YAMLEvent: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        case streamStart, streamEnd, documentStart, documentEnd
        case alias(anchor: String)
        case scalar(value: String, anchor: String?, tag: String?, plain: Bool)
        case sequenceStart(anchor: String?, tag: String?)
        case sequenceEnd
        case mappingStart(anchor: String?, tag: String?)
        case mappingEnd
    }
    public let kind: Kind
    public let start: YAMLMark
}

/// A YAML syntax error: `FILE:LINE:COL: message`.
public struct YAMLSyntaxError: Error, CustomStringConvertible, Sendable {
    public let file: String
    public let mark: YAMLMark
    public let message: String
    public var description: String { "\(file):\(mark): \(message)" }
}

/// Turns YAML text into libyaml's event stream. Only this file imports libyaml.
public enum YAMLParser {
    /// The libyaml release Hoist parses with, such as "0.2.5".
    public static var libraryVersion: String { String(cString: yaml_get_version_string()) }

    /// Parses `text` and returns every event in order.
    /// - Throws: `YAMLSyntaxError` naming `file` and the 1-based line and column of the problem.
    public static func events(in text: String, file: String = "<string>") throws -> [YAMLEvent] {
        let parsed = eventsUntilError(in: text, file: file)
        if let error = parsed.error { throw error }
        return parsed.events
    }

    /// Parses `text` as far as it is well formed: the events before the first syntax error, and
    /// that error (nil when the whole text parsed), so a caller can still read what came before it.
    public static func eventsUntilError(in text: String, file: String = "<string>") -> (events: [YAMLEvent], error: YAMLSyntaxError?) {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) != 0 else {
            return ([], YAMLSyntaxError(file: file, mark: YAMLMark(line: 1, column: 1), message: "out of memory"))
        }
        defer { yaml_parser_delete(&parser) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { buffer in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var events: [YAMLEvent] = []
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) != 0 else {
                    let mark = parser.problem_mark
                    var message = parser.problem.map { String(cString: $0) } ?? "syntax error"
                    if let context = parser.context.map({ String(cString: $0) }) {
                        let start = parser.context_mark
                        message += " (\(context) at line \(start.line + 1), column \(start.column + 1))"
                    }
                    return (events, YAMLSyntaxError(
                        file: file, mark: YAMLMark(line: Int(mark.line) + 1, column: Int(mark.column) + 1), message: message))
                }
                defer { yaml_event_delete(&event) }
                let kind = convert(event)
                events.append(YAMLEvent(
                    kind: kind,
                    start: YAMLMark(line: Int(event.start_mark.line) + 1, column: Int(event.start_mark.column) + 1)))
                if event.type == YAML_STREAM_END_EVENT { return (events, nil) }
            }
        }
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
    }

    private static func convert(_ event: yaml_event_t) -> YAMLEvent.Kind {
        switch event.type {
        case YAML_STREAM_START_EVENT: return .streamStart
        case YAML_STREAM_END_EVENT: return .streamEnd
        case YAML_DOCUMENT_START_EVENT: return .documentStart
        case YAML_DOCUMENT_END_EVENT: return .documentEnd
        case YAML_ALIAS_EVENT: return .alias(anchor: string(event.data.alias.anchor) ?? "")
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let raw = UnsafeRawBufferPointer(start: scalar.value, count: Int(scalar.length))
            return .scalar(
                value: String(decoding: raw, as: UTF8.self), anchor: string(scalar.anchor),
                tag: string(scalar.tag), plain: scalar.style == YAML_PLAIN_SCALAR_STYLE)
        case YAML_SEQUENCE_START_EVENT:
            return .sequenceStart(anchor: string(event.data.sequence_start.anchor), tag: string(event.data.sequence_start.tag))
        case YAML_SEQUENCE_END_EVENT: return .sequenceEnd
        case YAML_MAPPING_START_EVENT:
            return .mappingStart(anchor: string(event.data.mapping_start.anchor), tag: string(event.data.mapping_start.tag))
        case YAML_MAPPING_END_EVENT: return .mappingEnd
        default: return .streamEnd
        }
    }
}
