import Foundation
import HoistHTTP
import HoistYAML
import HoistLua
import HoistStorage
import Synchronization

/// A hook's words for the operator: `log.info("...")` and runtime errors.
/// The message is one line of visible text, bounded (`printable`): control characters a hook
/// writes (newlines that would forge Hoist's own lines, terminal escape sequences) are shown
/// escaped, as `\u{1B}`.
public struct HookLogLine: Sendable {
    public enum Level: String, Sendable { case debug, info, warn, error }
    public let level: Level
    public let script: String
    public let message: String

    public init(level: Level, script: String, message: String) {
        self.level = level
        self.script = printable(script)
        self.message = printable(message, limit: outsideTextLimit)
    }
}

/// A hook that cannot be used: a file that cannot be read, or a syntax error (`FILE:LINE: message`).
/// Its text is the hook's (a Lua error's message), so one line, bounded (`printable`).
public struct HookError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(description: String) { self.description = printable(description, limit: outsideTextLimit) }
}

/// Delivers a job's events to its Lua hooks, in order, on one serial executor, so hook code
/// needs no locks. See docs/hooks.md.
///
/// Delivery policy: every event but `on_progress` is always delivered. `on_progress` is paced
/// per upload (at most one per `lua.progressInterval`; the first and the 100% one always), and
/// dropped while more than `lua.queueLimit` events wait, so a slow hook never holds up transfers.
/// A hook error is logged with its script and line; the uploads go on.
public final class HookBus: JobObserver, @unchecked Sendable {
    // `runtime` and `scripts` are touched only on `queue`.
    let runtime: LuaRuntime
    private var scripts: [LuaScript] = []
    private let queue = DispatchQueue(label: "hoist.hooks")
    let job: Job
    let storage: Storage
    /// What sends hooks' `http.post` requests.
    let transport: any HTTPTransport
    let log: @Sendable (HookLogLine) -> Void
    let settings: LuaSettings
    let runID: String
    let started = Date()
    /// Where `hoist.append_file` writes (the job's `lua.output`).
    let appendTarget: AppendTarget
    /// Events queued for the hooks and not yet delivered: past `lua.queueLimit`, progress is dropped.
    private let waiting = Mutex(0)
    /// `on_progress` at most once per `lua.progressInterval` per upload.
    private let progressPacer: ProgressPacer
    let controls = JobControls()
    /// Uploads hooks may control, by id; `s.task:pause()` and friends look them up.
    let tasks = TaskRegistry()
    /// The task methods, made once and shared by every snapshot (`s.task:pause()`).
    let taskMethods: (pause: LuaValue, resume: LuaValue, cancel: LuaValue)

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

    /// The script being called now, for log lines.
    let currentScript = CurrentScript()
    /// `http.post` requests in flight, so `cancel()` can stop them.
    let requests = Requests()

    /// Names of the hook functions some script defines (set while loading, read-only after).
    public private(set) var defined: Set<String> = []

    /// - Parameter alsoReads: files this run reads besides those the manifest names (`--journal`,
    ///   `--ca-bundle`), which the hooks' output folder may not hold.
    /// - Throws: `YAMLError` at `lua.output` for an output folder holding what the run reads.
    public init(job: Job, storage: Storage, runID: String = UUID().uuidString.lowercased(), alsoReads: [String] = [],
                transport: any HTTPTransport = HTTPTransports.standard, log: @escaping @Sendable (HookLogLine) -> Void) throws {
        appendTarget = try AppendTarget(job: job, alsoReads: alsoReads)
        self.job = job
        self.storage = storage
        self.transport = transport
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
        for (name, source, globals) in try HookSources.of(job) {
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
                            "on_job_end", "before_upload", "before_delete", "on_delete", "on_remove", "on_settle", "on_copy"]

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
    private func callAll(_ function: String, _ arguments: [LuaValue]) {
        for script in scripts { _ = call(script, function, arguments) }
    }

    /// Calls `function` in `script`: its results (nil when it defines no such function), or the
    /// error's text (`script:line: message`), logged.
    private func call(_ script: LuaScript, _ function: String, _ arguments: [LuaValue]) -> Result<[LuaValue]?, HookError> {
        currentScript.value = script.name
        do {
            return .success(try runtime.call(script, function, arguments))
        } catch {
            let text = (error as? LuaError)?.description ?? "\(error)"
            log(HookLogLine(level: .error, script: script.name, message: "\(text) (in \(function))"))
            return .failure(HookError(description: text))
        }
    }

    /// Whether a script defines `on_settle` (`hoist watch` then works out which files settled).
    public var hearsSettledFiles: Bool { defined.contains("on_settle") }

    /// `hoist watch`: a file the job takes has settled, and the pass that uploads it follows
    /// (its `before_upload` and status events come after: the watcher drains the hooks first).
    public func fileSettled(_ item: PlanItem) {
        deliver("on_settle", Self.fileTable(item))
    }

    /// `on_copy(file)`: `hoist watch` stored a renamed file by a copy on the server of its
    /// earlier name's object (`from`), no byte sent: as `on_settle`'s file, with `from` and the
    /// copy's `generation`.
    public func fileCopied(_ item: PlanItem, from source: String, _ copied: ObjectResource) {
        guard defined.contains("on_copy"), case .table(var table) = Self.fileTable(item) else { return }
        table["from"] = .string(source)
        table["generation"] = .integer(copied.generation ?? 0)
        deliver("on_copy", .table(table))
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

    /// The hook each upload status calls.
    private static let eventHooks: [StorageTaskStatus: String] = [
        .resume: "on_resume", .progress: "on_progress", .pause: "on_pause", .success: "on_success", .failure: "on_failure",
    ]

    /// The statuses whose hook the scripts define.
    public var fileEventStatuses: Set<StorageTaskStatus> {
        Set(Self.eventHooks.filter { defined.contains($0.value) }.keys)
    }

    public func fileEvent(_ item: PlanItem, _ snapshot: StorageTaskSnapshot) {
        guard let function = Self.eventHooks[snapshot.status], defined.contains(function) else { return }
        let completed = snapshot.completed
        let total = snapshot.total
        if snapshot.status == .progress {
            let allowed = waiting.withLock { $0 < settings.queueLimit }
            guard progressPacer.admit(item.destination, final: completed >= total, allowed: allowed) else { return }
        } else if snapshot.status == .success || snapshot.status == .failure {
            progressPacer.finished(item.destination)
        }
        var table = HookTables.snapshot(snapshot, item: item)
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
            "deleted": .integer(Int64(summary.deleted)), "moved": .integer(Int64(summary.moved)),
        ]))
    }

    /// Asks `before_upload(file)` of each script defining it, in order, each seeing the file as
    /// the scripts before it left it: nil or true keeps the item, false skips it, a table may set
    /// `destination` and `metadata` fields. A veto is final: no later script is asked, so a later
    /// script may veto more, never less (`BeforeUploadAttackTests.aLaterHookCannotUndoAVeto`).
    /// An item the hooks do not change keeps everything, its `resumeSession` included (the
    /// runner checks a changed one against the journal again).
    /// - Throws: `HookError` when a hook fails (an error, a budget, a stop) or answers with a
    ///   bad destination or metadata: the file must then fail, never go up unchecked.
    public func beforeUpload(_ item: PlanItem) async throws(HookError) -> PlanItem {
        guard defined.contains("before_upload") else { return item }
        let answered: Result<PlanItem, HookError> = await withCheckedContinuation { continuation in
            queue.async { [self] in continuation.resume(returning: askBeforeUpload(item)) }
        }
        let changed = try answered.get()
        if runtime.isCancelled { throw HookError(description: "before_upload failed: stopped: the job is stopping") }
        return changed
    }

    /// `beforeUpload`'s work, on the hooks' queue.
    private func askBeforeUpload(_ item: PlanItem) -> Result<PlanItem, HookError> {
        var current = item
        for script in scripts {
            switch call(script, "before_upload", [Self.fileTable(current)]) {
            case .failure(let error): return .failure(HookError(description: "before_upload failed: \(error.description)"))
            case .success(nil): continue
            case .success(let results?):
                do { current = try HookTables.apply(results.first ?? .nil, to: current) } catch { return .failure(error) }
                if current.decision == .skip(.vetoed) { return .success(current) }
            }
        }
        return .success(current)
    }

    /// Asks `before_delete(object)` of each script defining it, in order: false keeps the
    /// object (a veto is final), anything else lets the delete go on.
    /// - Throws: `HookError` when a hook fails: the object is then kept, and the run fails.
    public func beforeDelete(_ deletion: Deletion) async throws(HookError) -> Bool {
        guard defined.contains("before_delete") else { return true }
        let table = Self.deletionTable(deletion, outcome: nil)
        let answered: Result<Bool, HookError> = await withCheckedContinuation { continuation in
            queue.async { [self] in
                for script in scripts {
                    switch call(script, "before_delete", [table]) {
                    case .failure(let error): return continuation.resume(returning: .failure(HookError(description: "before_delete failed: \(error.description)")))
                    case .success(let results?) where results.first == .boolean(false): return continuation.resume(returning: .success(false))
                    case .success: continue
                    }
                }
                continuation.resume(returning: .success(true))
            }
        }
        let allowed = try answered.get()
        if runtime.isCancelled { throw HookError(description: "before_delete failed: stopped: the job is stopping") }
        return allowed
    }

    /// `on_delete(object)`: a mirror's deletion and its outcome.
    public func objectDeleted(_ deletion: Deletion, _ outcome: DeletionOutcome) {
        deliver("on_delete", Self.deletionTable(deletion, outcome: outcome))
    }

    /// `on_remove(file)`: a file `move` removed (`kind` "file", with `object` and `evidence`),
    /// or a folder it emptied (`kind` "folder").
    public func fileRemoved(_ item: PlanItem, evidence: String) {
        deliver("on_remove", .table(["kind": .string("file"), "path": .string(item.file.path), "relpath": .string(item.file.relativePath),
                                     "object": .string(item.destination), "evidence": .string(evidence)]))
    }

    public func folderRemoved(_ path: String) {
        deliver("on_remove", .table(["kind": .string("folder"), "path": .string(path), "evidence": .string("empty")]))
    }

    /// What `before_delete` and `on_delete` are given.
    static func deletionTable(_ deletion: Deletion, outcome: DeletionOutcome?) -> LuaValue {
        var table: [String: LuaValue] = [
            "object": .string(deletion.object), "generation": .integer(deletion.generation), "reason": .string(deletion.reason),
        ]
        if let source = deletion.source { table["path"] = .string(source) }
        if let outcome {
            table["outcome"] = .string(outcome.name)
            if case .failed(let message) = outcome { table["error"] = .string(message) }
        }
        return .table(table)
    }

    /// What `before_upload` is given.
    private static func fileTable(_ item: PlanItem) -> LuaValue {
        .table([
            "path": .string(item.file.path), "relpath": .string(item.file.relativePath), "size": .integer(item.file.size),
            "mtime": .integer(Int64(item.file.modified.timeIntervalSince1970)), "destination": .string(item.destination),
            "metadata": HookTables.metadata(item.attributes),
        ])
    }
}
