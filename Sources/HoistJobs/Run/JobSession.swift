import Foundation
import HoistStorage
import Synchronization

/// One run of a job, assembled: the composition root of `hoist run` and `hoist cp`. It takes the
/// job (lock and journal), makes and checks the storage, loads the hooks, gives them and the
/// journal one run id, builds the runner, and at the end writes the metrics and lets the job go.
/// The command line only parses flags, picks observers and prints.
///
/// A run that cannot start fails here, in one place, the same way every time: a `JobStartError`
/// with one sentence, the failure in the metrics file (so an old success does not stand) and in
/// the journal when one was opened (so `hoist status` shows it).
public final class JobSession: Sendable {
    public struct Options: Sendable {
        /// Keep a journal (skip unchanged files, resume unfinished ones); off for `hoist cp`.
        public var journal = true
        /// Another journal than the manifest's or the default (`--journal`).
        public var journalOverride: String?
        /// Wait for another run of the job instead of failing.
        public var wait = false
        /// Work on the job's shared run with the other workers (`SharedRun`; a PostgreSQL journal).
        public var worker = false
        /// Seconds a worker may go silent before the others take its files.
        public var lease: Double = 30
        public var force = false
        public var remoteCheck = false
        /// A CA bundle over the manifest's and the environment's (`--ca-bundle`).
        public var caBundle: String?
        /// Prometheus metrics written here at the end (and on a failed start).
        public var metricsFile: String?
        /// Where hooks' log lines, notes (an optional root skipped), warnings and problems go,
        /// for the caller to word and show.
        public var log: @Sendable (Message) -> Void = { _ in }
        /// Errors only: notes and hooks' `log.debug`/`log.info`/`print` are not passed to `log`;
        /// hooks' `log.warn`/`log.error`, warnings and problems are.
        public var quiet = false

        public init() {}
    }

    /// What a session tells its caller while it opens and ends; the caller words and shows it.
    public enum Message: Sendable {
        /// Something worth knowing that changes nothing (an optional root skipped).
        case note(String)
        /// A risk every run runs (TLS checks off, from the backend's options).
        case warning(String)
        /// A hook's log line.
        case hook(HookLogLine)
        /// A problem that does not stop the run (the failure could not be written to the metrics file).
        case problem(String)
    }

    /// Why a run could not start, as a value: the caller words it (`description` is one
    /// sentence that names no command-line flag).
    public struct StartError: Error, CustomStringConvertible, Sendable {
        public enum Reason: Sendable, Equatable {
            /// Another run holds the job: the process holding it, as it wrote itself.
            case busy(holder: String)
            /// A watcher (`hoist watch`) holds the job: its process.
            case watched(holder: String)
            /// A worker of a shared run was asked for on a journal without shared runs.
            case sharedRunsUnsupported(journal: String)
            /// A worker of a shared run was asked for on one shard of the job: the two split it two ways.
            case workerOfAShard
            /// Anything else, said in a sentence (a missing root, no credentials, a journal that cannot be opened).
            case failed(String)
        }

        /// The job's name.
        public let job: String
        public let reason: Reason

        /// Another run holds the job.
        public var busy: Bool {
            switch reason {
            case .busy, .watched: true
            default: false
            }
        }

        public var description: String {
            switch reason {
            case .busy(let holder): "\(job) is already running (pid \(holder))"
            case .watched(let holder): "\(job) is being watched: a watcher (pid \(holder)) holds the job"
            case .sharedRunsUnsupported(let journal): "a shared run needs a PostgreSQL journal, and \(journal) is a file"
            case .workerOfAShard: "a worker of a shared run and a shard split a job two ways: workers share one plan; choose one"
            case .failed(let message): message
            }
        }
    }

    public let job: Job
    public let storage: Storage
    public let journal: (any JournalStore)?
    public let hooks: HookBus?
    public let runID: String
    /// The shared run this process is a worker of.
    public let shared: SharedRun?
    private let options: Options
    private let lock: (any JobRunLock)?

    private init(job: Job, storage: Storage, journal: (any JournalStore)?, hooks: HookBus?, runID: String, options: Options,
                 lock: (any JobRunLock)?, shared: SharedRun?) {
        self.shared = shared
        self.job = job
        self.storage = storage
        self.journal = journal
        self.hooks = hooks
        self.runID = runID
        self.options = options
        self.lock = lock
    }

    /// Takes the job and opens what it needs, in order: journal and lock, roots, storage (and the
    /// pre-flight access check), hooks.
    public static func open(_ job: Job, options: Options) async throws(StartError) -> JobSession {
        var journal: (any JournalStore)?
        var lock: (any JobRunLock)?
        var shared: SharedRun?
        /// Whether a watcher holds the job: its state file says so (believed for the lock's live
        /// holder only), or a PostgreSQL journal's row (believed while its session holds the lock).
        func watched(_ busy: JobLock.Busy) -> Bool {
            guard let path = WatchState.path(journal: job.journalPath(override: options.journalOverride)) else {
                return ((try? journal?.watchState()) ?? nil) != nil
            }
            return WatchState.ofHolder(busy.holder, at: path) != nil
        }
        func fail(_ error: any Error) -> StartError {
            let failure = error as? StartError ?? StartError(job: job.manifest.name, reason: .failed(describe(error)))
            if let metricsFile = options.metricsFile {
                do { try Metrics.writeFailure(job: job.manifest.name, to: metricsFile) } catch {
                    options.log(.problem("\(error)"))
                }
            }
            try? journal?.recordFailedStart(job: job.manifest.name, reason: failure.description)
            lock?.release()
            return failure
        }
        if options.journal {
            do {
                try job.checkJournalOwner(override: options.journalOverride, claim: true)
                let store = try Journal.open(job.journalPath(override: options.journalOverride), job: job.manifest.name, shard: job.shard)
                journal = store
                if options.worker {
                    guard store.supportsSharedRuns else {
                        throw StartError(job: job.manifest.name, reason: .sharedRunsUnsupported(journal: store.location))
                    }
                    guard job.shard == nil else { throw StartError(job: job.manifest.name, reason: .workerOfAShard) }
                    shared = try store.joinSharedRun(wait: options.wait, lease: options.lease, fingerprint: job.fingerprint)
                    lock = shared
                } else {
                    do { lock = try store.claimRun(wait: false) } catch let error as JobLock.Busy {
                        // A watcher never lets go by itself: waiting for one would wait for ever.
                        guard options.wait, !watched(error) else { throw error }
                        lock = try store.claimRun(wait: true)
                    }
                }
            } catch let error as JobLock.Busy {
                throw StartError(job: job.manifest.name, reason: watched(error) ? .watched(holder: error.holder) : .busy(holder: error.holder))
            } catch {
                // A journal that could not be claimed is not written to.
                journal = nil
                throw fail(error)
            }
        }
        let runID = shared?.runID ?? UUID().uuidString.lowercased()
        do {
            let (storage, hooks) = try await prepare(job, runID: runID, options: options)
            return JobSession(job: job, storage: storage, journal: journal, hooks: hooks, runID: runID, options: options, lock: lock,
                              shared: shared)
        } catch {
            throw fail(error)
        }
    }

    /// Checks `job`'s roots, makes and checks its storage, loads its hooks.
    private static func prepare(_ job: Job, runID: String, options: Options) async throws -> (Storage, HookBus?) {
        for note in try job.checkRoots() where !options.quiet { options.log(.note(note)) }
        let storage = try job.makeStorage(caBundle: options.caBundle)
        for warning in job.warnings() { options.log(.warning(warning)) }
        try await storage.backend.checkAccess()
        guard !job.manifest.hooks.isEmpty else { return (storage, nil) }
        let alsoReads = [options.caBundle, options.journalOverride].compactMap { $0 }.filter { !PostgresLocation.isPostgres($0) }
        let hooks = try HookBus(job: job, storage: storage, runID: runID, alsoReads: alsoReads) { line in
            if options.quiet, line.level == .debug || line.level == .info { return }
            options.log(.hook(line))
        }
        return (storage, hooks)
    }

    /// This session with `job` (its manifest loaded again) in place of its own: the same
    /// journal, lock and run, the new job's roots checked, its storage and hooks made anew.
    /// A job of another name or journal is refused (the lock is the old one's).
    public func reloaded(_ job: Job) async throws(StartError) -> JobSession {
        func refuse(_ message: String) -> StartError { StartError(job: self.job.manifest.name, reason: .failed(message)) }
        guard shared == nil else { throw refuse("a shared run's worker cannot take a new manifest") }
        guard job.manifest.name == self.job.manifest.name,
              job.journalPath(override: options.journalOverride) == self.job.journalPath(override: options.journalOverride) else {
            throw refuse("the job's name or journal changed: the watcher holds the old one's lock; restart it to take them")
        }
        do {
            let (storage, hooks) = try await Self.prepare(job, runID: runID, options: options)
            return JobSession(job: job, storage: storage, journal: journal, hooks: hooks, runID: runID, options: options, lock: lock,
                              shared: nil)
        } catch {
            throw refuse(describe(error))
        }
    }

    /// The runner of this run, with `observers` after the journal's recorder and the hooks.
    /// - Parameter listed: the only files it plans, instead of a walk (`JobRunner.listedFiles`).
    /// - Parameter renamed: files renamed within a root, with their earlier paths (`JobRunner.renamedFrom`).
    /// - Parameter mirrorTurn: whether its `mirror` deletes (`JobRunner.mirrorTurn`).
    public func makeRunner(observers: [any JobObserver], listing listed: [(file: WalkedFile, set: Int)]? = nil,
                           renamed: [String: String] = [:], mirrorTurn: MirrorTurn = .now) -> JobRunner {
        // A worker sends nothing while its hold on its files is unconfirmed (`SharedRun.isOpen`).
        if let shared { storage.transferFence = shared }
        let runner = JobRunner(job: job, storage: storage, observers: observers, hooks: hooks, journal: journal, force: options.force,
                               remoteCheck: options.remoteCheck, runID: runID, shared: shared, listing: listed,
                               renamed: renamed, mirrorTurn: mirrorTurn)
        // Cut off from the journal, the run's last writes may never return, and its files are
        // the others' now: the run ends within a lease whatever it waits for.
        shared?.onLost { [weak runner, lease = options.lease] message in runner?.stop(fatal: message, endWithin: lease) }
        return runner
    }

    /// Ends the run: metrics written, the job released for the next run.
    /// - Returns: a problem writing the metrics, to be shown (the run's own outcome stands).
    public func finish(_ summary: JobSummary) -> String? {
        // A worker that lost its hold may be cut off from the journal: it waits a lease at most
        // for the journal to record its end and let it go.
        let bound = shared?.lostHold != nil ? options.lease : nil
        defer { if let lock { _ = Self.waiting(at: bound, "let the job go") { lock.release() } } }
        if !options.quiet { for note in storage.backend.notes { options.log(.note(note)) } }
        var problem: String?
        if let shared {
            let status: SharedRun.WorkerEnd.Status = summary.interrupted ? .interrupted : (summary.fatal != nil ? .failed : .done)
            let end = SharedRun.WorkerEnd(status: status, uploaded: summary.uploaded, failed: summary.failed, bytes: summary.bytes)
            problem = Self.waiting(at: bound, "record this worker's end") { try shared.finish(end) }
        }
        guard let metricsFile = options.metricsFile else { return problem }
        do { try Metrics.write(summary, to: metricsFile) } catch { return "\(error)" }
        return problem
    }
}

extension JobSession {
    /// Does `work`, on a thread of its own when `seconds` bound the wait for it.
    /// - Returns: its error, or a sentence when it did not end in time.
    static func waiting(at seconds: Double?, _ what: String, _ work: @escaping @Sendable () throws -> Void) -> String? {
        guard let seconds else {
            do { try work() } catch { return describe(error) }
            return nil
        }
        let done = DispatchSemaphore(value: 0)
        let problem = Mutex<String?>(nil)
        Thread.detachNewThread {
            do { try work() } catch { problem.withLock { $0 = describe(error) } }
            done.signal()
        }
        guard done.wait(timeout: .now() + seconds) == .success else {
            return "the journal did not answer within \(Int(seconds)) s: could not \(what)"
        }
        return problem.withLock { $0 }
    }
}

/// An error as a person reads it: the message of a storage error (never an `NSError` dump),
/// the description of Hoist's own errors.
public func describe(_ error: any Error) -> String {
    switch error {
    case let error as JournalError: return error.message
    case let error as CustomStringConvertible where !(error is NSError): return error.description
    default: return (error as NSError).localizedDescription
    }
}
