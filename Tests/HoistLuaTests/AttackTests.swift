import Foundation
import Testing
@testable import HoistLua

/// Attacks on the sandbox's budgets by a hostile script: each one must end within its budget,
/// with an error naming the script and line, and leave the runtime usable.
@Suite struct BudgetAttackTests {
    /// Runs `code` as the body of `attack()`, and checks it stops with `message` in under `within` s.
    func expectStopped(_ code: String, limits: LuaRuntime.Limits, message: String, within: Double = 3,
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        let lua = try LuaRuntime(limits: limits)
        let script = try lua.load("function attack()\n\(code)\nend\nfunction fine() return 'still here' end", name: "attack.lua")
        let started = Date()
        #expect(throws: LuaError.self, sourceLocation: sourceLocation) {
            do { try lua.call(script, "attack") } catch let error as LuaError {
                #expect(error.script == "attack.lua" && error.line != nil, "\(error)", sourceLocation: sourceLocation)
                #expect(error.message.contains(message), "\(error)", sourceLocation: sourceLocation)
                throw error
            }
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed < within, "took \(elapsed) s", sourceLocation: sourceLocation)
        #expect(try lua.call(script, "fine") == [.string("still here")], sourceLocation: sourceLocation)
    }

    @Test func xpcallWithALoopingMessageHandlerIsStopped() throws {
        try expectStopped("""
            xpcall(function() while true do end end, function(message) while true do end end)
            while true do end
            """, limits: .init(instructions: 100_000, seconds: 30), message: "instruction budget exceeded")
    }

    @Test func xpcallHandlerLoopAfterAPlainErrorIsStopped() throws {
        try expectStopped("""
            xpcall(function() error("boom") end, function(message) while true do end end)
            """, limits: .init(instructions: 100_000, seconds: 30), message: "instruction budget exceeded")
    }

    @Test func coroutinesShareTheCallsInstructionBudget() throws {
        // Each coroutine once had a fresh count: this ran 10^6 coroutines of 10^6 instructions.
        try expectStopped("""
            while true do
              local co = coroutine.create(function() for i = 1, 300000 do end end)
              coroutine.resume(co)
            end
            """, limits: .init(instructions: 1_000_000, seconds: 60), message: "instruction budget exceeded", within: 2)
    }

    @Test func aCoroutineMadeInAnEarlierCallIsCountedToo() throws {
        let lua = try LuaRuntime(limits: .init(instructions: 1_000_000, seconds: 60))
        let script = try lua.load("""
            local co = coroutine.wrap(function() while true do for i = 1, 300000 do end coroutine.yield() end end)
            function attack() while true do co() end end
            """, name: "attack.lua")
        let started = Date()
        #expect { try lua.call(script, "attack") } throws: { ($0 as? LuaError)?.message.contains("instruction budget exceeded") == true }
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func backtrackingPatternIsStoppedInsideC() throws {
        try expectStopped("""
            local s = string.rep("a", 20000)
            return string.find(s, ".-.-.-.-.-b")
            """, limits: .init(instructions: 10_000_000, seconds: 60), message: "instruction budget exceeded")
    }

    @Test func backtrackingPatternInPcallAndMethodsIsStoppedToo() throws {
        try expectStopped("""
            local s = string.rep("a", 20000)
            for i = 1, 100 do pcall(function() return s:match(".-.-.-.-.-b") end) end
            """, limits: .init(instructions: 10_000_000, seconds: 60), message: "instruction budget exceeded")
        try expectStopped("""
            local s = string.rep("a", 20000)
            return s:gsub("(.-)(.-)(.-)b", "%1")
            """, limits: .init(instructions: 10_000_000, seconds: 60), message: "instruction budget exceeded")
    }

    @Test func longPlainFindIsCounted() throws {
        try expectStopped("""
            local s = string.rep("a", 4000000)
            local needle = string.rep("a", 1000000) .. "b"
            for i = 1, 1000 do string.find(s, needle, 1, true) end
            """, limits: .init(instructions: 10_000_000, memory: 64 << 20, seconds: 60), message: "instruction budget exceeded")
    }

    @Test func tableMoveOverAHugeEmptyRangeIsCounted() throws {
        try expectStopped("table.move({}, 1, 1e15, 2)", limits: .init(instructions: 1_000_000, seconds: 60),
                          message: "instruction budget exceeded")
        let lua = try LuaRuntime()
        let script = try lua.load("""
            function probe()
              local a = table.move({1, 2, 3, 4, 5}, 2, 4, 1)
              local b = table.move({1, 2, 3}, 1, 3, 3)
              local c = table.move({1, 2, 3}, 1, 3, 1, {})
              return table.concat(a, ","), table.concat(b, ","), table.concat(c, ",")
            end
            """, name: "probe.lua")
        #expect(try lua.call(script, "probe") == [.string("2,3,4,4,5"), .string("1,2,1,2,3"), .string("1,2,3")])
    }

    @Test func tableInsertAndRemoveOnASparseTableAreCounted() throws {
        // #t of this empty table is 2^50: insert and remove once shifted that many in C.
        let sparse = "local t = setmetatable({}, { __len = function() return 1 << 50 end })\n"
        try expectStopped(sparse + "table.insert(t, 1, 'x')", limits: .init(instructions: 1_000_000, seconds: 60),
                          message: "instruction budget exceeded")
        try expectStopped(sparse + "table.remove(t, 1)", limits: .init(instructions: 1_000_000, seconds: 60),
                          message: "instruction budget exceeded")
        let lua = try LuaRuntime()
        let script = try lua.load("""
            function probe()
              local t = {1, 2, 3}
              table.insert(t, 4) table.insert(t, 1, 0)
              local removed = table.remove(t, 2)
              local last = table.remove(t)
              local empty = {}
              return table.concat(t, ","), removed, last, table.remove(empty), #empty, select(2, pcall(table.insert, t, 9, 1))
            end
            """, name: "probe.lua")
        let results = try #require(try lua.call(script, "probe"))
        #expect(results.prefix(3) == [.string("0,2,3"), .integer(1), .integer(4)])
        #expect(results.count == 6 && results[4] == .integer(0), "\(results)")
        #expect(results.last?.string?.contains("position out of bounds") == true, "\(results)")
    }

    @Test func patternsStillWork() throws {
        let lua = try LuaRuntime()
        let script = try lua.load("""
            function probe()
              local words = {}
              for w in ("one two three"):gmatch("%a+") do words[#words + 1] = w end
              local k, v = string.match("key = value", "(%w+)%s*=%s*(%w+)")
              return table.concat(words, ","), k, v, ("hello"):find("l+"), (("a.b.c"):gsub("%.", "/"))
            end
            """, name: "probe.lua")
        #expect(try lua.call(script, "probe") == [.string("one,two,three"), .string("key"), .string("value"), .integer(3),
                                                 .string("a/b/c")])
    }

    @Test func wallClockLimitStopsACallWhateverItDoes() throws {
        try expectStopped("while true do end", limits: .init(instructions: Int.max / 2, seconds: 0.5),
                          message: "time limit exceeded", within: 2)
    }

    @Test func looping__closeWhileUnwindingIsStopped() throws {
        try expectStopped("""
            local guard <close> = setmetatable({}, { __close = function() while true do end end })
            while true do end
            """, limits: .init(instructions: 100_000, seconds: 30), message: "instruction budget exceeded")
    }

    @Test func looping__gcFinalizerIsRefused() throws {
        try expectStopped("""
            setmetatable({}, { __gc = function() while true do end end })
            """, limits: .init(), message: "__gc metamethods are not allowed")
    }

    @Test func cancelStopsARunningCallFromAnotherThread() throws {
        let lua = try LuaRuntime(limits: .init(instructions: Int.max / 2, seconds: 600))
        let script = try lua.load("function spin() xpcall(function() while true do end end, function(m) while true do end end) end",
                                  name: "spin.lua")
        let runtime = UncheckedBox(lua)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { runtime.value.cancel() }
        let started = Date()
        #expect { try lua.call(script, "spin") } throws: { ($0 as? LuaError)?.message.contains("stopped: the job is stopping") == true }
        #expect(Date().timeIntervalSince(started) < 2)
        #expect { try lua.call(script, "spin") } throws: { ($0 as? LuaError)?.message.contains("stopped") == true }
    }
}

/// Values crossing between Swift and Lua: bounded in depth and size.
@Suite struct HostValueAttackTests {
    @Test func deeplyNestedResultFromSwiftIsAnErrorNotACrash() throws {
        let lua = try LuaRuntime()
        var deep: LuaValue = .integer(1)
        for _ in 0..<300 { deep = .array([deep]) }
        let value = deep
        lua.setGlobal("deep", .function(LuaFunction { _ in [value] }))
        let script = try lua.load("function probe() local ok, err = pcall(deep) return ok, err end", name: "probe.lua")
        let results = try #require(try lua.call(script, "probe"))
        #expect(results.first == .boolean(false))
        #expect(results.last?.string?.contains("nested deeper than 64 levels") == true, "\(results)")
    }

    @Test func sharedTableDAGHandedToSwiftIsBounded() throws {
        let lua = try LuaRuntime(limits: .init(memory: 2 << 20))
        lua.setGlobal("count", .function(LuaFunction { arguments in [.integer(Int64(arguments.count))] }))
        let script = try lua.load("""
            function attack()
              local t = { "leaf" }
              for i = 1, 30 do t = { t, t } end
              return count(t)
            end
            """, name: "attack.lua")
        let started = Date()
        #expect { try lua.call(script, "attack") } throws: {
            ($0 as? LuaError)?.message.contains("arguments too large: more than the memory limit of 2097152 bytes") == true
        }
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func hugeResultFromSwiftCountsAgainstTheMemoryLimit() throws {
        let lua = try LuaRuntime(limits: .init(memory: 2 << 20))
        lua.setGlobal("big", .function(LuaFunction { _ in [.string(String(repeating: "x", count: 8 << 20))] }))
        let script = try lua.load("function attack() return #big() end", name: "attack.lua")
        #expect { try lua.call(script, "attack") } throws: {
            ($0 as? LuaError)?.message.contains("result too large") == true
        }
        #expect(lua.memoryInUse < 2 << 20)
    }
}

/// Swift reads Lua values raw: a metamethod on a value crossing to Swift never runs, so it can
/// neither escape the call's budgets nor unwind through Swift.
@Suite struct RawReadAttackTests {
    /// A metatable whose own metatable's `__index` runs `body`: Swift once looked up `__jsonarray`
    /// in a table's metatable with `lua_getfield`, which ran it.
    static func trapped(_ body: String) -> String {
        "setmetatable({}, setmetatable({}, { __index = function() \(body) end }))"
    }

    func runtime(memory: Int) throws -> LuaRuntime {
        let lua = try LuaRuntime(limits: .init(instructions: 1_000_000, memory: memory, seconds: 2))
        lua.setGlobal("show", .function(LuaFunction { arguments in [.integer(Int64(arguments.count))] }))
        return lua
    }

    @Test func aHostCallsArgumentWhoseMetatableAllocatesRunsNothing() throws {
        // It ran while the memory cap was lifted for the host call: 1.7 GB under a 4 MiB limit.
        let lua = try runtime(memory: 4 << 20)
        let script = try lua.load("""
            function attack()
              return show(\(Self.trapped("ran = true local t = {} while true do t[#t + 1] = ('x'):rep(100) end"))), ran
            end
            """, name: "attack.lua")
        let started = Date()
        #expect(try lua.call(script, "attack") == [.integer(1), .nil])
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(lua.memoryInUse < 4 << 20)
    }

    @Test func anErrorInAHostCallsArgumentLeavesTheMemoryCapInForce() throws {
        // The error unwound through the host call and skipped the code that restored the cap:
        // a later 300 MiB string.rep succeeded under a 4 MiB limit.
        let lua = try runtime(memory: 4 << 20)
        let script = try lua.load("""
            function attack()
              local shown = pcall(show, \(Self.trapped("error('boom')")))
              local ok, err = pcall(string.rep, "x", 300 << 20)
              return shown, ok, err
            end
            """, name: "attack.lua")
        let results = try #require(try lua.call(script, "attack"))
        #expect(results.prefix(2) == [.boolean(true), .boolean(false)], "\(results)")
        #expect(results.last?.string?.contains("not enough memory") == true, "\(results)")
        #expect(lua.memoryInUse < 4 << 20)
    }

    @Test func aResultWhoseMetatableErrorsIsReadRaw() throws {
        // Read after the call, outside any protected call: Lua's panic, abort().
        let lua = try runtime(memory: 4 << 20)
        let script = try lua.load("function attack() return \(Self.trapped("error('boom')")), 'after' end", name: "attack.lua")
        #expect(try lua.call(script, "attack") == [.table([:]), .string("after")])
    }
}

final class UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// One script must not change what another sees.
@Suite struct IsolationAttackTests {
    @Test func oneScriptCannotReplaceStringUpperOrLogForAnother() throws {
        let lua = try LuaRuntime()
        let said = UncheckedBox(NSMutableArray())
        lua.setGlobal("log", .table(["info": .function(LuaFunction { arguments in
            said.value.add(arguments.first?.string ?? "")
            return []
        })]))
        _ = try lua.load("""
            string.upper = function() return "pwned" end
            log.info = function() end
            pcall(function() getmetatable("").__index.upper = function() return "pwned" end end)
            pcall(function() rawset(getmetatable(_ENV).__index, "tostring", function() return "pwned" end) end)
            """, name: "evil.lua")
        let victim = try lua.load("""
            function probe()
              log.info("still logged")
              return string.upper("x"), ("y"):upper(), tostring(1), getmetatable("") == false
            end
            """, name: "victim.lua")
        #expect(try lua.call(victim, "probe") == [.string("X"), .string("Y"), .string("1"), .boolean(true)])
        #expect(said.value.contains("still logged"))
    }

    @Test func loadKeepsTheScriptsEnvironmentOrTheOneGiven() throws {
        let lua = try LuaRuntime()
        let script = try lua.load("""
            answer = 42
            function probe()
              return load("return string.upper('x') .. answer")(), load("return x", "chunk", "t", { x = 5 })(),
                     select(2, load("\\27Lua", "b", "b"))
            end
            """, name: "probe.lua")
        let results = try #require(try lua.call(script, "probe"))
        #expect(results.prefix(2) == [.string("X42"), .integer(5)])
        #expect(results.last?.string?.contains("attempt to load a binary chunk") == true, "\(results)")
    }
}
