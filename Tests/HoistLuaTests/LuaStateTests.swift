import Testing
@testable import HoistLua

@Suite struct LuaRuntimeTests {
    @Test func linksLua54AndRunsCode() throws {
        #expect(LuaRuntime.version == "Lua 5.4")
        let lua = try LuaRuntime()
        let script = try lua.load("function answer() return 6 * 7, 'hoist', 1.5, {1, 2}, {a = true} end", name: "answer.lua")
        let results = try lua.call(script, "answer")
        #expect(results == [.integer(42), .string("hoist"), .number(1.5), .array([.integer(1), .integer(2)]),
                            .table(["a": .boolean(true)])])
        #expect(try lua.call(script, "missing") == nil)
    }

    @Test func syntaxErrorNamesScriptAndLine() {
        #expect { try LuaRuntime.checkSyntax("local x = 1\nreturn x +", name: "plugins/broken.lua") } throws: { error in
            let error = try #require(error as? LuaError)
            return error.script == "plugins/broken.lua" && error.line == 2 && error.description.hasPrefix("plugins/broken.lua:2:")
        }
    }

    @Test func runtimeErrorNamesScriptLineAndTraceback() throws {
        let lua = try LuaRuntime()
        let script = try lua.load("\n\nfunction boom() error('boom') end\nfunction go() boom() end", name: "hook.lua")
        #expect { try lua.call(script, "go") } throws: { error in
            let error = try #require(error as? LuaError)
            return error.description == "hook.lua:3: boom" && error.traceback.contains("hook.lua:4")
        }
    }
}
