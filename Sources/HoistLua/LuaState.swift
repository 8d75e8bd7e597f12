import Foundation
private import CLua

/// One Lua 5.4 interpreter: a sandbox, budgets, and scripts each loaded into its own
/// environment. Only this file imports liblua.
///
/// Lua errors reach Swift only through `lua_pcall`; Swift functions called from Lua go through a
/// C trampoline that raises their errors after they return, so no `longjmp` crosses a Swift frame.
/// Not thread-safe: use one runtime from one thread (or serial queue) at a time.
///
/// ```swift
/// let lua = try LuaRuntime()
/// let script = try lua.load("function double(x) return 2 * x end", name: "double.lua")
/// try lua.call(script, "double", [.integer(21)])   // [.integer(42)]
/// ```
public final class LuaRuntime: @unchecked Sendable {
    /// The Lua release Hoist runs, such as "5.4.6".
    public static var libraryVersion: String {
        String(cString: hoist_lua_release()).replacingOccurrences(of: "Lua ", with: "")
    }

    /// What one runtime may use.
    public struct Limits: Sendable {
        /// VM instructions one call (a script's top level, or one hook call) may run.
        public var instructions: Int
        /// Bytes all the runtime's scripts may hold together; values host functions hand to
        /// Lua, and Lua values handed to host functions, count against it too.
        public var memory: Int
        /// Seconds of wall clock one call may take, whatever it does (0: no limit).
        public var seconds: Double
        public init(instructions: Int = 10_000_000, memory: Int = 64 << 20, seconds: Double = 10) {
            self.instructions = instructions
            self.memory = memory
            self.seconds = seconds
        }
    }

    /// Libraries and functions outside the default sandbox that a job may allow by name.
    public static let optional: Set<String> = ["io", "os", "debug", "require", "load_binary"]

    private let state: OpaquePointer
    private let budget: UnsafeMutablePointer<hoist_lua_budget>
    public let limits: Limits
    /// Each Swift function pushed, once: pushing the same `LuaFunction` again reuses its box.
    private var functions: [ObjectIdentifier: Unmanaged<Callable>] = [:]

    /// What the trampoline's context points to: the function and the runtime that pushes its results.
    private final class Callable {
        let function: LuaFunction
        unowned let runtime: LuaRuntime
        init(_ function: LuaFunction, _ runtime: LuaRuntime) {
            self.function = function
            self.runtime = runtime
        }
    }
    /// The registry reference of the sandbox table every script environment reads through.
    private var sandbox: Int32 = 0
    /// The registry reference of the function that makes a script's environment.
    private var environmentMaker: Int32 = 0
    /// The registry reference of the string `arrayMark`, for raw reads that allocate nothing.
    private var arrayMarkKey: Int32 = 0

    /// The Lua version this process linked, such as `"Lua 5.4"`.
    public static var version: String { "Lua " + LUA_VERSION_MAJOR + "." + LUA_VERSION_MINOR }

    /// A runtime whose scripts see the sandbox: base functions (no `dofile`, `loadfile`, and
    /// `load` of text only), `string`, `table`, `math`, `utf8`, `coroutine`, and `os.time`,
    /// `os.date`, `os.clock`, `os.getenv`. `allow` adds by name: `io`, `os` (all of it),
    /// `debug`, `require`, `load_binary`.
    public init(limits: Limits = Limits(), allow: Set<String> = []) throws {
        let unknown = allow.subtracting(Self.optional)
        guard unknown.isEmpty else {
            throw LuaError(script: "sandbox", line: nil,
                           message: "cannot allow \(unknown.sorted().joined(separator: ", ")): choose from \(Self.optional.sorted().joined(separator: ", "))",
                           traceback: "")
        }
        self.limits = limits
        budget = .allocate(capacity: 1)
        var initial = hoist_lua_budget()
        initial.limit = limits.memory
        initial.relaxed = 1
        budget.initialize(to: initial)
        state = hoist_lua_newstate(budget)
        luaL_openlibs(state)
        lua_pushstring(state, Self.arrayMark)
        arrayMarkKey = luaL_ref(state, hoist_lua_registryindex())
        buildSandbox(allow: allow)
        budget.pointee.relaxed = 0
    }

    deinit {
        lua_close(state)
        budget.deinitialize(count: 1)
        budget.deallocate()
        for function in functions.values { function.release() }
    }

    /// Bytes the runtime holds now.
    public var memoryInUse: Int { budget.pointee.used }

    /// Stops the call running now, from any thread, and every later call: each fails with
    /// `stopped: the job is stopping`. For signals: no hook can hold a stopping job.
    public func cancel() { hoist_lua_cancel(budget) }

    /// Whether `cancel()` was called.
    public var isCancelled: Bool { hoist_lua_is_cancelled(budget) != 0 }

    /// Seconds left to the running call (for host functions that wait, such as `http.post`).
    public var secondsLeft: Double? {
        let deadline = budget.pointee.deadline
        guard budget.pointee.armed != 0, deadline > 0 else { return nil }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return max(0, deadline - (Double(now.tv_sec) + Double(now.tv_nsec) / 1e9))
    }

    /// Nesting deeper than this is refused when values cross between Swift and Lua.
    public static let maxDepth = 64

    private func buildSandbox(allow: Set<String>) {
        let L = state
        installBudgetedLibraries()
        lua_createtable(L, 0, 32)
        addOpenFunctions(allow: allow)
        addGuardedFunctions(allow: allow)
        sandbox = luaL_ref(L, hoist_lua_registryindex())
        makeEnvironmentMaker()
    }

    /// Puts Hoist's own versions of the library's looping functions in place (see below).
    private func installBudgetedLibraries() {
        let L = state
        // The library's loops in C over a size the script chooses (table.move, insert, remove,
        // sort, concat, unpack, string.rep), which pay for their work with Lua's own checks and
        // messages, and its other functions, which check the clock when given a long string
        // (loops.h); pattern matching that pays for its work (patterns.h). For every string,
        // methods included.
        _ = hoist_lua_getglobal(L, "string")
        _ = hoist_lua_getglobal(L, "table")
        hoist_loops_install(L)
        hoist_lua_pop(L, 1)
        hoist_pm_install(L)
        hoist_lua_pop(L, 1)
    }

    /// Into the sandbox table on top: the base functions and libraries every script gets, and
    /// those `lua.allow` opens.
    private func addOpenFunctions(allow: Set<String>) {
        let L = state
        let base = ["assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget", "rawlen", "rawset",
                    "select", "setmetatable", "getmetatable", "tonumber", "tostring", "type", "xpcall", "_VERSION", "print"]
        for name in base {
            _ = hoist_lua_getglobal(L, name)
            lua_setfield(L, -2, name)
        }
        for library in ["string", "table", "math", "utf8", "coroutine"] + ["io", "debug"].filter(allow.contains) {
            _ = hoist_lua_getglobal(L, library)
            lua_setfield(L, -2, library)
        }
        if allow.contains("require") {
            _ = hoist_lua_getglobal(L, "require")
            lua_setfield(L, -2, "require")
        }
        // os: the safe part, unless allowed whole.
        if allow.contains("os") {
            _ = hoist_lua_getglobal(L, "os")
        } else {
            lua_createtable(L, 0, 4)
            _ = hoist_lua_getglobal(L, "os")
            for name in ["time", "date", "clock", "getenv"] {
                lua_getfield(L, -1, name)
                lua_setfield(L, -3, name)
            }
            hoist_lua_pop(L, 1)
        }
        lua_setfield(L, -2, "os")
    }

    /// Into the sandbox table on top: `load`, `xpcall` and `setmetatable` wrapped so no budget
    /// can be escaped through them.
    private func addGuardedFunctions(allow: Set<String>) {
        let L = state
        // load: text chunks only (a binary chunk can break the VM), unless allowed.
        let mode = allow.contains("load_binary") ? "bt" : "t"
        _ = hoist_lua_dohost(L, """
            local load = load
            return function(chunk, name, mode, env) return load(chunk, name, "\(mode)", env) end
            """)
        lua_setfield(L, -2, "load")
        // xpcall: Lua runs a message handler with hooks off when the error comes from the count
        // hook, so past the budget (or after a stop) the script's handler is not called at all.
        _ = hoist_lua_dohost(L, """
            local xpcall = xpcall
            return function(stopped)
              return function(f, handler, ...)
                return xpcall(f, function(message)
                  if stopped() then return message end
                  return handler(message)
                end, ...)
              end
            end
            """)
        hoist_lua_pushcfunction(L, hoist_lua_stopped)
        _ = hoist_lua_pcall(L, 1, 1, 0)
        lua_setfield(L, -2, "xpcall")
        // setmetatable: no __gc (finalizers run with hooks off, so a looping one never stops).
        _ = hoist_lua_dohost(L, """
            local setmetatable, type, rawget, error = setmetatable, type, rawget, error
            return function(t, mt)
              if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
                error("__gc metamethods are not allowed in hooks", 2)
              end
              return setmetatable(t, mt)
            end
            """)
        lua_setfield(L, -2, "setmetatable")
    }

    /// Hides the shared tables, and makes the function that gives each script its environment.
    private func makeEnvironmentMaker() {
        let L = state
        // No script reaches the shared tables: the string metatable (whose __index is the real
        // string library, used by every script's methods) and the sandbox behind each
        // environment are hidden from getmetatable.
        _ = hoist_lua_dohost(L, "getmetatable('').__metatable = false")
        // Each script's environment: copies of the library tables (two levels, as hoist.job), so
        // a script that replaces string.upper or log.info changes them for itself only; its
        // `load` gives chunks that environment unless told another.
        _ = hoist_lua_dohost(L, """
            local pairs, type, select, setmetatable = pairs, type, select, setmetatable
            return function(sandbox)
              local load = sandbox.load
              local function copy(t, depth)
                local c = {}
                for k, v in pairs(t) do
                  if type(v) == "table" and depth < 2 then c[k] = copy(v, depth + 1) else c[k] = v end
                end
                return c
              end
              return function()
                local env = {}
                for k, v in pairs(sandbox) do
                  if type(v) == "table" then env[k] = copy(v, 1) end
                end
                env.load = function(chunk, name, mode, ...)
                  if select("#", ...) > 0 then return load(chunk, name, mode, (...)) end
                  return load(chunk, name, mode, env)
                end
                return setmetatable(env, { __index = sandbox, __metatable = false })
              end
            end
            """)
        lua_rawgeti(L, hoist_lua_registryindex(), lua_Integer(sandbox))
        _ = hoist_lua_pcall(L, 1, 1, 0)
        environmentMaker = luaL_ref(L, hoist_lua_registryindex())
    }

    /// Adds a global every script sees (a host API table such as `log` or `json`).
    public func setGlobal(_ name: String, _ value: LuaValue) {
        budget.pointee.relaxed = 1
        defer { budget.pointee.relaxed = 0 }
        lua_rawgeti(state, hoist_lua_registryindex(), lua_Integer(sandbox))
        push(value)
        lua_setfield(state, -2, name)
        hoist_lua_pop(state, 1)
    }

    /// Sets a field of a global table every script sees, such as `os.getenv`.
    public func setField(_ table: String, _ key: String, _ value: LuaValue) {
        budget.pointee.relaxed = 1
        defer { budget.pointee.relaxed = 0 }
        lua_rawgeti(state, hoist_lua_registryindex(), lua_Integer(sandbox))
        lua_getfield(state, -1, table)
        push(value)
        lua_setfield(state, -2, key)
        hoist_lua_pop(state, 2)
    }

    /// Checks a script's syntax without running it.
    /// - Throws: `LuaError` with the line of the first syntax error.
    public static func checkSyntax(_ source: String, name: String) throws {
        try checkSyntax(Array(source.utf8), name: name)
    }

    /// Compiles `source`, Lua source as bytes (a string literal may hold any byte: Latin-1
    /// scripts are Lua too), without running it.
    public static func checkSyntax(_ source: [UInt8], name: String) throws {
        let runtime = try LuaRuntime()
        let L = runtime.state
        let status = runtime.loadChunk(source, name: name)
        if status != LUA_OK { throw runtime.popError(script: name) }
        hoist_lua_pop(L, 1)
    }

    /// Compiles `source` into an environment of its own and runs its top level (which defines
    /// its functions), under the budgets.
    /// `globals` are set in the script's environment before its top level runs (a plugin's
    /// `settings`).
    public func load(_ source: String, name: String, globals: [String: LuaValue] = [:]) throws -> LuaScript {
        try load(Array(source.utf8), name: name, globals: globals)
    }

    /// `load(_:name:globals:)` of Lua source as bytes, as read from a file: Lua source need not
    /// be UTF-8 (a string literal may hold Latin-1 bytes).
    public func load(_ source: [UInt8], name: String, globals: [String: LuaValue] = [:]) throws -> LuaScript {
        let L = state
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        lua_pushcclosure(L, hoist_lua_traceback, 0)
        let status = loadChunk(source, name: name)
        if status != LUA_OK { throw popError(script: name) }
        // The script's environment: its own globals and its own copy of every library, reading
        // through to the sandbox's base functions (see `environmentMaker`).
        budget.pointee.relaxed = 1
        lua_rawgeti(L, hoist_lua_registryindex(), lua_Integer(environmentMaker))
        let made = hoist_lua_pcall(L, 0, 1, 0)
        budget.pointee.relaxed = 0
        if made != LUA_OK { throw popError(script: name) }
        lua_pushvalue(L, -1)
        let environment = luaL_ref(L, hoist_lua_registryindex())
        if !globals.isEmpty {
            budget.pointee.relaxed = 1
            for (key, value) in globals {
                push(value)
                lua_setfield(L, -2, key)
            }
            budget.pointee.relaxed = 0
        }
        _ = lua_setupvalue(L, -2, 1)
        try protectedCall(arguments: 0, results: 0, handler: top + 1, script: name)
        return LuaScript(name: name, environment: environment)
    }

    /// Calls the script's global function `function` with `arguments`, under the budgets.
    /// - Returns: its results, or nil when the script defines no such function.
    @discardableResult
    public func call(_ script: LuaScript, _ function: String, _ arguments: [LuaValue] = []) throws -> [LuaValue]? {
        let L = state
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        lua_pushcclosure(L, hoist_lua_traceback, 0)
        lua_rawgeti(L, hoist_lua_registryindex(), lua_Integer(script.environment))
        lua_pushstring(L, function)
        guard lua_rawget(L, -2) == LUA_TFUNCTION else { return nil }
        budget.pointee.relaxed = 1
        for argument in arguments { push(argument) }
        budget.pointee.relaxed = 0
        try protectedCall(arguments: Int32(arguments.count), results: LUA_MULTRET, handler: top + 1, script: script.name)
        let count = lua_gettop(L) - (top + 2)
        var allowance = limits.memory > 0 ? limits.memory : .max
        readingStopped = nil
        let results = (0..<count).map { value(at: top + 3 + $0, allowance: &allowance) }
        guard allowance >= 0 else {
            // Named at the line that defines the function (the environment is still at top + 2).
            lua_pushstring(L, function)
            _ = lua_rawget(L, top + 2)
            var definition = lua_Debug()
            let line = lua_getinfo(L, ">S", &definition) != 0 && definition.linedefined > 0 ? Int(definition.linedefined) : nil
            let problem = readingStopped.map { "reading what \(function) returned: \($0)" }
                ?? "\(function) returned more than the memory limit of \(limits.memory) bytes"
            throw LuaError(script: script.name, line: line, message: problem, traceback: "")
        }
        return results
    }

    /// Whether the script defines a global function of that name.
    public func defines(_ script: LuaScript, _ function: String) -> Bool {
        let L = state
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        lua_rawgeti(L, hoist_lua_registryindex(), lua_Integer(script.environment))
        lua_pushstring(L, function)
        return lua_rawget(L, -2) == LUA_TFUNCTION
    }

    private func loadChunk(_ source: [UInt8], name: String) -> Int32 {
        var bytes = source
        return bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    hoist_luaL_loadbuffer(state, $0, buffer.count, "@" + name, "t")
                }
            } ?? hoist_luaL_loadbuffer(state, "", 0, "@" + name, "t")
        }
    }

    private func protectedCall(arguments: Int32, results: Int32, handler: Int32, script: String) throws {
        if isCancelled { throw LuaError(script: script, line: nil, message: "stopped: the job is stopping", traceback: "") }
        hoist_lua_arm(state, Int64(limits.instructions), limits.seconds)
        let status = hoist_lua_pcall(state, arguments, results, handler)
        hoist_lua_disarm(state)
        if status != LUA_OK {
            let error = popError(script: script)
            if budget.pointee.exceeded != 0 { hoist_lua_collect(state) }
            throw error
        }
    }

    /// Pops an error message (with its traceback) and parses `script:line: message`.
    private func popError(script: String) -> LuaError {
        let text = hoist_lua_tostring(state, -1).map { String(cString: $0) } ?? "(error object is not a string)"
        hoist_lua_pop(state, 1)
        var lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        var first = String(lines.removeFirst())
        let traceback = lines.first.map(String.init) ?? ""
        if budget.pointee.exceeded != 0, first.hasSuffix("not enough memory") {
            first = "memory limit of \(limits.memory) bytes exceeded"
        }
        if let located = Self.located(first) {
            return LuaError(script: Self.whole(located.script, of: script), line: located.line, message: located.message, traceback: traceback)
        }
        // An error raised in C (a library function's) has no position: the innermost script line
        // in the traceback is where it was called.
        for frame in traceback.split(separator: "\n") {
            let frame = frame.trimmingCharacters(in: .whitespaces)
            guard !frame.hasPrefix("[C]"), !frame.hasPrefix("(hoist)"), let located = Self.located(frame) else { continue }
            return LuaError(script: Self.whole(located.script, of: script), line: located.line, message: first, traceback: traceback)
        }
        return LuaError(script: script, line: nil, message: first, traceback: traceback)
    }

    /// The script's whole name where Lua shortened it (a chunk name longer than `LUA_IDSIZE` is
    /// `...` and its end): messages name a script by its path as the user gave it.
    private static func whole(_ shown: String, of script: String) -> String {
        guard shown.hasPrefix("..."), script.count > shown.count - 3, script.hasSuffix(shown.dropFirst(3)) else { return shown }
        return script
    }

    /// `name:12: message` as its parts, or nil.
    private static func located(_ first: String) -> (script: String, line: Int, message: String)? {
        // "name:12: message" -> script, line, message.
        if let colon = first.firstIndex(of: ":") {
            let rest = first[first.index(after: colon)...]
            if let second = rest.firstIndex(of: ":"), let line = Int(rest[..<second]) {
                let message = rest[rest.index(after: second)...].trimmingCharacters(in: .whitespaces)
                return (String(first[..<colon]), line, message)
            }
        }
        return nil
    }

    // MARK: - Values

    /// Pushes a value; false (with nothing pushed) when it nests deeper than `maxDepth` or
    /// the C stack cannot grow. Memory is the caller's concern (see `cost(of:)`).
    @discardableResult
    private func push(_ value: LuaValue, in thread: OpaquePointer? = nil, depth: Int = 0) -> Bool {
        let L = thread ?? state
        guard depth <= Self.maxDepth, lua_checkstack(L, 3) != 0 else { return false }
        switch value {
        case .nil: lua_pushnil(L)
        case .boolean(let flag): lua_pushboolean(L, flag ? 1 : 0)
        case .integer(let number): lua_pushinteger(L, lua_Integer(number))
        case .number(let number): lua_pushnumber(L, number)
        case .string(let text):
            var bytes = Array(text.utf8)
            bytes.withUnsafeMutableBufferPointer { buffer in
                _ = buffer.baseAddress.map { base in
                    base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { lua_pushlstring(L, $0, buffer.count) }
                } ?? lua_pushstring(L, "")
            }
        case .array(let items):
            lua_createtable(L, Int32(clamping: items.count), 0)
            if items.isEmpty {
                // An empty list stays a list when it comes back (JSON `[]`, not `{}`): see `isMarkedArray`.
                lua_createtable(L, 0, 1)
                lua_pushboolean(L, 1)
                lua_setfield(L, -2, Self.arrayMark)
                _ = lua_setmetatable(L, -2)
            }
            for (index, item) in items.enumerated() {
                guard push(item, in: L, depth: depth + 1) else {
                    hoist_lua_pop(L, 1)
                    return false
                }
                lua_rawseti(L, -2, lua_Integer(index + 1))
            }
        case .table(let fields):
            lua_createtable(L, 0, Int32(clamping: fields.count))
            for (key, item) in fields {
                guard push(item, in: L, depth: depth + 1) else {
                    hoist_lua_pop(L, 1)
                    return false
                }
                lua_setfield(L, -2, key)
            }
        case .function(let function):
            let retained = functions[ObjectIdentifier(function)] ?? Unmanaged.passRetained(Callable(function, self))
            functions[ObjectIdentifier(function)] = retained
            hoist_lua_push_swift_function(L, LuaRuntime.callSwift, retained.toOpaque())
        }
        return true
    }

    /// About how many bytes a value takes on either side (a little more than Lua's own count).
    static func cost(of value: LuaValue) -> Int {
        switch value {
        case .string(let text): 48 + text.utf8.count
        case .array(let items): items.reduce(64) { $0 + 16 + cost(of: $1) }
        case .table(let fields): fields.reduce(64) { $0 + 40 + $1.key.utf8.count + cost(of: $1.value) }
        default: 16
        }
    }

    /// Bytes Lua may still take before the memory limit.
    private var memoryLeft: Int { limits.memory > 0 ? max(0, limits.memory - budget.pointee.used) : .max }

    /// The trampoline's Swift side: arguments in, results pushed, errors reported as -1.
    /// Arguments are read within the memory limit (a table shared many times over counts each
    /// time), and results are pushed only if they fit what is left of it.
    private static let callSwift: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Int32 = { L, context in
        guard let L, let context else { return 0 }
        let callable = Unmanaged<Callable>.fromOpaque(context).takeUnretainedValue()
        let runtime = callable.runtime
        // The memory cap is lifted by the trampoline for the whole call (and restored by it, and
        // by every call's start and end), so no error message pushed here can fail for memory:
        // sizes are checked against the limit instead. Arguments are read raw: no Lua runs here.
        var allowance = runtime.limits.memory > 0 ? runtime.limits.memory : .max
        runtime.readingStopped = nil
        let arguments = (0..<lua_gettop(L)).map { runtime.value(at: $0 + 1, in: L, allowance: &allowance) }
        if let stopped = runtime.readingStopped {
            lua_pushstring(L, "reading the arguments: \(stopped)")
            return -1
        }
        guard allowance >= 0 else {
            lua_pushstring(L, "arguments too large: more than the memory limit of \(runtime.limits.memory) bytes")
            return -1
        }
        do {
            let results = try callable.function.body(arguments)
            let cost = results.reduce(0) { $0 + LuaRuntime.cost(of: $1) }
            guard cost <= runtime.memoryLeft else {
                lua_pushstring(L, "result too large: \(cost) bytes would pass the memory limit of \(runtime.limits.memory) bytes")
                return -1
            }
            guard lua_checkstack(L, Int32(clamping: results.count + 3)) != 0 else {
                lua_pushstring(L, "too many results")
                return -1
            }
            for (index, result) in results.enumerated() where !runtime.push(result, in: L) {
                hoist_lua_pop(L, Int32(index))
                lua_pushstring(L, "result nested deeper than \(maxDepth) levels")
                return -1
            }
            return Int32(results.count)
        } catch {
            lua_pushstring(L, "\(error)")
            return -1
        }
    }

    /// The metatable field that marks a table as a list (`json.array`), so that an empty one is
    /// `.array([])`, not `.table([:])`.
    public static let arrayMark = "__jsonarray"

    /// Units of reading not charged to the call yet (`value(at:)`).
    private var readSinceCharge = 0
    /// Why the last read stopped before its end when the call's budget ran out (not memory).
    private var readingStopped: String?

    /// Whether the table at `index` has a metatable with `__jsonarray = true`, read raw: a
    /// metatable's own `__index` never runs (Swift reads Lua values outside every budget). The
    /// key comes from the registry, so the read allocates nothing (it cannot fail for memory).
    private func isMarkedArray(_ index: Int32, in L: OpaquePointer?) -> Bool {
        guard lua_getmetatable(L, index) != 0 else { return false }
        lua_rawgeti(L, hoist_lua_registryindex(), lua_Integer(arrayMarkKey))
        _ = lua_rawget(L, -2)
        let marked = lua_toboolean(L, -1) != 0
        hoist_lua_pop(L, 2)
        return marked
    }

    /// The value at `index` as a `LuaValue`. Each value read takes its cost from `allowance`;
    /// once that goes below zero, reading stops (the caller reports it); so does a call past its
    /// instructions, its time limit or a stop (`readingStopped` says which). Tables nested deeper
    /// than `maxDepth` read as nil.
    private func value(at index: Int32, in L: OpaquePointer? = nil, depth: Int = 0, allowance: inout Int) -> LuaValue {
        let L = L ?? state
        guard allowance >= 0 else { return .nil }
        allowance -= 16
        // Reading is work too: charged to the call like instructions (a unit per value and per 64
        // bytes of a string), with its clock and a stop, a check per 1024 units, so a loop of host
        // calls given long strings meets the time limit within one call.
        let type = lua_type(L, index)
        readSinceCharge += type == LUA_TSTRING ? 1 + Int(lua_rawlen(L, index) >> 6) : 1
        if readSinceCharge >= 1024 {
            defer { readSinceCharge = 0 }
            if let reason = hoist_lua_charge(budget, Int64(readSinceCharge)) {
                readingStopped = String(cString: reason)
                allowance = -1
                return .nil
            }
        }
        switch type {
        case LUA_TBOOLEAN: return .boolean(lua_toboolean(L, index) != 0)
        case LUA_TNUMBER:
            return hoist_lua_isinteger(L, index) != 0 ? .integer(Int64(hoist_lua_tointeger(L, index))) : .number(hoist_lua_tonumber(L, index))
        case LUA_TSTRING:
            var length = 0
            guard let pointer = lua_tolstring(L, index, &length) else { return .string("") }
            allowance -= 32 + length
            guard allowance >= 0 else { return .nil }
            return .string(String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self))
        case LUA_TTABLE:
            guard depth < Self.maxDepth, lua_checkstack(L, 4) != 0 else { return .nil }
            allowance -= 48
            let absolute = lua_absindex(L, index)
            var array: [Int64: LuaValue] = [:]
            var fields: [String: LuaValue] = [:]
            lua_pushnil(L)
            while lua_next(L, absolute) != 0 {
                let item = value(at: -1, in: L, depth: depth + 1, allowance: &allowance)
                if allowance < 0 {
                    hoist_lua_pop(L, 2)
                    return .nil
                }
                if lua_type(L, -2) == LUA_TNUMBER, hoist_lua_isinteger(L, -2) != 0 {
                    array[Int64(hoist_lua_tointeger(L, -2))] = item
                } else if lua_type(L, -2) == LUA_TSTRING {
                    var length = 0
                    let key = lua_tolstring(L, -2, &length)!
                    allowance -= 32 + length
                    fields[String(decoding: UnsafeRawBufferPointer(start: key, count: length), as: UTF8.self)] = item
                }
                hoist_lua_pop(L, 1)
            }
            if fields.isEmpty, !array.isEmpty, Set(array.keys) == Set(1...Int64(array.count)) {
                return .array((1...Int64(array.count)).map { array[$0]! })
            }
            if fields.isEmpty, array.isEmpty, isMarkedArray(absolute, in: L) { return .array([]) }
            for (key, item) in array { fields[String(key)] = item }
            return .table(fields)
        default: return .nil
        }
    }

}

/// A script loaded into a runtime: its name and its environment.
public struct LuaScript: Sendable {
    public let name: String
    fileprivate let environment: Int32
}
