/// A value passed between Swift and Lua. Tables are arrays (keys 1...n) or maps with string keys.
public indirect enum LuaValue: Sendable, Equatable {
    case `nil`
    case boolean(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([LuaValue])
    case table([String: LuaValue])
    case function(LuaFunction)

    /// The value as a string, for numbers and strings.
    public var string: String? {
        switch self {
        case .string(let text): text
        case .integer(let value): String(value)
        case .number(let value): String(value)
        default: nil
        }
    }

    public var int: Int64? {
        switch self {
        case .integer(let value): value
        case .number(let value): value == value.rounded() ? Int64(exactly: value) : nil
        case .string(let text): Int64(text)
        default: nil
        }
    }

    public var bool: Bool? {
        if case .boolean(let value) = self { return value }
        return nil
    }

    public subscript(key: String) -> LuaValue {
        if case .table(let fields) = self { return fields[key] ?? .nil }
        return .nil
    }
}

/// A Swift function Lua can call. It gets the call's arguments and returns its results; a
/// thrown error becomes a Lua error (raised after Swift has returned).
public final class LuaFunction: Sendable, Equatable {
    let body: @Sendable ([LuaValue]) throws -> [LuaValue]

    public init(_ body: @escaping @Sendable ([LuaValue]) throws -> [LuaValue]) {
        self.body = body
    }

    public static func == (a: LuaFunction, b: LuaFunction) -> Bool { a === b }
}

/// A Lua error: the script, the line when known, the message, and a traceback.
public struct LuaError: Error, CustomStringConvertible, Sendable, Equatable {
    public let script: String
    public let line: Int?
    public let message: String
    public let traceback: String

    /// `script.lua:12: message`, as Lua prints it.
    public var description: String {
        line.map { "\(script):\($0): \(message)" } ?? "\(script): \(message)"
    }
}
