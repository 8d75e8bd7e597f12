/// `watch.window` for a job whose sets mirror, in `hoist watch`: what went (files deleted,
/// renamed or moved away, or whatever a pass owed whole may find gone) is deleted once per
/// window, by the first pass after the window ends, with `upload.maxDelete` counted over all of
/// it, and only when every pass of the window uploaded all it had to (a window's deletions wait
/// for its uploads, as a run's do). Pure bookkeeping on monotonic seconds the caller gives.
struct MirrorWindow {
    /// The window's length, seconds.
    let length: Double
    /// The job has a set that mirrors (else nothing is ever deleted, and no window opens).
    let applies: Bool
    /// When the open window ends; nil when none is open.
    private(set) var end: Double?
    /// The window ended: the next pass deletes (its turn is `now`, or `withheld`).
    private(set) var closed = false
    /// A pass of the window did not upload all it had to.
    private var failed = false

    init(length: Double, applies: Bool) {
        self.length = length
        self.applies = applies
    }

    /// A window with a new length (a manifest reloaded), still open or closed as `earlier` was.
    init(length: Double, applies: Bool, carrying earlier: MirrorWindow) {
        self.init(length: length, applies: applies)
        guard applies else { return }
        (end, closed, failed) = (earlier.end, earlier.closed, earlier.failed)
    }

    /// Something may have gone: a window opens now unless one is open (or has ended, its pass to come).
    mutating func open(at now: Double) {
        guard applies, end == nil, !closed else { return }
        end = now + length
    }

    /// Whether the open window ended by `now`: then a pass is owed, which deletes.
    mutating func close(at now: Double) -> Bool {
        guard let end, end <= now else { return false }
        self.end = nil
        closed = true
        return true
    }

    /// The mirror's turn in a pass starting now: `now` for the first pass after the window
    /// ended (`withheld` when a pass of the window failed), else `later`.
    mutating func turn() -> MirrorTurn {
        guard applies, closed else { return applies ? .later : .now }
        closed = false
        return failed ? .withheld : .now
    }

    /// A pass of the window ended with `summary`. A pass that was to delete and did not, as an
    /// upload failed, opens a window again: the deletions are tried once the next one's uploads succeed.
    mutating func passEnded(_ summary: JobSummary, turn: MirrorTurn, at now: Double) {
        guard applies else { return }
        let uploadsFailed = summary.failed > 0 || summary.fatal != nil || summary.interrupted
        if turn == .later {
            failed = failed || uploadsFailed
            return
        }
        failed = false
        if turn == .withheld || uploadsFailed { open(at: now) }
    }
}

/// What waits for a watcher's next pass: the paths events touched (`SettleClock`), the renames
/// (`Renames`) and the mirror's window (`MirrorWindow`), kept together as one batch of events
/// tells them.
struct Waiting {
    var clock: SettleClock
    var renames = Renames()
    var window: MirrorWindow

    init(_ job: Job) {
        let settings = job.manifest.watch
        clock = SettleClock(settle: settings.settle.seconds, maxWait: settings.maxWait.seconds, eachFile: JobWatcher.passesMayBeListed(job))
        window = MirrorWindow(length: settings.window.seconds, applies: job.manifest.files.contains { $0.mirror != .off })
    }

    /// For `job` (a manifest reloaded), with what `earlier` waited for.
    init(_ job: Job, carrying earlier: Waiting) {
        let settings = job.manifest.watch
        clock = SettleClock(settle: settings.settle.seconds, maxWait: settings.maxWait.seconds, eachFile: JobWatcher.passesMayBeListed(job),
                            carrying: earlier.clock)
        renames = earlier.renames
        window = MirrorWindow(length: settings.window.seconds, applies: job.manifest.files.contains { $0.mirror != .off },
                              carrying: earlier.window)
    }

    /// What a batch of events says, at `now`: paths touched, renames, and something gone (a
    /// window opens); lost events owe a whole pass, as does a folder made (its files may have
    /// come before it was watched).
    mutating func note(_ batch: FolderWatch.Batch, at now: Double) {
        for path in batch.touched { clock.touch(path, at: now) }
        renames.note(batch)
        if !batch.removed.isEmpty || !batch.renames.isEmpty { window.open(at: now) }
        if batch.fullPassOwed { owePass(at: now) }
        if batch.foldersMade { clock.owePass() }
    }

    /// A whole pass is owed (lost events, a rescan, a reload): it may find files gone, so a window opens.
    mutating func owePass(at now: Double) {
        clock.owePass()
        window.open(at: now)
    }

    /// Whether a pass is due at `now`: a window that ended owes one.
    mutating func isDue(at now: Double) -> Bool {
        if window.close(at: now) { clock.owePass() }
        return clock.isDue(at: now)
    }
}
