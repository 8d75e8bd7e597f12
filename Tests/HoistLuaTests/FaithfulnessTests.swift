import Foundation
import Testing
@testable import HoistLua

/// The sandbox's own versions of Lua's looping library functions (written again so their
/// work is charged to the budget) keep every check and message of Lua 5.4's C functions: a
/// script fails at once with Lua's message, under a small budget and a large one alike, and no
/// error names an internal chunk.
@Suite struct FaithfulnessTests {
    /// Calls that Lua 5.4 refuses at once, and the message it refuses them with.
    static let refusals: [(code: String, message: String)] = [
        ("table.move({}, 0, math.maxinteger, 1)", "bad argument #3 to 'move' (too many elements to move)"),
        ("table.move({}, 1, math.maxinteger, 2)", "bad argument #4 to 'move' (destination wrap around)"),
        ("table.move({}, 1, 2, 1, 7)", "bad argument #5 to 'move' (table expected, got number)"),
        ("table.move({}, 1.5, 2, 1)", "bad argument #2 to 'move' (number has no integer representation)"),
        ("table.insert(setmetatable({}, { __len = function() return 'abc' end }), 1)", "object length is not an integer"),
        ("table.insert({}, 5, 'x')", "bad argument #2 to 'insert' (position out of bounds)"),
        ("table.insert({}, 1, 2, 3)", "wrong number of arguments to 'insert'"),
        ("table.insert(1, 2)", "bad argument #1 to 'insert' (table expected, got number)"),
        ("table.insert({}, 'x', 2)", "bad argument #2 to 'insert' (number expected, got string)"),
        ("table.remove({}, 5)", "bad argument #2 to 'remove' (position out of bounds)"),
        ("table.remove(setmetatable({}, { __len = function() return 2.5 end }))", "object length is not an integer"),
        ("table.sort(setmetatable({}, { __len = function() return math.maxinteger end }))", "bad argument #1 to 'sort' (array too big)"),
        ("table.sort({1, 2, 3, 4}, function(a, b) return true end)", "invalid order function for sorting"),
        ("table.sort({1, 2, 3, 4, 5}, function(a, b) return true end)", "invalid order function for sorting"),
        ("table.sort({1, 2, 3, 4, 5, 6}, function(a, b) return true end)", "invalid order function for sorting"),
        ("table.sort({3, 1, 2}, 'not a function')", "bad argument #2 to 'sort' (function expected, got string)"),
        ("table.concat({1, {}, 3})", "invalid value (at index 2) in table for 'concat'"),
        ("table.unpack({}, 1, 1e8)", "too many results to unpack"),
        ("string.rep('aa', 1 << 30)", "resulting string too large"),
        ("string.rep('a', 1 << 30, ',')", "resulting string too large"),
    ]

    @Test(arguments: [100_000, 1_000_000_000])
    func eachCheckRaisesLuasMessageAtOnce(instructions: Int) throws {
        let lua = try LuaRuntime(limits: .init(instructions: instructions, seconds: 30))
        for (code, message) in Self.refusals {
            let script = try lua.load("function probe()\n  \(code)\nend\n", name: "faith.lua")
            let started = Date()
            do {
                try lua.call(script, "probe")
                Issue.record("\(code) did not fail")
            } catch let error as LuaError {
                #expect(error.message == "faith.lua:2: \(message)" || error.message == message, "\(code): \(error.message)")
                #expect(error.script == "faith.lua" && error.line == 2, "\(code): \(error)")
                #expect(!error.description.contains("(hoist)"), "\(code): \(error.description)")
            }
            #expect(Date().timeIntervalSince(started) < 1, "\(code) took \(Date().timeIntervalSince(started)) s")
        }
    }

    /// The quicksort sorts what Lua's does: numbers, strings, with and without an order
    /// function, runs already in order and in reverse, many equal keys, and `__lt`.
    @Test func sortSortsAsLuaDoes() throws {
        let lua = try LuaRuntime()
        let script = try lua.load("""
            local function sorted(t, lt)
              for i = 2, #t do
                if lt then assert(not lt(t[i], t[i - 1]), i) else assert(not (t[i] < t[i - 1]), i) end
              end
              return true
            end
            function probe(seed)
              math.randomseed(seed)
              for _, n in ipairs({0, 1, 2, 3, 4, 5, 7, 99, 100, 101, 1000, 5000}) do
                local random, same, up, down, words = {}, {}, {}, {}, {}
                for i = 1, n do
                  random[i] = math.random(-1000, 1000); same[i] = 7; up[i] = i; down[i] = n - i
                  words[i] = string.char(97 + math.random(0, 25), 97 + math.random(0, 25))
                end
                local greater = function(a, b) return a > b end
                local copy = table.move(random, 1, n, 1, {})
                table.sort(random); assert(sorted(random))
                table.sort(copy, greater); assert(sorted(copy, greater))
                table.sort(same); table.sort(up); table.sort(down); table.sort(words)
                assert(sorted(same) and sorted(up) and sorted(down) and sorted(words))
              end
              local mt = { __lt = function(a, b) return a.v < b.v end }
              local objects = {}
              for i = 1, 200 do objects[i] = setmetatable({ v = (i * 37) % 101 }, mt) end
              table.sort(objects)
              return sorted(objects)
            end
            """, name: "sort.lua")
        for seed in 1...5 {
            #expect(try lua.call(script, "probe", [.integer(Int64(seed))]) == [.boolean(true)])
        }
    }

    /// Lua 5.4's results of insert, remove and move at their edges (positions size + 1, 0 on an
    /// empty table, overlapping moves).
    @Test func insertRemoveAndMoveGiveLuasResults() throws {
        let lua = try LuaRuntime()
        let script = try lua.load("""
            function probe()
              local t = {1, 2, 3}
              table.insert(t, 4, 'end'); table.insert(t, 1, 'start')
              local removed = table.remove(t, 6)         -- size + 1: nil, nothing moves
              local first = table.remove(t, 1)
              local empty = {}
              local none = table.remove(empty, 0)        -- #t == 0: position 0 allowed
              local m = table.move({1, 2, 3, 4, 5}, 1, 3, 3)
              return table.concat(t, ','), tostring(removed), first, tostring(none), table.concat(m, ',')
            end
            """, name: "edges.lua")
        #expect(try lua.call(script, "probe") == [.string("1,2,3,end"), .string("nil"), .string("start"), .string("nil"), .string("1,2,1,2,3")])
    }
}
