import Testing
@testable import HoistLua

@Suite struct SandboxTests {
    func run(_ code: String, allow: Set<String> = []) throws -> LuaValue {
        let lua = try LuaRuntime(allow: allow)
        let script = try lua.load("function probe() \(code) end", name: "probe.lua")
        return try lua.call(script, "probe")?.first ?? .nil
    }

    @Test(arguments: ["io", "debug", "require", "dofile", "loadfile", "package", "collectgarbage", "os.execute",
                      "os.remove", "os.rename", "os.exit", "os.tmpname", "string.dump and nil"])
    func closedDoors(expression: String) throws {
        #expect(try run("return \(expression) == nil") == .boolean(true))
    }

    @Test func binaryChunksDoNotLoad() throws {
        let result = try run("""
            local f, err = load(string.dump and string.dump(function() end) or "\\27Lua")
            return f == nil and err
            """)
        #expect(result.string?.contains("attempt to load a binary chunk") == true)
        #expect(try run("return load('return 1 + 1')()") == .integer(2))
    }

    @Test func openDoors() throws {
        #expect(try run("return type(os.time()) == 'number' and type(os.clock()) == 'number' and os.date('%Y') ~= nil") == .boolean(true))
        #expect(try run("return os.getenv('HOME') ~= nil") == .boolean(true))
        #expect(try run("return #table.concat({string.upper('a'), math.floor(2.5), utf8.char(72)}, ',')") == .integer(5))
        #expect(try run("local co = coroutine.wrap(function() coroutine.yield(7) end) return co()") == .integer(7))
    }

    @Test func aJobMayAllowMoreByName() throws {
        #expect(try run("return io ~= nil and os.execute ~= nil", allow: ["io", "os"]) == .boolean(true))
        #expect { try LuaRuntime(allow: ["sockets"]) } throws: { "\($0)".contains("cannot allow sockets") }
    }

    @Test func scriptsHaveTheirOwnGlobals() throws {
        let lua = try LuaRuntime()
        let a = try lua.load("counter = 1 function get() return counter end", name: "a.lua")
        let b = try lua.load("counter = 2 string = nil function get() return counter end", name: "b.lua")
        #expect(try lua.call(a, "get") == [.integer(1)])
        #expect(try lua.call(b, "get") == [.integer(2)])
        // b's assignment to `string` shadowed it for b only.
        let c = try lua.load("function up() return string.upper('x') end", name: "c.lua")
        #expect(try lua.call(c, "up") == [.string("X")])
    }
}

@Suite struct BudgetTests {
    @Test func endlessLoopIsStoppedEvenInsidePcall() throws {
        let lua = try LuaRuntime(limits: .init(instructions: 100_000))
        let script = try lua.load("""
            function spin()
              while true do
                pcall(function() while true do end end)
              end
            end
            function fine() return 'still here' end
            """, name: "spin.lua")
        #expect { try lua.call(script, "spin") } throws: { error in
            let error = try #require(error as? LuaError)
            return error.script == "spin.lua" && error.line != nil && error.message.contains("instruction budget exceeded")
        }
        #expect(try lua.call(script, "fine") == [.string("still here")])
    }

    @Test func memoryBombIsStopped() throws {
        let lua = try LuaRuntime(limits: .init(instructions: 50_000_000, memory: 8 << 20))
        let script = try lua.load("""
            function bomb()
              local t = {}
              for i = 1, 1e9 do t[i] = string.rep('x', 1024) .. i end
            end
            function fine() return 1 end
            """, name: "bomb.lua")
        #expect { try lua.call(script, "bomb") } throws: { error in
            try #require(error as? LuaError).message.contains("memory limit of 8388608 bytes exceeded")
        }
        #expect(lua.memoryInUse < 8 << 20)
        #expect(try lua.call(script, "fine") == [.integer(1)])
    }

    @Test func swiftFunctionsAndTheirErrors() throws {
        let lua = try LuaRuntime()
        lua.setGlobal("host", .table([
            "add": .function(LuaFunction { arguments in [.integer((arguments[0].int ?? 0) + (arguments[1].int ?? 0))] }),
            "fail": .function(LuaFunction { _ in throw HostError() }),
        ]))
        let script = try lua.load("""
            function sum() return host.add(40, 2) end
            function caught() local ok, err = pcall(host.fail) return ok, err end
            function uncaught() host.fail() end
            """, name: "host.lua")
        #expect(try lua.call(script, "sum") == [.integer(42)])
        #expect(try lua.call(script, "caught") == [.boolean(false), .string("the host said no")])
        #expect { try lua.call(script, "uncaught") } throws: { "\($0)" == "host.lua: the host said no" || "\($0)".contains("the host said no") }
    }

    struct HostError: Error, CustomStringConvertible { var description: String { "the host said no" } }
}
