import Foundation
import Glibc
import Synchronization

/// `hoist watch`: a job's catch-up pass, then a pass each time the files events touched have
/// settled (`watch.settle`, `watch.maxWait`: `SettleClock`), for as long as it is not stopped.
///
/// Each pass is a whole run of the job (a `JobRunner` from the session, journal-driven): files
/// the journal knows unchanged are skipped cheaply, and filters, templates, metadata, hooks,
/// `compress`, `move` and `mirror` keep every guarantee of `hoist run`. Events during a pass wait
/// for the next one. Lost events (the kernel's queue overflowed) and folders that could not be
/// watched owe a full pass, which is the rescan; `watch.rescan` forces one periodically.
///
/// Idle costs nothing: the loop blocks in poll(2) on the inotify descriptor and the stop pipe,
/// with a timeout only while something waits to settle (or a rescan is set).
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
    }

    private let session: JobSession
    private let observers: [any JobObserver]
    private let stopPipe: (read: Int32, write: Int32)
    private struct State {
        var stopped = false
        var runner: JobRunner?
    }
    private let state = Mutex(State())

    public init(session: JobSession, observers: [any JobObserver]) {
        self.session = session
        self.observers = observers
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
    }

    /// Stops the watcher from any thread (a signal): a pass under way is cancelled as
    /// `hoist run`'s is on SIGINT/SIGTERM (uploads in flight cancelled, nothing left behind),
    /// and `run` returns.
    public func stop() {
        let runner = state.withLock { state -> JobRunner? in
            state.stopped = true
            return state.runner
        }
        runner?.cancelAll()
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
    }

    public var isStopped: Bool { state.withLock { $0.stopped } }

    /// Watches until stopped, or until a pass stops fatally.
    /// - Parameter pass: runs one pass's runner and returns its summary (the caller's output).
    /// - Returns: the last pass's summary (nil when stopped before any), or a notice that the watcher could not start.
    public func run(notice: @escaping @Sendable (Notice) -> Void,
                    pass: @escaping @Sendable (JobRunner) async -> JobSummary) async -> JobSummary? {
        let job = session.job
        // The journal's own files start no pass (each pass writes them).
        let journal = session.journal.map { ["", "-wal", "-shm", "-journal", ".lock"].map($0.location.appending) } ?? []
        guard let folders = FolderWatch(roots: job.manifest.files.map { job.root(of: $0) }, fenced: job.fencedOffFolders,
                                        ignoring: journal) else {
            notice(.noInotify(String(cString: strerror(errno))))
            return nil
        }
        let settings = job.manifest.watch
        var clock = SettleClock(settle: settings.settle.seconds, maxWait: settings.maxWait.seconds)
        // Watched before the catch-up pass: what changes during it is seen, and passed after it.
        if !folders.watchAll() { clock.owePass() }
        report(folders, notice)
        var last = await runPass(pass)
        guard let caughtUp = last, caughtUp.fatal == nil, !isStopped else { return last }
        notice(.watching(folders: folders.count))
        var nextRescan = settings.rescan.map { Self.now() + $0.seconds }
        while !isStopped {
            let wake = [clock.due(), nextRescan].compactMap { $0 }.min()
            await Self.wait(for: [folders.inotify.descriptor, stopPipe.read], until: wake)
            if isStopped { break }
            let batch = folders.take()
            let now = Self.now()
            for path in batch.touched { clock.touch(path, at: now) }
            if batch.overflowed { notice(.overflowed) }
            if batch.fullPassOwed { clock.owePass() }
            report(folders, notice)
            if let rescan = nextRescan, rescan <= now {
                clock.owePass()
                nextRescan = now + (settings.rescan?.seconds ?? 0)
            }
            guard clock.isDue(at: now) else { continue }
            // Folders that could not be watched before may be now (watches freed): a full pass covers them meanwhile.
            if batch.fullPassOwed { folders.watchAll() }
            _ = clock.startPass()
            guard let summary = await runPass(pass) else { break }
            last = summary
            if summary.fatal != nil { break }
        }
        return last
    }

    /// One pass, with its runner cancellable by `stop`; nil when stopped before it began.
    private func runPass(_ pass: @Sendable (JobRunner) async -> JobSummary) async -> JobSummary? {
        let runner = session.makeRunner(observers: observers)
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
