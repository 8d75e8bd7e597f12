import Foundation
@testable import HoistJobs
import HoistLua
import HoistTestSupport
import Testing

/// Hostile Lua values (Tests/fuzz/corpus/values.txt: metatables whose metamethods loop or fail,
/// deep and shared nesting, huge lengths, coroutines, functions, NaN, integer edges, strings that
/// are not UTF-8) handed to every host function (Tests/fuzz/corpus/calls.txt, `V` standing for
/// the value) and returned from every hook. Whatever the value, each call ends within its time
/// limit, the process never aborts, an error names its script and line, and the memory cap is
/// still in force afterwards. Every value goes to every call once (under 20 s in a debug build); with
/// `HOIST_FUZZ_ROUNDS` above 1, seeded random pairs of values follow (`{ V1, k = V2 }`, V1 with
/// V2 as its metatable's `__index`).
@Suite struct HostileValueFuzzTests {
    static let timeLimit = 0.5
    static let memoryLimit = 4 << 20

    final class Harness {
        let fixture: JobFixture
        let bus: HookBus
        let check: LuaScript
        let item: PlanItem

        /// A job whose one hook is `hook`.
        init(hook: String = "function before_upload(f) end") throws {
            fixture = try JobFixture()
            try fixture.file("a.txt")
            try fixture.directory.write("hook.lua", Data(hook.utf8))
            let job = try fixture.job("""
                storage: { url: 'file:bucket' }
                files: [{ root: src }]
                lua: { instructionLimit: 1000000, memoryLimit: 4MiB, timeLimit: 500ms }
                hooks: [hook.lua]
                """)
            bus = try HookBus(job: job, storage: try job.makeStorage()) { _ in }
            // What `s.task` holds in a snapshot (its id names no upload here).
            bus.runtime.setGlobal("task", .table(["id": .integer(1), "pause": bus.taskMethods.pause,
                                                  "resume": bus.taskMethods.resume, "cancel": bus.taskMethods.cancel]))
            check = try bus.runtime.load("""
                function big() return pcall(string.rep, "x", \(HostileValueFuzzTests.memoryLimit)) end
                """, name: "check.lua")
            item = try #require(Array(Planner(job: job)).first)
        }

        /// Runs `function` of `script`; records a call that took too long or whose error does
        /// not name the script and line, or after which a big allocation succeeds.
        func expectBounded(_ script: LuaScript, _ function: String, _ arguments: [LuaValue] = [], what: String) {
            let started = Date()
            do {
                _ = try bus.runtime.call(script, function, arguments)
            } catch let error as LuaError {
                let located = error.script == script.name && error.line != nil
                // A memory error unwinds with no message handler: no line to name.
                let memory = error.message.hasPrefix("memory limit of \(HostileValueFuzzTests.memoryLimit) bytes exceeded")
                if !located && !memory { Issue.record("\(what): error names no script and line: \(error)") }
            } catch {
                Issue.record("\(what): not a LuaError: \(error)")
            }
            expectInBudget(since: started, what: what)
        }

        func expectInBudget(since started: Date, what: String) {
            let took = Date().timeIntervalSince(started)
            if took > HostileValueFuzzTests.timeLimit + 0.5 { Issue.record("\(what): took \(took) s") }
            let big = try? bus.runtime.call(check, "big")
            if big?.first != .boolean(false) { Issue.record("\(what): the memory cap is off: \(String(describing: big))") }
            if bus.runtime.memoryInUse > HostileValueFuzzTests.memoryLimit {
                Issue.record("\(what): \(bus.runtime.memoryInUse) bytes in use")
            }
        }
    }

    func corpus(_ name: String) throws -> [String] {
        try String(contentsOf: FuzzTests.corpus.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// A script whose function `callN` is `calls[N]` with `value` for each `V`, and whose every
    /// hook returns `value`; the value is made anew in each call.
    func script(_ value: String, calls: [String]) -> String {
        var lines = ["local function V() return \(value) end"]
        for (index, call) in calls.enumerated() {
            lines.append("function call\(index)() \(call.replacingOccurrences(of: "V", with: "V()")) end")
        }
        for hook in HookBus.hookNames { lines.append("function \(hook)() return V() end") }
        lines.append("function answers() return { destination = V(), metadata = V() }, { metadata = { cacheControl = V(), customMetadata = V() } } end")
        return lines.joined(separator: "\n")
    }

    func feed(_ values: [String], calls: [String], to harness: Harness) async throws {
        let bus = harness.bus
        for (index, value) in values.enumerated() {
            let name = "value\(index).lua"
            let loaded: LuaScript
            do { loaded = try bus.runtime.load(script(value, calls: calls), name: name) } catch {
                Issue.record("\(name) does not load: \(error)")
                continue
            }
            for (number, call) in calls.enumerated() {
                harness.expectBounded(loaded, "call\(number)", what: "\(call) with V = \(value.prefix(120))")
            }
            for hook in HookBus.hookNames {
                harness.expectBounded(loaded, hook, [.table(["size": .integer(1)])], what: "\(hook) returning \(value.prefix(120))")
            }
            harness.expectBounded(loaded, "answers", what: "before_upload's fields set to \(value.prefix(120))")
        }
        // The whole before_upload path: the answer read back and applied to the file.
        for value in values {
            let answering = try Harness(hook: "function before_upload(f) return \(value) end")
            let started = Date()
            do { _ = try await answering.bus.beforeUpload(answering.item) } catch {
                let text = error.description
                if !text.contains("hook.lua:") && !text.hasPrefix("before_upload: ") && !text.hasPrefix("before_upload gave")
                    && !text.contains("memory limit of \(Self.memoryLimit) bytes exceeded") {
                    Issue.record("before_upload returning \(value.prefix(120)): \(text)")
                }
            }
            answering.expectInBudget(since: started, what: "before_upload returning \(value.prefix(120))")
        }
    }

    @Test func everyHostFunctionAndHookReturnSurvivesHostileValues() async throws {
        let harness = try Harness()
        let values = try corpus("values.txt")
        let calls = try corpus("calls.txt")
        #expect(values.count >= 40 && calls.count >= 20)
        let started = Date()
        try await feed(values, calls: calls, to: harness)
        var random = FuzzTests.Random(state: FuzzTests.seed ^ 5)
        let pairs = (0..<(200 * (FuzzTests.rounds - 1))).map { _ -> String in
            let (a, b) = (values[random.below(values.count)], values[random.below(values.count)])
            return random.below(2) == 0 ? "{ \(a), k = \(b) }" : "setmetatable({ \(a) }, { __index = \(b) })"
        }
        try await feed(pairs, calls: calls, to: harness)
        // The job's folder holds nothing Hoist reads that a call wrote.
        let manifest = try String(contentsOf: harness.fixture.directory.url.appendingPathComponent("job.yaml"), encoding: .utf8)
        #expect(manifest.hasSuffix("hooks: [hook.lua]\n") || manifest.hasSuffix("hooks: [hook.lua]"))
        #expect(Date().timeIntervalSince(started) < 60 * Double(FuzzTests.rounds))
    }
}
