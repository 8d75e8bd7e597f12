import Foundation
import HoistHTTP
import HoistStorage
import Synchronization

/// Runs a job's uploads: at most `upload.concurrency` in flight, large files (over 8 MiB) in at
/// most all but one of those slots so small files are never starved behind them, retries and
/// the bandwidth limit from the storage layer, `maxErrors` / `failFast`, and pause, resume and
/// cancel of everything in flight.
public final class JobRunner: Sendable {
    public let job: Job
    public let storage: Storage
    private let observers: [any JobObserver]
    /// The observers that hear upload events on the callback queue, and the events some of them
    /// act on: uploads hand only these to the queue.
    private let queuedObservers: [any JobObserver]
    private let fileEventStatuses: Set<StorageTaskStatus>
    /// The observers that hear upload events in place (`hearsFileEventsInPlace`), and their events.
    private let inPlaceObservers: [any JobObserver]
    private let inPlaceStatuses: Set<StorageTaskStatus>
    private let retryObservers: [any JobRetryObserver]
    private let hooks: HookBus?
    private let journal: (any JournalStore)?
    private let recorder: JournalRecorder?
    private let force: Bool
    private let remoteCheck: Bool
    /// The shared run this process works on as one of its workers (`SharedRun`): the plan is
    /// written to the journal (when this process makes it), and files come from claims.
    private let shared: SharedRun?
    /// Files larger than this use the large-file lane.
    public static let largeFile: Int64 = 8 << 20

    private struct State {
        var tasks: [ObjectIdentifier: StorageUploadTask] = [:]
        var stopping = false
        var interrupted = false
        var paused = false
        /// Why the run was stopped from outside (a shared run's worker lost its hold).
        var fatal: String?
    }
    private let state = Mutex(State())
    /// The file sets' root folders, open (nil for a root that is a file, or missing).
    private let roots: [ByteSource.RootFolder?]

    /// - Parameter hooks: the job's Lua hooks; they also hear every event, and `before_upload`
    ///   may change or skip each file before it starts.
    /// - Parameter journal: what earlier runs did (skip unchanged files, resume unfinished ones);
    ///   this run's outcomes are written to it.
    /// - Parameter remoteCheck: before skipping a file as unchanged, ask the server (also on with
    ///   `upload.remoteCheck`).
    public init(job: Job, storage: Storage, observers: [any JobObserver], hooks: HookBus? = nil,
                journal: (any JournalStore)? = nil, force: Bool = false, remoteCheck: Bool = false,
                runID: String = UUID().uuidString.lowercased(), shared: SharedRun? = nil) {
        self.job = job
        self.storage = storage
        self.journal = journal
        self.force = force
        self.remoteCheck = remoteCheck || job.manifest.upload.remoteCheck
        self.shared = shared
        // Each folder file set's root, held open from before the walk: its files are opened
        // beneath it (`ByteSource.openWalked`), whatever is done to the root's path meanwhile.
        roots = job.manifest.files.map { ByteSource.RootFolder(job.root(of: $0)) }
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

    /// What `prepare` made of a planned file.
    private enum Prepared {
        case upload, skipped, failed, stopped
    }

    private enum Outcome: Sendable {
        case success(Int64)
        case failure(StorageErrorCode, String)
        /// Not started: the file is no longer the one the walk found.
        case refused(String)
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
    public func run(totals: (files: Int, bytes: Int64)? = nil) async -> JobSummary {
        guard let executor = storage.backend.capabilities.preferredExecutor, journal?.waitsOnTheNetwork != true else { return await runHere(totals: totals) }
        return await withTaskExecutorPreference(executor) { await runHere(totals: totals) }
    }

    private func runHere(totals: (files: Int, bytes: Int64)?) async -> JobSummary {
        let started = Date()
        let settings = job.manifest.upload
        let concurrency = settings.concurrency
        let largeSlots = max(1, concurrency - 1)
        for observer in observers { observer.jobStarted(job, files: totals?.files, bytes: totals?.bytes) }
        var summary = JobSummary(job: job.manifest.name)

        await withTaskGroup(of: (PlanItem, Bool, Outcome).self) { group in
            var running = 0
            var runningLarge = 0
            var deferred: [PlanItem] = []
            let planner = Planner(job: job, journal: journal, force: force)
            var iterator = planner.makeIterator()
            let countAhead = CountAhead(planner: planner, observers: observers)
            // A worker that joined a planned shared run does not walk: its files come from claims.
            var exhausted = shared.map { !$0.plans } ?? false
            // A shared run's worker: files claimed and not yet started, no claim before
            // `claimAgain` after one found nothing, and whether the run has no file left.
            var queue: [PlanItem] = []
            var claimAgain = ContinuousClock.now
            var sharedFinished = false
            // Files this worker finished since its first claim: a claim takes about a second's worth.
            var claimsStarted: ContinuousClock.Instant?
            var finishedSinceClaims = 0
            func stopFatal(_ message: String) {
                if summary.fatal == nil { summary.fatal = message }
                stopStarting()
                cancelInFlight()
            }
            // With a before_upload hook, destinations are known only after it: the sources of this
            // run's destinations, to refuse two files sent to one object.
            var claimed: [String: String] = [:]
            let rewrites = hooks?.defined.contains("before_upload") ?? false
            func fail(_ item: PlanItem, _ message: String) {
                if let shared, exhausted {
                    // A claimed file: the run must not wait for it.
                    do { try shared.failed(item, message) } catch { stopFatal(describe(error)) }
                }
                if state.withLock({ $0.interrupted }) {
                    summary.cancelled += 1
                    return
                }
                summary.failed += 1
                if summary.failures.count < 100 {
                    summary.failures.append(.init(file: item.file.path, destination: item.destination, code: .invalidArgument, message: message))
                }
                for observer in observers {
                    observer.fileFailed(path: item.file.path, destination: item.destination, size: item.file.size, message: message)
                }
                if settings.failFast || summary.failed >= (settings.maxErrors ?? .max) { stopStarting() }
            }
            // Files and folders the walk could not take, and what it left out, are told to
            // observers as they are found.
            var problemsTold = 0
            func tellProblems() {
                for problem in iterator.problems.dropFirst(problemsTold) {
                    for observer in observers {
                        if problem.isFailure {
                            observer.fileFailed(path: problem.path, destination: "", size: 0, message: problem.message)
                        } else {
                            observer.walkWarning(path: problem.path, message: problem.message)
                        }
                    }
                }
                problemsTold = iterator.problems.count
            }

            func start(_ item: PlanItem, large: Bool) {
                running += 1
                if large { runningLarge += 1 }
                group.addTask { (item, large, await self.upload(item)) }
            }
            /// Counts and tells a skip; false for a file to upload.
            func skipped(_ item: PlanItem) -> Bool {
                guard case .skip(let reason) = item.decision else { return false }
                summary.skipped += 1
                if item.decision == Planner.unchanged { summary.unchanged += 1 }
                if item.decision == HookBus.vetoed { summary.vetoed += 1 }
                if item.decision == Self.exists { summary.existing += 1 }
                for observer in observers { observer.fileSkipped(item, reason: reason) }
                return true
            }
            /// What is left to decide before a file starts: no-clobber, `before_upload` (and the
            /// journal again for the destination it gives), two files sent to one object.
            func prepare(_ item: inout PlanItem) async -> Prepared {
                if settings.noClobber, item.decision == .upload, await exists(item.destination) {
                    item.decision = Self.exists
                }
                if item.decision == .upload, let hooks {
                    let planned = item
                    do { item = try await hooks.beforeUpload(item) } catch {
                        fail(item, "\(error)")
                        return .failed
                    }
                    if state.withLock({ $0.stopping }) {
                        // Stopped while the hook ran (whatever it answered): start nothing more.
                        if state.withLock({ $0.interrupted }) { summary.cancelled += 1 }
                        return .stopped
                    }
                    if item.destination != planned.destination || item.attributes != planned.attributes {
                        do { try planner.consultJournal(&item) } catch {
                            fail(item, "\(error)")
                            return .failed
                        }
                    }
                }
                if rewrites, item.decision == .upload || item.decision == Planner.unchanged {
                    if let other = claimed[item.destination], other != item.file.path {
                        fail(item, "\(other) and \(item.file.path) both go to '\(item.destination)' after before_upload: nothing uploaded for the second")
                        return .failed
                    }
                    claimed[item.destination] = item.file.path
                }
                return skipped(item) ? .skipped : .upload
            }
            func startOrDefer(_ item: PlanItem) {
                let large = item.file.size > Self.largeFile
                if large, runningLarge >= largeSlots {
                    deferred.append(item)
                } else {
                    start(item, large: large)
                }
            }

            var walkedSinceYield = 0
            while true {
                while running < concurrency, !state.withLock({ $0.stopping }) {
                    if runningLarge < largeSlots, !deferred.isEmpty {
                        start(deferred.removeFirst(), large: true)
                        continue
                    }
                    if deferred.count >= 256 { break }
                    if exhausted {
                        guard let shared, !sharedFinished else { break }
                        if queue.isEmpty {
                            guard ContinuousClock.now >= claimAgain else { break }
                            // About a second's worth of files at this worker's rate (at least one per free
                            // slot, at most 256): small files in big batches (fewer queries), and no
                            // worker holding files others could be sending.
                            let start = claimsStarted ?? .now
                            claimsStarted = start
                            let seconds = max(0.001, (ContinuousClock.now - start) / .seconds(1))
                            let limit = min(256, max(concurrency - running, Int(Double(finishedSinceClaims) / seconds)))
                            do {
                                switch try shared.claim(limit: limit) {
                                case .files(let files):
                                    for file in files {
                                        do { queue.append(try shared.planItem(file, job: job)) } catch {
                                            // A row this worker's manifest does not make: that file fails, unread.
                                            fail(PlanItem(file: WalkedFile(path: file.source, relativePath: file.relativePath, size: file.size,
                                                                           modified: Date(timeIntervalSince1970: file.mtime)),
                                                          destination: file.destination, attributes: ObjectResource(), decision: .upload,
                                                          fileSetIndex: file.fileSetIndex), "\(error)")
                                        }
                                    }
                                case .wait:
                                    claimAgain = .now + .milliseconds(Int(min(1000, shared.lease * 100)))
                                case .finished:
                                    sharedFinished = true
                                }
                            } catch {
                                stopFatal(describe(error))
                            }
                        }
                        guard !queue.isEmpty else { break }
                        var item = queue.removeFirst()
                        let planned = item.destination
                        let prepared = await prepare(&item)
                        if prepared == .skipped || (prepared == .upload && item.destination != planned) {
                            // Skipped, or recorded under the destination a hook gave: out of the queue.
                            do { try shared.release(source: item.file.path, destination: planned) } catch { stopFatal(describe(error)) }
                        }
                        if prepared == .upload { startOrDefer(item) }
                        continue
                    }
                    walkedSinceYield += 1
                    if walkedSinceYield == 256 {
                        // A long stretch of skipped files gives the executor a turn: on the HTTP
                        // engine's thread, the uploads in flight are served between stretches.
                        walkedSinceYield = 0
                        await Task.yield()
                    }
                    let next = iterator.next()
                    if iterator.problems.count > problemsTold { tellProblems() }
                    guard var item = next else {
                        exhausted = true
                        if let shared {
                            // The plan is in the journal: the workers waiting for it join now.
                            do {
                                if let error = iterator.error {
                                    try shared.planFailed(error.message)
                                } else {
                                    try shared.planFinished(skipped: summary.skipped,
                                                            failed: summary.failed + iterator.problems.filter(\.isFailure).count)
                                }
                            } catch {
                                stopFatal(describe(error))
                            }
                            if iterator.error != nil { sharedFinished = true }
                        } else if totals == nil, iterator.error == nil {
                            countAhead.walkEnded(files: iterator.uploadCount, bytes: iterator.uploadBytes)
                        }
                        continue
                    }
                    if remoteCheck, item.decision == Planner.unchanged, await !storedAsJournaled(item) {
                        item.decision = .upload
                    }
                    if let shared {
                        // Planned for the workers (this one among them), who check no-clobber and
                        // run before_upload as they claim it; not started here.
                        if !skipped(item) {
                            do { try shared.plan(item) } catch { stopFatal(describe(error)) }
                        }
                        continue
                    }
                    if await prepare(&item) == .upload { startOrDefer(item) }
                }
                if !exhausted, shared == nil, totals == nil, running >= concurrency {
                    // The walk waits behind the uploads: the totals are counted ahead of it.
                    countAhead.walkWaits()
                }
                if running == 0 {
                    // A worker with nothing in flight waits for files others hold (one may die).
                    guard shared != nil, exhausted, !sharedFinished, !state.withLock({ $0.stopping }) else { break }
                    try? await Task.sleep(until: claimAgain)
                    continue
                }
                guard let (item, large, outcome) = await group.next() else { break }
                running -= 1
                if claimsStarted != nil { finishedSinceClaims += 1 }
                if large { runningLarge -= 1 }
                switch outcome {
                case .success(let size):
                    summary.uploaded += 1
                    summary.bytes += size
                case .failure(.cancelled, _) where state.withLock({ $0.stopping }):
                    summary.cancelled += 1
                case .refused(let message):
                    fail(item, message)
                case .failure(let code, let message):
                    summary.failed += 1
                    if summary.failures.count < 100 {
                        summary.failures.append(.init(file: item.file.path, destination: item.destination, code: code, message: message))
                    }
                    if Self.fatalCodes.contains(code), summary.fatal == nil {
                        summary.fatal = message
                        stopStarting()
                        cancelInFlight()
                    } else if settings.failFast || summary.failed >= (settings.maxErrors ?? .max) {
                        stopStarting()
                        if settings.failFast { cancelInFlight() }
                    }
                }
                if summary.fatal == nil, let failure = recorder?.failure {
                    // Without a journal, done work would be forgotten and failures unrecorded: stop.
                    summary.fatal = failure.message
                    stopStarting()
                    cancelInFlight()
                }
            }
            // Files and folders inside a root that the walk could not read are failures, not skips.
            for problem in iterator.problems where problem.isFailure {
                summary.failed += 1
                if summary.failures.count < 100 {
                    summary.failures.append(.init(file: problem.path, destination: "", code: .invalidArgument, message: problem.message))
                }
            }
            if let error = iterator.error {
                summary.failed += 1
                summary.failures.append(.init(file: job.file, destination: "", code: .invalidArgument, message: error.message))
                summary.fatal = summary.fatal ?? error.message
            }
        }
        // The uploads' last events reach the queued observers (hooks, output) on the callback
        // queue after their tasks have ended: all of them have when the queue gets here. (The
        // journal hears them in place, before each task ends.)
        if !fileEventStatuses.isEmpty || !retryObservers.isEmpty {
            let callbacks = storage.callbackQueue
            await withCheckedContinuation { (caughtUp: CheckedContinuation<Void, Never>) in callbacks.async { caughtUp.resume() } }
        }
        summary.interrupted = state.withLock { $0.interrupted }
        if summary.fatal == nil, let fatal = state.withLock({ $0.fatal }) { summary.fatal = fatal }
        summary.seconds = Date().timeIntervalSince(started)
        for observer in observers { observer.jobFinished(summary) }
        if summary.fatal == nil, let failure = recorder?.failure { summary.fatal = failure.message }
        await hooks?.drain()
        return summary
    }

    /// Failures that no other file of the job can escape: the run stops at once.
    static let fatalCodes: Set<StorageErrorCode> = [.unauthenticated, .bucketNotFound, .projectNotFound]

    private func upload(_ planned: PlanItem) async -> Outcome {
        var item = planned
        let source: Result<ByteSource, StorageFailure>
        switch openWalked(&item) {
        case .success(let opened): source = .success(opened)
        case .failure(.refused(let problem)): return .refused(problem)
        case .failure(.failed(let failure)): source = .failure(failure)   // the task fails with it
        }
        let metadata = StorageMetadata(item.attributes)
        let ref = storage.reference(withPath: item.destination)
        // Run here, in this file's own task: its end comes back without a hop through the
        // callback queue, where the observers hear of it (the run waits for them before it ends).
        let task = ref.uploadTask(source: source, path: item.file.path, size: item.file.size, metadata: metadata,
                                  resumingSession: item.resumeSession, unlessStored: item.mayBeStored)
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
        state.withLock { $0.tasks[id] = task }
        // `pauseAll` sets `paused`, then pauses the tasks it holds: one not running yet misses
        // that, and pauses here (under the lock, so a `resumeAll` comes before or after).
        let last = await task.runToEnd { state.withLock { if $0.paused { task.pause() } } }
        state.withLock { _ = $0.tasks.removeValue(forKey: id) }
        if last.status == .success { return .success(last.metadata?.size ?? item.file.size) }
        let failure = last.failure ?? (.unknown, "failed")
        return .failure(failure.code, failure.message)
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
                                               inode: file.inode, followingLinks: set.followSymlinks) {
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

    /// Whether the server still holds the object as the journal recorded it (size and MD5).
    private func storedAsJournaled(_ item: PlanItem) async -> Bool {
        guard let record = (try? journal?.record(source: item.file.path, destination: item.destination)) ?? nil,
              let stored = try? await storage.reference(withPath: item.destination).getMetadata()
        else { return false }
        return stored.size == record.size && stored.md5Hash != nil && stored.md5Hash == record.md5Hash
    }

    /// The decision for a file whose object exists, with `upload.noClobber`.
    public static let exists = PlanItem.Decision.skip("the object exists (no-clobber)")

    /// Whether the bucket holds `object` (an error other than "not found" counts as yes: nothing
    /// is overwritten on a guess).
    private func exists(_ object: String) async -> Bool {
        do {
            _ = try await storage.reference(withPath: object).getMetadata()
            return true
        } catch {
            return StorageErrorCode(of: error as NSError) != .objectNotFound
        }
    }

    /// Stops the run because it cannot go on (a shared run's worker lost its hold): nothing more
    /// starts, uploads in flight are cancelled, and the summary gives `message` as the reason.
    public func stop(fatal message: String) {
        state.withLock {
            $0.stopping = true
            if $0.fatal == nil { $0.fatal = message }
        }
        recorder?.runIsStopping()
        cancelInFlight()
    }

    /// Starts nothing more; uploads in flight go on.
    public func stopStarting() {
        state.withLock { $0.stopping = true }
        recorder?.runIsStopping()
    }

    private func cancelInFlight() {
        for task in state.withLock({ Array($0.tasks.values) }) { task.cancel() }
    }

    /// Stops the job: nothing more starts, uploads in flight are cancelled (leaving no partial
    /// object), and the summary says it was interrupted.
    public func cancelAll() {
        state.withLock {
            $0.stopping = true
            $0.interrupted = true
        }
        recorder?.runIsStopping()
        hooks?.cancel()
        cancelInFlight()
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
}
