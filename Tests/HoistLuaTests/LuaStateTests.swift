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

    /// Lua shortens a chunk's name to its last 57 bytes (`...` before them): a script named by a
    /// long path (a manifest's folder) is named whole in the error all the same.
    @Test func aLongScriptNameIsNamedWhole() throws {
        let name = "/srv/backups/" + String(repeating: "nightly-photo-jobs/", count: 4) + "hooks/check.lua"
        #expect { try LuaRuntime.checkSyntax("local x = 1\nreturn x +", name: name) } throws: { error in
            let error = try #require(error as? LuaError)
            return error.script == name && error.line == 2 && error.description.hasPrefix(name + ":2:")
        }
        let lua = try LuaRuntime()
        let script = try lua.load("\n\nfunction boom() error('boom') end\nfunction go() boom() end\nfunction rep() string.rep() end", name: name)
        #expect { try lua.call(script, "go") } throws: { error in
            let error = try #require(error as? LuaError)
            return error.description == name + ":3: boom"
        }
        // An error raised in C, located by the traceback's innermost script line.
        #expect { try lua.call(script, "rep") } throws: { error in
            let error = try #require(error as? LuaError)
            return error.script == name && error.line == 5
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
