private import CLua

/// A Lua 5.4 interpreter owned by Swift: `init` opens it, `deinit` closes it.
///
/// Only this file imports liblua. Lua errors reach Swift through `lua_pcall` alone, so no
/// `longjmp` ever crosses a Swift frame.
///
/// ```swift
/// let lua = LuaState()
/// let answer = try lua.evaluate("return 6 * 7", chunkName: "answer.lua")   // .integer(42)
/// ```
public final class LuaState {
    private let state: OpaquePointer

    /// The Lua version this process linked, such as `"Lua 5.4"`.
    public static var version: String {
        let L = luaL_newstate()!
        defer { lua_close(L) }
        luaL_openlibs(L)
        _ = hoist_lua_getglobal(L, "_VERSION")
        return String(cString: hoist_lua_tostring(L, -1))
    }

    /// Opens a state with Lua's standard libraries.
    public init() {
        state = luaL_newstate()
        luaL_openlibs(state)
    }

    deinit { lua_close(state) }

    /// Compiles and runs `source` (text only, never binary chunks) and returns its first result.
    /// - Throws: `LuaError` with the chunk name, line and message of a syntax or runtime error.
    @discardableResult
    public func evaluate(_ source: String, chunkName: String) throws -> LuaValue {
        let base = lua_gettop(state)
        defer { lua_settop(state, base) }
        var bytes = Array(source.utf8)
        let status = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: max(buffer.count, 1)) {
                hoist_luaL_loadbuffer(state, $0, buffer.count, "@" + chunkName, "t")
            }
        }
        if status != LUA_OK { throw LuaError(message: popString()) }
        if hoist_lua_pcall(state, 0, 1, 0) != LUA_OK { throw LuaError(message: popString()) }
        return value(at: -1)
    }

    private func popString() -> String {
        let text = hoist_lua_tostring(state, -1).map { String(cString: $0) } ?? "(error object is not a string)"
        hoist_lua_pop(state, 1)
        return text
    }

    private func value(at index: Int32) -> LuaValue {
        switch lua_type(state, index) {
        case LUA_TBOOLEAN: return .boolean(lua_toboolean(state, index) != 0)
        case LUA_TNUMBER:
            if lua_isinteger(state, index) != 0 { return .integer(Int64(hoist_lua_tointeger(state, index))) }
            return .number(hoist_lua_tonumber(state, index))
        case LUA_TSTRING: return .string(String(cString: hoist_lua_tostring(state, index)))
        default: return .nil
        }
    }
}

/// A Lua value copied into Swift.
public enum LuaValue: Equatable, Sendable {
    case `nil`
    case boolean(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
}

/// A Lua syntax or runtime error, as Lua formats it: `script.lua:LINE: message`.
public struct LuaError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}
