import Foundation
import HoistHTTP
import HoistStorage
import Synchronization

/// When a run's `mirror` deletes what went: `hoist watch` batches its deletions per `watch.window`.
public enum MirrorTurn: Sendable, Equatable {
    /// At the end of this run, after its uploads succeeded (a run, a watcher's catch-up, the
    /// first pass after a window ended).
    case now
    /// Not in this pass: the first pass after the window ends deletes what went.
    case later
    /// Not in this pass, which was to: a pass of its window did not upload all it had to (said).
    case withheld
}

/// Runs a job's uploads: at most `upload.concurrency` in flight, large files (over 8 MiB) in at
/// most all but one of those slots so small files are never starved behind them, retries and
/// the bandwidth limit from the storage layer, `maxErrors` / `failFast`, and pause, resume and
/// cancel of everything in flight.
public final class JobRunner: Sendable {
    public let job: Job
    public let storage: Storage
    let observers: [any JobObserver]
    /// The observers that hear upload events on the callback queue, and the events some of them
    /// act on: uploads hand only these to the queue.
    let queuedObservers: [any JobObserver]
    private let fileEventStatuses: Set<StorageTaskStatus>
    /// The observers that hear upload events in place (`hearsFileEventsInPlace`), and their events.
    let inPlaceObservers: [any JobObserver]
    private let inPlaceStatuses: Set<StorageTaskStatus>
    private let retryObservers: [any JobRetryObserver]
    let hooks: HookBus?
    let journal: (any JournalStore)?
    let recorder: JournalRecorder?
    let force: Bool
    let remoteCheck: Bool
    /// The shared run this process works on as one of its workers (`SharedRun`): the plan is
    /// written to the journal (when this process makes it), and files come from claims.
    let shared: SharedRun?
    /// The only files this run plans, each with its file set, instead of walking the roots
    /// (`hoist watch`'s settled files): no mirror deletes anything in such a run.
    let listedFiles: [(file: WalkedFile, set: Int)]?
    /// Files renamed within a root since the last pass (`hoist watch`), each with its earlier
    /// path: copied on the server from the earlier name's object when that holds the file's
    /// bytes now (`copyRenamed`), else uploaded.
    let renamedFrom: [String: String]
    /// Whether this run's `mirror` deletes (`MirrorTurn`).
    let mirrorTurn: MirrorTurn
    /// Files larger than this use the large-file lane.
    public static let largeFile: Int64 = 8 << 20
    /// The threads that compress files (`upload.cpu`, one per core by default), off the HTTP
    /// engine's thread and ahead of the slots that send them (`RunPass`).
    let cpu: CPUWorkers

    private struct State {
        var tasks: [ObjectIdentifier: StorageUploadTask] = [:]
        var stopping = false
        var interrupted = false
        var paused = false
        /// Why the run was stopped from outside (a shared run's worker lost its hold).
        var fatal: String?
        /// Ends `run` at once with this summary (once; `stop(fatal:endWithin:)`).
        var abandon: (@Sendable (JobSummary) -> Void)?
        /// A deadline `stop(fatal:endWithin:)` set before `run` began: armed when it begins.
        var endBy: (deadline: DispatchTime, summary: JobSummary)?
    }
    private let state = Mutex(State())
    /// The file sets' root folders, open (nil for a root that is a file, or missing).
    let roots: [RootFolder?]

    /// - Parameter hooks: the job's Lua hooks; they also hear every event, and `before_upload`
    ///   may change or skip each file before it starts.
    /// - Parameter journal: what earlier runs did (skip unchanged files, resume unfinished ones);
    ///   this run's outcomes are written to it.
    /// - Parameter remoteCheck: before skipping a file as unchanged, ask the server (also on with
    ///   `upload.remoteCheck`).
    /// - Parameter listed: the files to plan instead of a walk (`listedFiles`).
    /// - Parameter renamed: `renamedFrom`.
    /// - Parameter mirrorTurn: whether its `mirror` deletes (`hoist watch`'s windows).
    public init(job: Job, storage: Storage, observers: [any JobObserver], hooks: HookBus? = nil,
                journal: (any JournalStore)? = nil, force: Bool = false, remoteCheck: Bool = false,
                runID: String = UUID().uuidString.lowercased(), shared: SharedRun? = nil, listing listed: [(file: WalkedFile, set: Int)]? = nil,
                renamed: [String: String] = [:], mirrorTurn: MirrorTurn = .now) {
        self.job = job
        self.mirrorTurn = mirrorTurn
        listedFiles = listed
        renamedFrom = renamed
        self.storage = storage
        self.journal = journal
        self.force = force
        self.remoteCheck = remoteCheck || job.manifest.upload.remoteCheck
        self.shared = shared
        cpu = CPUWorkers(count: job.manifest.upload.cpu ?? CPUWorkers.cores)
        // Each folder file set's root, held open from before the walk: its files are opened
        // beneath it (`ByteSource.openWalked`), whatever is done to the root's path meanwhile.
        roots = job.manifest.files.map { RootFolder(job.root(of: $0)) }
        // With a journal, the backend may leave each object's durability to the journal's
        // batches (a local bucket then syncs once per batch instead of fsyncs per file).
        if journal != nil { storage.backend.deferPersistence() }
        recorder = journal.map { [backend = storage.backend] in JournalRecorder(journal: $0, runID: runID, persist: { try backend.persist() },
                                                                          recordsRun: shared == nil) }
        self.observers = (recorder.map { [$0] } ?? []) + (hooks.map { [$0] } ?? []) + observers
        queuedObservers = self.observers.filter { !$0.hearsFileEventsInPlace }
        fileEventStatuses = queuedObservers.reduce(into: []) { $0.formUnion($1.fileEventStatuses) }
        inPlaceObservers = self.observers.filter(\.hearsFileEventsInPlace)
        inPlaceStatuses = inPlaceObservers.reduce(into: []) { $0.formUnion($1.fileEventStatuses) }
        retryObservers = self.observers.compactMap { $0 as? any JobRetryObserver }
        self.hooks = hooks
        hooks?.attach(pause: { [weak self] in self?.pauseAll() }, resume: { [weak self] in self?.resumeAll() })
    }

    /// Runs the job to its end, walking its tree once: files are planned, checked against the
    /// journal and uploaded as they are found. `totals`, when known (`Planner.check()`), are given
    /// to observers at the start; else they hear them when the walk ends. A plan error (a
    /// template that cannot be filled, two files with one destination) stops the run there.
    ///
    /// Against Cloud Storage the run's tasks prefer the HTTP engine's thread as their executor
    /// (`CurlEngine`'s `TaskExecutor`): a request's answer resumes its upload on the thread that
    /// received it, with no other thread woken. Nothing in such a run blocks for long: hooks run
    /// on their own queue, the journal writes its batches on its own, a file already stored is
    /// hashed off it. A run with a PostgreSQL journal keeps the global executor: its journal's
    /// reads and claims wait on the network, behind the other threads' batch transactions.
    ///
    /// A run stopped with `stop(fatal:endWithin:)` returns by that deadline even if its journal
    /// never answers again: the summary then says so, and what is still in flight is left behind.
    public func run(totals: (files: Int, bytes: Int64)? = nil) async -> JobSummary {
        await withCheckedContinuation { (ended: CheckedContinuation<JobSummary, Never>) in
            let once = Mutex<CheckedContinuation<JobSummary, Never>?>(ended)
            let end: @Sendable (JobSummary) -> Void = { summary in once.withLock { $0.take() }?.resume(returning: summary) }
            let endBy = state.withLock { state in
                state.abandon = end
                return state.endBy
            }
            if let (deadline, summary) = endBy { DispatchQueue.global().asyncAfter(deadline: deadline) { end(summary) } }
            Task {
                guard let executor = storage.backend.capabilities.preferredExecutor, journal?.waitsOnTheNetwork != true else {
                    return end(await runHere(totals: totals))
                }
                end(await withTaskExecutorPreference(executor) { await runHere(totals: totals) })
            }
        }
    }

    private func runHere(totals: (files: Int, bytes: Int64)?) async -> JobSummary {
        let started = Date()
        for observer in observers { observer.jobStarted(job, files: totals?.files, bytes: totals?.bytes) }
        let pass = RunPass(runner: self, observers: observers, totalsKnown: totals != nil)
        _ = await pass.run()
        // The uploads' last events reach the queued observers (hooks, output) on the callback
        // queue after their tasks have ended: all of them have when the queue gets here. (The
        // journal hears them in place, before each task ends.)
        if !fileEventStatuses.isEmpty || !retryObservers.isEmpty {
            let callbacks = storage.callbackQueue
            await withCheckedContinuation { (caughtUp: CheckedContinuation<Void, Never>) in callbacks.async { caughtUp.resume() } }
        }
        // `move`'s removals once the journal holds their files done, then `mirror`'s deletions.
        var summary = await pass.afterUploads()
        summary.interrupted = isInterrupted
        if summary.fatal == nil, let fatal = state.withLock({ $0.fatal }) { summary.fatal = fatal }
        // The hooks' events (on_job_start's among them) are part of the run: its time is taken
        // once they are delivered, not while a slow hook still works through them.
        await hooks?.drain()
        summary.seconds = Date().timeIntervalSince(started)
        for observer in observers { observer.jobFinished(summary) }
        if summary.fatal == nil, let failure = recorder?.failure { summary.fatal = failure.message }
        await hooks?.drain()
        return summary
    }

    /// A session the journal recorded for `item`'s file that its upload does not continue (the
    /// file changed since a killed run began it) is the job's, provably: it is ended now, before
    /// the file's new row forgets it, and said so. One already gone (finished,
    /// aborted, expired) is left unsaid.
    func endReplacedSession(_ id: String, of item: PlanItem) async {
        guard let path = await RemovalGate.abortReplacedSession(id, of: item, runner: self) else { return }
        for observer in observers {
            observer.uploadAborted(object: path, evidence: "replaced")
            observer.walkWarning(path: item.file.path, message: "ended the unfinished upload of '\(printable(path))' an earlier run "
                + "began (the file changed since)")
        }
    }

    /// A file opened for its upload (and compressed, for a `compress:` set), with its item as
    /// the file was when opened; or why it was not opened (`NotOpened.refused`); or the size of
    /// the object a renamed file was copied to on the server (`copyRenamed`).
    struct Prepared: Sendable {
        enum Ready: Sendable {
            case send(Result<ByteSource, StorageFailure>)
            case refused(String)
            case copied(bytes: Int64)
        }
        var item: PlanItem
        var ready: Ready
    }

    /// Opens (and compresses) `planned`'s file: at its slot, or ahead of it while every slot is
    /// busy (`RunPass`), the compression on the CPU workers. A file renamed within its root is
    /// copied instead where `copyRenamed` proves the old object holds its bytes.
    func prepare(_ planned: PlanItem) async -> Prepared {
        var item = planned
        if let replaced = item.replacedSession { await endReplacedSession(replaced, of: item) }
        if let earlier = renamedFrom[item.file.path], let size = await copyRenamed(item, from: earlier) {
            return Prepared(item: item, ready: .copied(bytes: size))
        }
        switch openWalked(&item) {
        case .success(let opened) where item.compression != nil:
            let source = await compressed(opened, &item)
            return Prepared(item: item, ready: .send(source))
        case .success(let opened): return Prepared(item: item, ready: .send(.success(opened)))
        case .failure(.refused(let problem)): return Prepared(item: item, ready: .refused(problem))
        case .failure(.failed(let failure)): return Prepared(item: item, ready: .send(.failure(failure)))   // the task fails with it
        }
    }

    /// Uploads `planned`'s file (`prepared` ahead, else now): how it ended, and the item as the
    /// file was when opened.
    func upload(_ planned: PlanItem, prepared: Task<Prepared, Never>? = nil) async -> (UploadOutcome, PlanItem) {
        let prepared = if let prepared { await prepared.value } else { await prepare(planned) }
        var item = prepared.item
        switch prepared.ready {
        case .refused(let problem): return (.refused(problem), item)
        case .copied(let bytes): return (.copied(bytes: bytes), item)
        case .send(let source): return (await send(&item, source), item)
        }
    }

    private func send(_ item: inout PlanItem, _ source: Result<ByteSource, StorageFailure>) async -> UploadOutcome {
        var attributes = item.attributes
        // The object is gzip, whatever a `before_upload` hook did to the header.
        if item.compression != nil { attributes.contentEncoding = "gzip" }
        let metadata = StorageMetadata(attributes)
        let ref = storage.reference(withPath: item.destination)
        // Run here, in this file's own task: its end comes back without a hop through the
        // callback queue, where the observers hear of it (the run waits for them before it ends).
        // A compressed file's size is its gzip stream's: what its progress counts and its object holds.
        let size = item.compression == nil ? item.file.size : ((try? source.get())?.size ?? item.file.size)
        let task = ref.uploadTask(source: source, path: item.file.path, size: size, metadata: metadata,
                                  resumingSession: item.resumeSession, unlessStored: item.mayBeStored)
        if let recorder {
            let started = item
            task.onSessionStarted { session in await recorder.sessionStarted(started, session: session) }
        }
        let retryObservers = self.retryObservers
        let opened = item
        if !retryObservers.isEmpty {
            task.observeRetries { retry in for observer in retryObservers { observer.fileRetrying(opened, retry) } }
        }
        let queuedObservers = self.queuedObservers
        for status in fileEventStatuses {
            task.observe(status) { snapshot in
                for observer in queuedObservers { observer.fileEvent(opened, snapshot) }
            }
        }
        if !inPlaceStatuses.isEmpty {
            let inPlaceObservers = self.inPlaceObservers
            let item = item
            task.observeInPlace(inPlaceStatuses) { snapshot in
                for observer in inPlaceObservers { observer.fileEvent(item, snapshot) }
            }
        }
        let id = ObjectIdentifier(task)
        // Interrupted while the file was compressed (before the task could be cancelled): it
        // ends cancelled before it starts.
        let interrupted = state.withLock { state in
            state.tasks[id] = task
            return state.interrupted || state.fatal != nil
        }
        if interrupted { task.cancel() }
        // `pauseAll` sets `paused`, then pauses the tasks it holds: one not running yet misses
        // that, and pauses here (under the lock, so a `resumeAll` comes before or after).
        let last = await task.runToEnd { state.withLock { if $0.paused { task.pause() } } }
        state.withLock { _ = $0.tasks.removeValue(forKey: id) }
        if last.status == .success { return .success(bytes: last.metadata?.size ?? item.file.size) }
        let failure = last.failure ?? (.unknown, "failed")
        return .failure(failure.code, failure.message)
    }

    /// The file gzipped at its item's level (`compress:`), on the CPU workers (off the caller's
    /// executor: a Cloud Storage run's is the HTTP engine's thread); the item keeps the CRC32C
    /// of what was compressed.
    func compressed(_ opened: ByteSource, _ item: inout PlanItem) async -> Result<ByteSource, StorageFailure> {
        let level = item.compression ?? 6
        let folder = job.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        let made = await cpu.run { () -> Result<ByteSource.Gzipped, StorageFailure> in
            do { return .success(try opened.gzipped(level: level, temporaryFolder: folder)) } catch {
                return .failure(error as? StorageFailure ?? StorageFailure(.unknown, "\(error)"))
            }
        }
        switch made {
        case .success(let gzipped):
            item.contentCRC32C = gzipped.contentCRC32C
            return .success(gzipped.source)
        case .failure(let failure):
            return .failure(failure)
        }
    }

    /// Why a file is not opened: refused (gone since the walk, or out of place: not uploaded),
    /// or failed (it cannot be read, it is no regular file now: its upload fails with that).
    enum NotOpened: Error {
        case refused(String)
        case failed(StorageFailure)
    }

    /// The file the walk found, opened for its upload, or why not: it was deleted since, or
    /// someone who can write in a root replaced it (or a folder above it) with a symbolic link,
    /// to have a root-run job upload another file (`/etc/shadow`). The file is located and
    /// checked first, then that very file is opened (`ByteSource.openWalked`): no check of one
    /// file and read of another, and nothing but a regular file is opened. Another regular file
    /// at the same place (saved anew by an editor, say) is read. `item` takes the size,
    /// modification time and inode of the file opened, so the journal records the file the
    /// upload reads, not the one the walk saw
    /// (`WalkAttackTests.aFileChangedAfterTheWalkIsJournaledAsItWasRead`).
    func openWalked(_ item: inout PlanItem) -> Result<ByteSource, NotOpened> {
        let set = job.manifest.files[item.fileSetIndex]
        let file = item.file
        let walked: ByteSource.Walked
        do {
            let root = roots.indices.contains(item.fileSetIndex) ? roots[item.fileSetIndex] : nil
            walked = try ByteSource.openWalked(file.path, relativePath: file.relativePath, beneath: root, device: file.device,
                                               inode: file.inode, followingLinks: job.followsLinks(at: file.path, inSet: item.fileSetIndex)) {
                // Where the file must be, links resolved (a file set whose root is the file itself: the file is its root).
                let root = ByteSource.realPath(job.root(of: set))
                return file.path == job.root(of: set) ? root : (root == "/" ? "" : root) + "/" + file.relativePath
            }
        } catch {
            return .failure(.failed(error as? StorageFailure ?? StorageFailure(.unknown, "\(error)", details: ["file": file.path])))
        }
        switch walked {
        case .opened(let source, let info):
            item.file.update(from: info)
            return .success(source)
        case .missing:
            return .failure(.refused("\(file.path) was deleted after the walk found it: not uploaded"))
        case .elsewhere:
            return .failure(.refused("\(file.path) became a symbolic link (or a folder above it did) after the walk found it: not uploaded"))
        }
    }

    /// Whether the server still holds the object as the journal recorded it: its size (a
    /// compressed file's object has its gzip stream's size, which a done row keeps as its
    /// confirmed offset), and its CRC32C where both have one (every GCS object, composite ones
    /// included, which have no MD5), else its MD5.
    func storedAsJournaled(_ item: PlanItem) async -> Bool {
        guard let record = (try? journal?.record(source: item.file.path, destination: item.destination)) ?? nil,
              let stored = try? await storage.reference(withPath: item.destination).getMetadata()
        else { return false }
        let size = item.compression == nil ? record.size : record.confirmedOffset
        guard stored.size == size else { return false }
        if let crc32c = record.crc32c, let storedCRC = stored.resource.crc32c { return crc32c == storedCRC }
        return stored.md5Hash != nil && stored.md5Hash == record.md5Hash
    }

    /// Whether the bucket holds `object` (an error other than "not found" counts as yes: nothing
    /// is overwritten on a guess).
    func exists(_ object: String) async -> Bool {
        do {
            _ = try await storage.reference(withPath: object).getMetadata()
            return true
        } catch StorageError.objectNotFound {
            return false
        } catch {
            return true
        }
    }

    /// Stops the run because it cannot go on (a shared run's worker lost its hold): nothing more
    /// starts, uploads in flight are cancelled, and the summary gives `message` as the reason.
    /// - Parameter endWithin: seconds after which `run` returns even if the run has not ended
    ///   (its journal cut off, a write that never returns): its summary then gives `message` and
    ///   says the run could not end. Nil: wait for the run to end.
    public func stop(fatal message: String, endWithin grace: Double? = nil) {
        var left = JobSummary(job: job.manifest.name)
        left.fatal = "\(message) The run did not end within \(Int(grace ?? 0)) s of being stopped: what was in flight is left unfinished."
        let summary = left
        let deadline = DispatchTime.now() + (grace ?? 0)
        let abandon = state.withLock { state -> (@Sendable (JobSummary) -> Void)? in
            state.stopping = true
            if state.fatal == nil { state.fatal = message }
            guard grace != nil, state.endBy == nil else { return nil }
            // Not running yet: `run` arms the deadline when it begins.
            guard let abandon = state.abandon else {
                state.endBy = (deadline, summary)
                return nil
            }
            return abandon
        }
        recorder?.runIsStopping()
        cancelInFlight()
        if let abandon { DispatchQueue.global().asyncAfter(deadline: deadline) { abandon(summary) } }
    }

    /// Starts nothing more; uploads in flight go on.
    public func stopStarting() {
        state.withLock { $0.stopping = true }
        recorder?.runIsStopping()
    }

    func cancelInFlight(keepingSessions: Bool = false) {
        for task in state.withLock({ Array($0.tasks.values) }) { keepingSessions ? task.checkpoint() : task.cancel() }
    }

    /// Stops the job: nothing more starts, uploads in flight are cancelled (leaving no partial
    /// object), and the summary says it was interrupted.
    public func cancelAll() { interrupt(keepingSessions: false) }

    /// Stops the job as `cancelAll` does, but checkpoints the uploads in flight: each one's
    /// resumable session stays on the server and in the journal (a `pending` row with its
    /// session), so the next process continues it from the server's offset. A watcher's SIGTERM.
    public func checkpointAll() { interrupt(keepingSessions: true) }

    private func interrupt(keepingSessions: Bool) {
        state.withLock {
            $0.stopping = true
            $0.interrupted = true
        }
        recorder?.runIsStopping()
        hooks?.cancel()
        cancelInFlight(keepingSessions: keepingSessions)
    }

    /// Pauses every upload in flight, and those that start while paused.
    public func pauseAll() {
        let tasks = state.withLock { state -> [StorageUploadTask] in
            state.paused = true
            return Array(state.tasks.values)
        }
        for task in tasks { task.pause() }
    }

    /// Resumes everything `pauseAll` paused.
    public func resumeAll() {
        let tasks = state.withLock { state -> [StorageUploadTask] in
            state.paused = false
            return Array(state.tasks.values)
        }
        for task in tasks { task.resume() }
    }

    public var isPaused: Bool { state.withLock { $0.paused } }
    /// Nothing more starts (stopped, interrupted, or a failure policy said so).
    var isStopping: Bool { state.withLock { $0.stopping } }
    /// Stopped by a signal or `cancelAll()`.
    var isInterrupted: Bool { state.withLock { $0.interrupted } }
}
