import Foundation
import HoistYAML
import HoistLua
import HoistStorage
import Synchronization

/// A hook's words for the operator: `log.info("...")` and runtime errors.
/// The message is one line of visible text: control characters a hook writes (newlines that
/// would forge Hoist's own lines, terminal escape sequences) are shown escaped, as `\u{1B}`.
public struct HookLogLine: Sendable {
    public enum Level: String, Sendable { case debug, info, warn, error }
    public let level: Level
    public let script: String
    public let message: String

    public init(level: Level, script: String, message: String) {
        self.level = level
        self.script = Self.visible(script)
        self.message = Self.visible(message)
    }

    static func visible(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || (0x7f...0x9f).contains($0.value) }) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if (scalar.value < 0x20 && scalar != "\t") || (0x7f...0x9f).contains(scalar.value) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

/// A hook that cannot be used: a file that cannot be read, or a syntax error (`FILE:LINE: message`).
public struct HookError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// Delivers a job's events to its Lua hooks, in order, on one serial executor, so hook code
/// needs no locks. See docs/hooks.md.
///
/// Delivery policy: every event but `on_progress` is always delivered. `on_progress` is paced
/// per upload (at most one per `lua.progressInterval`; the first and the 100% one always), and
/// dropped while more than `lua.queueLimit` events wait, so a slow hook never holds up transfers.
/// A hook error is logged with its script and line; the uploads go on.
public final class HookBus: JobObserver, @unchecked Sendable {
    /// The decision for a file `before_upload` answered `false` to.
    public static let vetoed = PlanItem.Decision.skip("skipped by before_upload")

    // `runtime` and `scripts` are touched only on `queue`.
    let runtime: LuaRuntime
    private var scripts: [LuaScript] = []
    private let queue = DispatchQueue(label: "hoist.hooks")
    let job: Job
    let storage: Storage
    let log: @Sendable (HookLogLine) -> Void
    let settings: LuaSettings
    let runID: String
    let started = Date()
    /// Events queued for the hooks and not yet delivered: past `lua.queueLimit`, progress is dropped.
    private let waiting = Mutex(0)
    /// `on_progress` at most once per `lua.progressInterval` per upload.
    private let progressPacer: ProgressPacer
    let controls = JobControls()
    /// Uploads hooks may control, by id; `s.task:pause()` and friends look them up.
    let tasks = TaskRegistry()
    /// The task methods, made once and shared by every snapshot (`s.task:pause()`).
    private let taskMethods: (pause: LuaValue, resume: LuaValue, cancel: LuaValue)

    private static func makeTaskMethods(_ tasks: TaskRegistry) -> (pause: LuaValue, resume: LuaValue, cancel: LuaValue) {
        func method(_ action: @escaping @Sendable (StorageUploadTask) -> Void) -> LuaValue {
            .function(LuaFunction { arguments in
                guard let id = arguments.first?["id"].int else {
                    throw HookError(description: "call task methods with ':', as s.task:pause()")
                }
                if let task = tasks.task(id) { action(task) }
                return []
            })
        }
        return (method { $0.pause() }, method { $0.resume() }, method { $0.cancel() })
    }

    /// Live upload tasks by a small id, forgotten once they finish.
    final class TaskRegistry: Sendable {
        private let state = Mutex<(next: Int64, ids: [ObjectIdentifier: Int64], tasks: [Int64: StorageUploadTask])>((1, [:], [:]))
        func register(_ task: StorageUploadTask, finished: Bool) -> Int64 {
            state.withLock { state in
                let key = ObjectIdentifier(task)
                let id = state.ids[key] ?? state.next
                if state.ids[key] == nil {
                    state.next += 1
                    state.ids[key] = id
                    state.tasks[id] = task
                }
                if finished {
                    state.ids[key] = nil
                    state.tasks[id] = nil
                }
                return id
            }
        }
        func task(_ id: Int64) -> StorageUploadTask? { state.withLock { $0.tasks[id] } }
    }

    /// The script being called now, for log lines.
    let currentScript = CurrentScript()
    /// `http.post` requests in flight, so `cancel()` can stop them.
    let requests = Requests()

    /// Work a hook waits for, cancellable from another thread.
    final class Requests: Sendable {
        private let state = Mutex<(cancelled: Bool, tasks: [Int: Task<Void, Never>], next: Int)>((false, [:], 0))

        /// Runs `work` and waits for it (the hooks' queue may block); nil when cancelled.
        func wait<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T? {
            let semaphore = DispatchSemaphore(value: 0)
            let result = Mutex<T?>(nil)
            let task = Task {
                let value = await work()
                result.withLock { $0 = value }
                semaphore.signal()
            }
            let id = state.withLock { state -> Int? in
                guard !state.cancelled else { return nil }
                state.next += 1
                state.tasks[state.next] = task
                return state.next
            }
            guard let id else {
                task.cancel()
                return nil
            }
            semaphore.wait()
            state.withLock { _ = $0.tasks.removeValue(forKey: id) }
            return result.withLock { $0 }
        }

        func cancelAll() {
            let tasks = state.withLock { state -> [Task<Void, Never>] in
                state.cancelled = true
                return Array(state.tasks.values)
            }
            for task in tasks { task.cancel() }
        }
    }

    final class CurrentScript: Sendable {
        private let name = Mutex("")
        var value: String {
            get { name.withLock { $0 } }
            set { name.withLock { $0 = newValue } }
        }
    }

    /// The job's pause and resume, once a runner is attached.
    final class JobControls: Sendable {
        private let actions = Mutex<(pause: @Sendable () -> Void, resume: @Sendable () -> Void)?>(nil)
        func set(pause: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void) {
            actions.withLock { $0 = (pause, resume) }
        }
        func pause() { actions.withLock { $0 }?.pause() }
        func resume() { actions.withLock { $0 }?.resume() }
    }
    /// Names of the hook functions some script defines (set while loading, read-only after).
    public private(set) var defined: Set<String> = []

    /// The hooks' sources: files relative to the manifest, `inline:` entries (named
    /// `JOB.yaml#hooks[N]`) and plugins by name (named `plugin NAME`), each with the globals it
    /// gets (a plugin's `settings`).
    /// - Throws: `HookError` for a file that cannot be read; `YAMLError`s (each with its line and
    ///   column) for plugins that are not found or settings they do not take.
    public static func sources(of job: Job) throws -> [(name: String, source: String, globals: [String: LuaValue])] {
        var problems: [YAMLError] = []
        var result: [(name: String, source: String, globals: [String: LuaValue])] = []
        for (index, hook) in job.manifest.hooks.enumerated() {
            switch hook {
            case .inline(let source):
                result.append(("\(job.file)#hooks[\(index)]", source, [:]))
            case .file(let path):
                let resolved = job.resolve(path)
                guard let source = try? String(contentsOfFile: resolved, encoding: .utf8) else {
                    throw HookError(description: "\(job.file): cannot read hook \(path) (\(resolved))")
                }
                result.append((path, source, [:]))
            case .plugin(let name, let given):
                guard let plugin = PluginCatalog.find(name, for: job, environment: job.environment),
                      let source = try? String(contentsOfFile: plugin.path, encoding: .utf8) else {
                    let names = PluginCatalog.all(for: job, environment: job.environment).map(\.name)
                    var message = "no plugin '\(name)'"
                    if let near = names.min(by: { editDistance($0, name) < editDistance($1, name) }), editDistance(near, name) <= 2 {
                        message += " (did you mean '\(near)'?)"
                    }
                    message += names.isEmpty ? "; no plugins were found (see hoist plugins)" : "; the plugins are \(names.joined(separator: ", "))"
                    problems.append(job.locatedError(message, at: ["hooks", index, "plugin"]))
                    continue
                }
                let (settings, issues) = plugin.convert(given)
                for issue in issues {
                    problems.append(job.locatedError(issue.message, at: issue.key.map { ["hooks", index, "with", $0] } ?? ["hooks", index]))
                }
                result.append(("plugin \(name)", source, ["settings": settings]))
            }
        }
        if !problems.isEmpty { throw YAMLError(combining: problems) }
        return result
    }

    /// Compiles every hook of a job without running it.
    /// - Throws: `HookError` reading `FILE:LINE: message` for the first syntax error; the
    ///   `YAMLError`s of `sources(of:)`.
    public static func check(_ job: Job) throws {
        for (name, source, _) in try sources(of: job) {
            do {
                try LuaRuntime.checkSyntax(source, name: name)
            } catch let error as LuaError {
                throw HookError(description: error.description)
            }
        }
    }

    public init(job: Job, storage: Storage, runID: String = UUID().uuidString.lowercased(),
                log: @escaping @Sendable (HookLogLine) -> Void) throws {
        self.job = job
        self.storage = storage
        self.log = log
        self.runID = runID
        settings = job.manifest.lua
        progressPacer = ProgressPacer(interval: job.manifest.lua.progressInterval.seconds)
        taskMethods = Self.makeTaskMethods(tasks)
        do {
            runtime = try LuaRuntime(limits: .init(instructions: settings.instructionLimit, memory: Int(settings.memoryLimit.bytes),
                                                   seconds: settings.timeLimit.seconds),
                                     allow: Set(settings.allow))
        } catch let error as LuaError {
            throw HookError(description: error.description)
        }
        installHostAPI()
        for (name, source, globals) in try Self.sources(of: job) {
            currentScript.value = name
            do {
                let script = try runtime.load(source, name: name, globals: globals)
                scripts.append(script)
                for function in Self.hookNames where runtime.defines(script, function) { defined.insert(function) }
            } catch let error as LuaError {
                throw HookError(description: error.description)
            }
        }
    }

    static let hookNames = ["on_resume", "on_progress", "on_pause", "on_success", "on_failure", "on_job_start",
                            "on_job_end", "before_upload"]

    /// Lets hooks pause and resume the whole job (`hoist.pause_job()`, `hoist.resume_job()`).
    public func attach(pause: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void) {
        controls.set(pause: pause, resume: resume)
    }

    /// Stops the hooks for good, from any thread (a signal): the call running now ends within
    /// moments, whatever it does (a loop, a pattern, an `http.post` waiting on a server), and no
    /// later call runs. Each is logged as `stopped: the job is stopping`.
    public func cancel() {
        runtime.cancel()
        requests.cancelAll()
    }

    /// Waits until every queued event has been delivered (without holding a thread).
    public func drain() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in queue.async { done.resume() } }
    }

    // MARK: - Delivery

    private func deliver(_ function: String, _ argument: LuaValue) {
        guard defined.contains(function) else { return }
        waiting.withLock { $0 += 1 }
        queue.async { [self] in
            waiting.withLock { $0 -= 1 }
            callAll(function, [argument])
        }
    }

    /// Calls `function` in every script defining it; errors are logged, never thrown.
    /// - Returns: the last results, and the first error's text (`script:line: message`).
    @discardableResult
    private func callAll(_ function: String, _ arguments: [LuaValue]) -> (results: [LuaValue], error: String?) {
        var last: [LuaValue] = []
        var failure: String?
        for script in scripts {
            currentScript.value = script.name
            do {
                if let results = try runtime.call(script, function, arguments) { last = results }
            } catch {
                let text = (error as? LuaError)?.description ?? "\(error)"
                failure = failure ?? text
                log(HookLogLine(level: .error, script: script.name, message: "\(text) (in \(function))"))
            }
        }
        return (last, failure)
    }

    /// `files` and `bytes` are in the table only when counted before the run (a run walks once).
    public func jobStarted(_ job: Job, files: Int?, bytes: Int64?) {
        var table: [String: LuaValue] = [
            "name": .string(job.manifest.name), "run_id": .string(runID), "started": .integer(Int64(started.timeIntervalSince1970)),
            "storage": .string(job.manifest.storage.url),
        ]
        if let files, let bytes {
            table["files"] = .integer(Int64(files))
            table["bytes"] = .integer(bytes)
        }
        deliver("on_job_start", .table(table))
    }

    public func fileSkipped(_ item: PlanItem, reason: String) {}

    public func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        let function: String
        switch snapshot.status {
        case .resume: function = "on_resume"
        case .progress: function = "on_progress"
        case .pause: function = "on_pause"
        case .success: function = "on_success"
        case .failure: function = "on_failure"
        case .unknown: return
        }
        guard defined.contains(function) else { return }
        let completed = snapshot.progress?.completedUnitCount ?? 0
        let total = snapshot.progress?.totalUnitCount ?? item.file.size
        if snapshot.status == .progress {
            let allowed = waiting.withLock { $0 < settings.queueLimit }
            guard progressPacer.admit(item.destination, final: completed >= total, allowed: allowed) else { return }
        } else if snapshot.status == .success || snapshot.status == .failure {
            progressPacer.finished(item.destination)
        }
        var table = Self.table(for: snapshot, item: item)
        if let task = snapshot.task as? StorageUploadTask {
            let id = tasks.register(task, finished: snapshot.status == .success || snapshot.status == .failure)
            table["task"] = .table(["id": .integer(id), "pause": taskMethods.pause, "resume": taskMethods.resume,
                                    "cancel": taskMethods.cancel])
        }
        let path = item.destination
        let stored = snapshot.status == .success ? snapshot.metadata?.resource : nil
        let prepared = table
        waiting.withLock { $0 += 1 }
        queue.async { [self] in
            waiting.withLock { $0 -= 1 }
            var table = prepared
            if let stored, let url = blocking({ try await self.storage.backend.downloadURL(for: path, stored: stored) }) {
                table["downloadURL"] = .string(url.absoluteString)
            }
            callAll(function, [.table(table)])
        }
    }

    public func jobFinished(_ summary: JobSummary) {
        deliver("on_job_end", .table([
            "name": .string(summary.job), "run_id": .string(runID), "uploaded": .integer(Int64(summary.uploaded)),
            "failed": .integer(Int64(summary.failed)), "skipped": .integer(Int64(summary.skipped)),
            "cancelled": .integer(Int64(summary.cancelled)), "bytes": .integer(summary.bytes),
            "seconds": .number(summary.seconds), "interrupted": .boolean(summary.interrupted),
        ]))
    }

    /// Asks `before_upload(file)`: nil or true keeps the item, false skips it, a table may set
    /// `destination` and `metadata` fields. An item the hook does not change keeps everything,
    /// its `resumeSession` included (the runner checks a changed one against the journal again).
    /// - Throws: `HookError` when the hook fails (an error, a budget, a stop) or answers with a
    ///   bad destination or metadata: the file must then fail, never go up unchecked.
    public func beforeUpload(_ item: PlanItem) async throws(HookError) -> PlanItem {
        guard defined.contains("before_upload") else { return item }
        let file: LuaValue = .table([
            "path": .string(item.file.path), "relpath": .string(item.file.relativePath), "size": .integer(item.file.size),
            "mtime": .integer(Int64(item.file.modified.timeIntervalSince1970)), "destination": .string(item.destination),
            "metadata": Self.metadataTable(item.attributes),
        ])
        let (answer, failure): (LuaValue, String?) = await withCheckedContinuation { continuation in
            queue.async { [self] in
                let (results, failure) = callAll("before_upload", [file])
                continuation.resume(returning: (results.first ?? .nil, failure))
            }
        }
        if let failure { throw HookError(description: "before_upload failed: \(failure)") }
        if runtime.isCancelled { throw HookError(description: "before_upload failed: stopped: the job is stopping") }
        var changed = item
        switch answer {
        case .boolean(false):
            changed.decision = Self.vetoed
        case .table(let fields):
            var destination = item.destination
            var attributes = item.attributes
            if let value = fields["destination"], value != .nil {
                guard let text = value.string else { throw HookError(description: "before_upload: destination must be a string") }
                do { destination = try normalizedObjectPath(text) } catch {
                    throw HookError(description: "before_upload gave a bad destination: \(error.message)")
                }
            }
            if case .table(let metadata) = fields["metadata"] ?? .nil {
                for (key, value) in metadata {
                    let text = value.string
                    if let text, let problem = headerValueProblem(text) {
                        throw HookError(description: "before_upload: metadata \(key) \(problem)")
                    }
                    if let field = ObjectResource.headerFields.first(where: { $0.name == key }) {
                        attributes[keyPath: field.keyPath] = text
                        continue
                    }
                    switch key {
                    case "customMetadata":
                        if case .table(let custom) = value {
                            var merged = attributes.metadata ?? [:]
                            for (k, v) in custom {
                                if let problem = headerValueProblem(k) ?? v.string.flatMap(headerValueProblem) {
                                    throw HookError(description: "before_upload: customMetadata \(k) \(problem)")
                                }
                                merged[k] = v.string
                            }
                            attributes.metadata = merged
                        }
                    default: break
                    }
                }
            }
            if destination != item.destination || attributes != item.attributes {
                changed = PlanItem(file: item.file, destination: destination, attributes: attributes, decision: item.decision,
                                   fileSetIndex: item.fileSetIndex, resumeSession: item.resumeSession)
            }
        default:
            break
        }
        return changed
    }

    // MARK: - Snapshots as tables

    static func table(for snapshot: StorageTaskSnapshot, item: PlanItem) -> [String: LuaValue] {
        let completed = snapshot.progress?.completedUnitCount ?? 0
        let total = snapshot.progress?.totalUnitCount ?? 0
        var table: [String: LuaValue] = [
            "status": .string(snapshot.status.name),
            "reference": .table(["bucket": .string(snapshot.reference.bucket), "fullPath": .string(snapshot.reference.fullPath),
                                 "name": .string(snapshot.reference.name)]),
            "progress": .table(["completed": .integer(completed), "total": .integer(total),
                                "fraction": .number(total > 0 ? Double(completed) / Double(total) : 1)]),
            "file": .table(["path": .string(item.file.path), "relpath": .string(item.file.relativePath),
                            "size": .integer(item.file.size), "mtime": .integer(Int64(item.file.modified.timeIntervalSince1970))]),
        ]
        if let metadata = snapshot.metadata { table["metadata"] = metadataTable(metadata.resource) }
        if let (code, message) = snapshot.failure {
            table["error"] = .table(["code": .string(code.name), "rawValue": .integer(Int64(code.rawValue)),
                                     "message": .string(redactingQueries(message))])
        }
        return table
    }

    static func metadataTable(_ resource: ObjectResource) -> LuaValue {
        var fields: [String: LuaValue] = [:]
        func put(_ key: String, _ value: String?) { if let value { fields[key] = .string(value) } }
        put("bucket", resource.bucket)
        put("name", resource.name.map { String($0.split(separator: "/").last ?? "") })
        put("fullPath", resource.name)
        for field in ObjectResource.headerFields { put(field.name, resource[keyPath: field.keyPath]) }
        put("md5Hash", resource.md5Hash)
        put("crc32c", resource.crc32c)
        if let size = resource.size { fields["size"] = .integer(size) }
        if let generation = resource.generation { fields["generation"] = .integer(generation) }
        if let created = resource.timeCreated { fields["timeCreated"] = .string(created.formatted(.iso8601)) }
        if let updated = resource.updated { fields["updated"] = .string(updated.formatted(.iso8601)) }
        fields["customMetadata"] = .table((resource.metadata ?? [:]).mapValues { .string($0) })
        return .table(fields)
    }
}

/// `text` with the query of every URL in it cut (`https://host/path?…`): a resumable upload's
/// session URL carries `upload_id`, which lets whoever holds it write the object, and error
/// messages name the URL that failed. Hooks see messages without it.
func redactingQueries(_ text: String) -> String {
    guard text.contains("://"), text.contains("?") else { return text }
    var result = ""
    var inURL = false
    var cutting = false
    var index = text.startIndex
    while index < text.endIndex {
        let character = text[index]
        if character.isWhitespace || character == "\"" || character == "'" || character == ")" {
            inURL = false
            cutting = false
        } else if !inURL, text[index...].hasPrefix("http://") || text[index...].hasPrefix("https://") {
            inURL = true
        } else if inURL, character == "?", !cutting {
            cutting = true
            result += "?…"
        }
        if !cutting { result.append(character) }
        index = text.index(after: index)
    }
    return result
}

/// Runs async work from a thread that may block (the hooks' queue) and returns its value, or nil.
func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> T? {
    let semaphore = DispatchSemaphore(value: 0)
    let result = Mutex<T?>(nil)
    Task {
        let value = try? await work()
        result.withLock { $0 = value }
        semaphore.signal()
    }
    semaphore.wait()
    return result.withLock { $0 }
}
