import Testing
@testable import HoistLua

@Suite struct LuaStateTests {
    @Test func linksLua54AndRunsCode() throws {
        #expect(LuaState.version == "Lua 5.4")
        let lua = LuaState()
        #expect(try lua.evaluate("return 6 * 7", chunkName: "answer.lua") == .integer(42))
        #expect(try lua.evaluate("return ('hoist'):upper()", chunkName: "s.lua") == .string("HOIST"))
        #expect(try lua.evaluate("return 1.5", chunkName: "n.lua") == .number(1.5))
    }

    @Test func syntaxErrorNamesScriptAndLine() {
        let lua = LuaState()
        #expect {
            try lua.evaluate("local x = 1\nreturn x +", chunkName: "plugins/broken.lua")
        } throws: { error in
            "\(error)".hasPrefix("plugins/broken.lua:2:")
        }
    }

    @Test func runtimeErrorNamesScriptAndLine() {
        let lua = LuaState()
        #expect {
            try lua.evaluate("\n\nerror('boom')", chunkName: "hook.lua")
        } throws: { error in
            "\(error)" == "hook.lua:3: boom"
        }
    }
}
