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
        /// Where hooks' log lines and notes (an optional root skipped) go.
        public var log: @Sendable (String) -> Void = { _ in }
        /// `--quiet`: errors only. Notes and hooks' `log.debug`/`log.info`/`print` are not passed
        /// to `log`; hooks' `log.warn`/`log.error` and Hoist's warnings are.
        public var quiet = false

        public init() {}
    }

    /// Why a run could not start: one sentence. `busy` when another run holds the job.
    public struct StartError: Error, CustomStringConvertible, Sendable {
        public let description: String
        public let busy: Bool
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
        func fail(_ error: any Error) -> StartError {
            let message = describe(error)
            if let metricsFile = options.metricsFile {
                do { try Metrics.writeFailure(job: job.manifest.name, to: metricsFile) } catch {
                    options.log("hoist: \(error)")
                }
            }
            try? journal?.recordFailedStart(job: job.manifest.name, reason: message)
            lock?.release()
            return StartError(description: message, busy: false)
        }
        if options.journal {
            do {
                try job.checkJournalOwner(override: options.journalOverride, claim: true)
                let store = try Journal.open(job.journalPath(override: options.journalOverride), job: job.manifest.name, shard: job.shard)
                journal = store
                if options.worker {
                    guard let store = store as? PostgresJournal else {
                        throw JournalError(message: "--worker shares a run through a PostgreSQL journal, and \(store.location) is a file: "
                            + "name one with journal: postgres://... or --journal")
                    }
                    guard job.shard == nil else {
                        throw JournalError(message: "--worker and --shard split a job two ways: workers share one plan; choose one")
                    }
                    shared = try SharedRun(journal: store, wait: options.wait, lease: options.lease, fingerprint: job.fingerprint)
                    lock = shared
                } else {
                    lock = try store.claimRun(wait: options.wait)
                }
            } catch let error as JobLock.Busy {
                throw StartError(description: "\(job.manifest.name) is already running (pid \(error.holder)); use --wait to wait for it",
                                 busy: true)
            } catch {
                // A journal that could not be claimed is not written to.
                journal = nil
                throw fail(error)
            }
        }
        let storage: Storage
        let runID = shared?.runID ?? UUID().uuidString.lowercased()
        var hooks: HookBus?
        do {
            for note in try job.checkRoots() where !options.quiet { options.log("hoist: note: \(note)") }
            storage = try job.makeStorage(caBundle: options.caBundle)
            if job.manifest.storage.insecureSkipTLSVerify == true, job.manifest.storage.url.hasPrefix("gs://") {
                options.log(insecureTLSWarning)
            }
            try await storage.backend.checkAccess()
            if !job.manifest.hooks.isEmpty {
                let alsoReads = [options.caBundle, options.journalOverride].compactMap { $0 }.filter { !PostgresLocation.isPostgres($0) }
                hooks = try HookBus(job: job, storage: storage, runID: runID, alsoReads: alsoReads) { line in
                    if options.quiet, line.level == .debug || line.level == .info { return }
                    options.log("hoist: [\(line.script)] \(line.level.rawValue): \(line.message)")
                }
            }
        } catch {
            throw fail(error)
        }
        return JobSession(job: job, storage: storage, journal: journal, hooks: hooks, runID: runID, options: options, lock: lock,
                          shared: shared)
    }

    /// The runner of this run, with `observers` after the journal's recorder and the hooks.
    public func makeRunner(observers: [any JobObserver]) -> JobRunner {
        let runner = JobRunner(job: job, storage: storage, observers: observers, hooks: hooks, journal: journal, force: options.force,
                               remoteCheck: options.remoteCheck, runID: runID, shared: shared)
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

/// The warning every run prints while TLS checks are off.
public let insecureTLSWarning = "hoist: warning: TLS certificate checks are off (storage.insecureSkipTLSVerify): anyone on the network "
    + "path can read and change these uploads. Use it only against an emulator; for a private CA or proxy, use caBundle."

/// An error as a person reads it: the message of a storage error (never an `NSError` dump),
/// the description of Hoist's own errors.
public func describe(_ error: any Error) -> String {
    switch error {
    case let error as JournalError: return error.message
    case let error as CustomStringConvertible where !(error is NSError): return error.description
    default: return (error as NSError).localizedDescription
    }
}
