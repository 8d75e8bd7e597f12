import Foundation
import Glibc
import Synchronization

/// `hoist watch`: a job's catch-up pass, then a pass each time the files events touched have
/// settled (`watch.settle`, `watch.maxWait`: `SettleClock`), for as long as it is not stopped.
///
/// Each pass is a run of the job (a `JobRunner` from the session, journal-driven) through the
/// same code path as `hoist run`: the catch-up and any pass owed whole (an overflow, a rescan, a
/// reload, a folder made, a job that mirrors or moves) walk every root, skipping files the
/// journal knows unchanged; the others plan the settled files alone (`JobRunner.listedFiles`),
/// through the same filters, templates, metadata, hooks and `compress`. Events during a pass wait
/// for the next one. Lost events (the kernel's queue overflowed) and folders that could not be
/// watched owe a full pass, which is the rescan; `watch.rescan` forces one periodically.
///
/// A file renamed within its root is copied on the server from its earlier name's object when
/// that holds its bytes (`Renames`, `JobRunner.copyRenamed`). A job that mirrors deletes what
/// went once per `watch.window` (`MirrorWindow`), after the window's uploads succeeded.
///
/// Idle costs nothing: the loop blocks in poll(2) on the inotify descriptor and the stop pipe,
/// with a timeout only while something waits to settle (or a rescan or a metrics file is set).
///
/// Operations: `stop()` (SIGTERM) checkpoints the uploads in flight (their resumable sessions
/// stay for the next start, which continues them); `reload(_:)` (SIGHUP) takes a new manifest
/// between passes; the watcher's state is kept in `WatchState`'s file beside the journal; the
/// metrics file (if any) is rewritten every `metricsInterval` seconds with the queue's length
/// and the age of the oldest unsettled file.
public final class JobWatcher: Sendable {
    /// What the watcher tells its caller, to word and show.
    public enum Notice: Sendable {
        /// The catch-up pass is done and `folders` folders are watched.
        case watching(folders: Int)
        /// `fs.inotify.max_user_watches` was reached: folders past it are seen by full passes only (said once).
        case watchLimitReached
        /// A folder could not be watched, and why.
        case folderNotWatched(String, reason: String)
        /// The kernel dropped events: a full pass follows.
        case overflowed
        /// No inotify instance (`fs.inotify.max_user_instances`): the watcher cannot start.
        case noInotify(String)
        /// A new manifest was taken (SIGHUP): a full pass follows.
        case reloaded
        /// A new manifest could not be taken (its roots, storage or hooks): the old one stays.
        case reloadFailed(String)
        /// The metrics file could not be written.
        case metricsNotWritten(String)
    }

    /// Seconds between two writes of the metrics file while watching.
    public static let metricsInterval = 15.0

    private let observers: [any JobObserver]
    private let stateObserver = WatchStateObserver()
    private let stopPipe: (read: Int32, write: Int32)
    private let metricsFile: String?
    private let statePath: String?
    private struct State {
        var stopped = false
        var runner: JobRunner?
        var session: JobSession
        /// A manifest to take before the next pass (SIGHUP).
        var reload: Job?
    }
    private let state: Mutex<State>

    /// - Parameter metricsFile: rewritten every `metricsInterval` seconds while watching (the
    ///   session writes it at the end).
    public init(session: JobSession, observers: [any JobObserver], metricsFile: String? = nil) {
        state = Mutex(State(session: session))
        self.observers = observers
        self.metricsFile = metricsFile
        statePath = session.journal.flatMap { WatchState.path(journal: $0.location) }
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(fd, F_SETFL, O_NONBLOCK)   // a stop never blocks on a full pipe
            }
        } else {
            fds = [-1, -1]
        }
        stopPipe = (fds[0], fds[1])
    }

    deinit {
        close(stopPipe.read)
        close(stopPipe.write)
        if let statePath { unlink(statePath) }
    }

    /// Stops the watcher from any thread (a signal): a pass under way is checkpointed (nothing
    /// more starts; each upload in flight stops with its resumable session kept, on the server
    /// and in the journal, for the next start to continue), and `run` returns.
    public func stop() {
        let runner = state.withLock { state -> JobRunner? in
            state.stopped = true
            return state.runner
        }
        runner?.checkpointAll()
        wake()
    }

    /// Takes `job` (a manifest loaded again: SIGHUP) before the next pass, which is a full one.
    /// From any thread; a pass under way ends first.
    public func reload(_ job: Job) {
        state.withLock { $0.reload = job }
        wake()
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
    }

    public var isStopped: Bool { state.withLock { $0.stopped } }

    /// The session passes run in now (a reload replaces it).
    public var session: JobSession { state.withLock { $0.session } }

    /// Watches until stopped, or until a pass stops fatally.
    /// - Parameter pass: runs one pass's runner and returns its summary (the caller's output).
    /// - Returns: the last pass's summary (nil when stopped before any), or a notice that the watcher could not start.
    public func run(notice: @escaping @Sendable (Notice) -> Void,
                    pass: @escaping @Sendable (JobRunner) async -> JobSummary) async -> JobSummary? {
        guard var folders = makeFolders(session.job) else {
            notice(.noInotify(String(cString: strerror(errno))))
            return nil
        }
        var settings = session.job.manifest.watch
        var waiting = Waiting(session.job)
        var watchState = WatchState(pid: getpid(), since: Date().timeIntervalSince1970)
        writeState(&watchState, waiting.clock)
        // Watched before the catch-up pass: what changes during it is seen, and passed after it.
        if !folders.watchAll() { waiting.clock.owePass() }
        report(folders, notice)
        var last = await runPass(pass)
        guard let caughtUp = last, caughtUp.fatal == nil, !isStopped else { return last }
        writeState(&watchState, waiting.clock)
        notice(.watching(folders: folders.count))
        var nextRescan = settings.rescan.map { Self.now() + $0.seconds }
        var nextMetrics = metricsFile.map { _ in Self.now() + Self.metricsInterval }
        var paused = false
        while !isStopped {
            let wake = [waiting.clock.due(), waiting.window.end, nextRescan, nextMetrics].compactMap { $0 }.min()
            await Self.wait(for: [folders.inotify.descriptor, stopPipe.read], until: wake)
            if isStopped { break }
            Self.drain(stopPipe.read)
            if let job = state.withLock({ state in defer { state.reload = nil }; return state.reload }),
               let reloaded = await reload(job, notice: notice) {
                folders = reloaded
                settings = job.manifest.watch
                waiting = Waiting(job, carrying: waiting)
                nextRescan = settings.rescan.map { Self.now() + $0.seconds }
                waiting.owePass(at: Self.now())
            }
            if let pause = Self.testPause, !paused {
                // The test switch: events pile up in the kernel's queue unread (it overflows).
                paused = true
                await Self.wait(for: [stopPipe.read], until: Self.now() + pause)
                if isStopped { break }
            }
            let batch = folders.take()
            let now = Self.now()
            let queued = waiting.clock.pending.count
            waiting.note(batch, at: now)
            if batch.overflowed { notice(.overflowed) }
            report(folders, notice)
            if let rescan = nextRescan, rescan <= now {
                waiting.owePass(at: now)
                nextRescan = now + (settings.rescan?.seconds ?? 0)
            }
            if let due = nextMetrics, due <= now {
                writeMetrics(last, waiting.clock, notice)
                nextMetrics = now + Self.metricsInterval
            }
            guard waiting.isDue(at: now) else {
                if waiting.clock.pending.count != queued { writeState(&watchState, waiting.clock) }
                continue
            }
            // Folders that could not be watched before may be now (watches freed): a full pass covers them meanwhile.
            if batch.fullPassOwed { folders.watchAll() }
            guard let summary = await runDuePass(&waiting, at: now, pass: pass, state: &watchState) else { break }
            last = summary
            if summary.fatal != nil { break }
        }
        return last
    }

    /// The pass due at `now`: the settled files alone, unless a whole pass is owed (a folder
    /// made owes one) or only one can do right; with the renames it takes, and its mirror's
    /// turn in the window. Its summary, or nil when stopped before it began.
    private func runDuePass(_ waiting: inout Waiting, at now: Double, pass: @Sendable (JobRunner) async -> JobSummary,
                            state watchState: inout WatchState) async -> JobSummary? {
        let started = waiting.clock.startPass(at: now)
        writeState(&watchState, waiting.clock)
        let job = session.job
        let files = Self.settledFiles(started.paths, of: job)
        if let hooks = session.hooks, hooks.hearsSettledFiles {
            // on_settle for each file the job takes, before the pass's own hooks.
            for item in Self.items(files, of: job) { hooks.fileSettled(item) }
            await hooks.drain()
        }
        let listed = started.whole || !Self.passesMayBeListed(job) ? nil : files.files
        let turn = waiting.window.turn()
        guard let summary = await runPass(pass, listing: listed, renamed: waiting.renames.take(started.paths, whole: listed == nil),
                                          mirrorTurn: turn) else { return nil }
        waiting.window.passEnded(summary, turn: turn, at: Self.now())
        writeState(&watchState, waiting.clock)
        return summary
    }

    /// The folders of `job`'s roots under a new inotify instance (none watched yet).
    private func makeFolders(_ job: Job) -> FolderWatch? {
        // The journal's own files and the watcher's state start no pass (passes write them).
        let journal = session.journal.map { ["", "-wal", "-shm", "-journal", ".lock"].map($0.location.appending) } ?? []
        let state = statePath.map { [$0, WatchState.temporary($0)] } ?? []
        return FolderWatch(roots: job.manifest.files.map { job.root(of: $0) }, fenced: job.fencedOffFolders, ignoring: journal + state)
    }

    /// Takes `job` in place of the session's: its folders, all watched, or nil (said) when it
    /// cannot be taken and the old one stays.
    private func reload(_ job: Job, notice: (Notice) -> Void) async -> FolderWatch? {
        let reopened: JobSession
        do { reopened = try await session.reloaded(job) } catch {
            notice(.reloadFailed(error.description))
            return nil
        }
        guard let folders = makeFolders(job) else {
            notice(.reloadFailed("no inotify instance (\(String(cString: strerror(errno))))"))
            return nil
        }
        state.withLock { $0.session = reopened }
        folders.watchAll()
        notice(.reloaded)
        return folders
    }

    /// Writes the watcher's state file with the queue as `clock` holds it and the last upload
    /// and error the passes saw.
    private func writeState(_ watchState: inout WatchState, _ clock: SettleClock) {
        let journal = statePath == nil ? session.journal : nil
        guard statePath != nil || journal != nil else { return }
        watchState.queue = clock.pending.count
        watchState.oldestUnsettled = clock.oldestFirst.map { Date().timeIntervalSince1970 - (Self.now() - $0) }
        let last = stateObserver.last.withLock { $0 }
        watchState.lastUpload = last.upload?.file
        watchState.lastUploadAt = last.upload?.at
        watchState.lastError = last.error?.message
        watchState.lastErrorAt = last.error?.at
        if let statePath { watchState.write(to: statePath) } else { try? journal?.recordWatchState(watchState) }
    }

    private func writeMetrics(_ last: JobSummary?, _ clock: SettleClock, _ notice: (Notice) -> Void) {
        guard let metricsFile, let last else { return }
        let oldest = clock.oldestFirst.map { max(0, Self.now() - $0) } ?? 0
        do { try Metrics.write(last, watching: .init(queue: clock.pending.count, oldestUnsettledSeconds: oldest), to: metricsFile) } catch {
            notice(.metricsNotWritten("\(error)"))
        }
    }

    /// Whether `job`'s passes may plan the settled files alone rather than walk every root: not
    /// when a set mirrors (a deletion is judged on the whole tree) or moves (emptied folders are
    /// found by the walk); those get whole passes.
    static func passesMayBeListed(_ job: Job) -> Bool {
        !job.manifest.files.contains { $0.mirror != .off || $0.move }
    }

    /// The settled `paths` as the files of `job`'s sets they are (regular files, or links the
    /// set follows, inside its root, not hidden unless the set takes hidden files), each with its
    /// set, unfiltered (the planner applies the set's filters); and whether a folder is among
    /// them (its files may have come before it was watched: a whole pass finds them). A path
    /// gone since is no file (nothing to upload).
    static func settledFiles(_ paths: [String], of job: Job) -> (files: [(file: WalkedFile, set: Int)], folders: Bool) {
        var files: [(file: WalkedFile, set: Int)] = []
        var folders = false
        for path in paths {
            for (index, set) in job.manifest.files.enumerated() {
                let root = job.root(of: set)
                let prefix = root == "/" ? "/" : root + "/"
                let relative = path == root ? (path as NSString).lastPathComponent : (path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : "")
                let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
                guard !relative.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }),
                      set.hidden || !parts.contains(where: { $0.hasPrefix(".") }) else { continue }
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFLNK, !(set.followSymlinks && stat(path, &info) == 0) { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR { folders = true }
                guard (info.st_mode & S_IFMT) == S_IFREG else { continue }
                var walked = WalkedFile(path: path, relativePath: relative, size: 0, modified: Date())
                walked.update(from: info)
                files.append((walked, index))
            }
        }
        return (files, folders)
    }

    /// The plan items of settled files that `job` takes to upload (through its filters and
    /// templates), each as the walk would plan it.
    static func items(_ settled: (files: [(file: WalkedFile, set: Int)], folders: Bool), of job: Job) -> [PlanItem] {
        let planner = Planner(job: job)
        return settled.files.compactMap { file, index in
            guard case .success(let item) = planner.item(for: file, set: index), case .upload = item.decision else { return nil }
            return item
        }
    }

    /// Reads what wakes have been written to the pipe (it is non-blocking).
    private static func drain(_ descriptor: Int32) {
        var bytes = [UInt8](repeating: 0, count: 64)
        while read(descriptor, &bytes, bytes.count) > 0 {}
    }

    /// One pass, with its runner cancellable by `stop`; nil when stopped before it began.
    /// - Parameter listed: the only files the pass plans (nil: it walks every root).
    /// - Parameter renamed: files renamed since the last pass, each with its earlier path (`JobRunner.renamedFrom`).
    /// - Parameter mirrorTurn: whether its mirror deletes (`MirrorWindow`).
    private func runPass(_ pass: @Sendable (JobRunner) async -> JobSummary,
                         listing listed: [(file: WalkedFile, set: Int)]? = nil, renamed: [String: String] = [:],
                         mirrorTurn: MirrorTurn = .now) async -> JobSummary? {
        let runner = session.makeRunner(observers: observers + [stateObserver], listing: listed, renamed: renamed, mirrorTurn: mirrorTurn)
        let stopped = state.withLock { state in
            if !state.stopped { state.runner = runner }
            return state.stopped
        }
        if stopped { return nil }
        let summary = await pass(runner)
        state.withLock { $0.runner = nil }
        return summary
    }

    private func report(_ folders: FolderWatch, _ notice: (Notice) -> Void) {
        if folders.limitReached, folders.takeLimitNotice() { notice(.watchLimitReached) }
        for failure in folders.takeFailures() { notice(.folderNotWatched(failure.folder, reason: failure.reason)) }
    }

    /// A test switch, inert unless set: `HOIST_TEST_WATCH_PAUSE` (seconds, at most 60) pauses
    /// the first read of events after the catch-up pass, so a burst overflows the kernel's queue
    /// (ARCHITECTURE.md, "Test switches").
    static let testPause: Double? = getenv("HOIST_TEST_WATCH_PAUSE").flatMap { Double(String(cString: $0)) }
        .flatMap { $0 > 0 && $0 <= 60 ? $0 : nil }

    /// Seconds on the monotonic clock.
    static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// Waits until a descriptor is readable or `deadline` (monotonic seconds) passes (nil: no
    /// deadline), blocked in poll(2) on a thread of Dispatch's, not of the task pool's.
    private static func wait(for descriptors: [Int32], until deadline: Double?) async {
        await withCheckedContinuation { (woken: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                let timeout = deadline.map { Int32(max(0, min(($0 - now()) * 1000, Double(Int32.max))).rounded(.up)) } ?? -1
                _ = poll(&polled, nfds_t(polled.count), timeout)
                woken.resume()
            }
        }
    }
}
