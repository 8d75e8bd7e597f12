/// When the paths events touched have settled, for `hoist watch`: pure bookkeeping on times the
/// caller gives (seconds on a monotonic clock), so it is tested without a file system.
///
/// A path settles when it has gone `settle` seconds without an event, or is passed anyway when it
/// has waited `maxWait` since its first one (a file that keeps changing is uploaded regardless).
///
/// Each path settles on its own (`eachFile`): a pass takes the paths that are due and leaves the
/// others waiting, so a photo is not held back by a log appended to forever. That needs passes
/// that plan the paths they are given alone. A whole pass (the walk of every root: owed after an
/// overflow, a rescan, a reload, a folder made, or every pass of a job that mirrors or moves)
/// would read every file still being written, so it waits for all of them instead: until every
/// touched path has been quiet for `settle`, or the oldest has waited `maxWait`.
struct SettleClock {
    let settle: Double
    let maxWait: Double
    /// Paths settle on their own (passes may be of some paths alone); else a pass waits for all.
    let eachFile: Bool
    /// Each touched path's first and last event since the pass that last took it.
    private(set) var pending: [String: (first: Double, last: Double)] = [:]
    /// A full pass is owed (an overflow, a watch that could not be added, a periodic rescan).
    private(set) var fullPassOwed = false

    /// What a pass is for.
    struct Pass: Equatable {
        /// It walks every root (it takes every path that waited).
        var whole: Bool
        /// The paths it takes, sorted.
        var paths: [String]
    }

    init(settle: Double, maxWait: Double, eachFile: Bool) {
        self.settle = settle
        self.maxWait = maxWait
        self.eachFile = eachFile
    }

    /// A clock with new durations (a manifest reloaded) and what `earlier` still waits for.
    init(settle: Double, maxWait: Double, eachFile: Bool, carrying earlier: SettleClock) {
        self.init(settle: settle, maxWait: maxWait, eachFile: eachFile)
        pending = earlier.pending
        fullPassOwed = earlier.fullPassOwed
    }

    /// When the oldest path waiting was first touched; nil when none waits.
    var oldestFirst: Double? { pending.values.map(\.first).min() }

    mutating func touch(_ path: String, at now: Double) {
        if let seen = pending[path] { pending[path] = (seen.first, now) } else { pending[path] = (now, now) }
    }

    /// Asks for a whole pass as soon as nothing is waiting to settle.
    mutating func owePass() { fullPassOwed = true }

    var isIdle: Bool { pending.isEmpty && !fullPassOwed }

    /// When `times`'s path is due on its own.
    private func due(_ times: (first: Double, last: Double)) -> Double { min(times.last + settle, times.first + maxWait) }

    /// When a pass of everything waiting is due: every path quiet, or the oldest waited too long.
    private var allDue: Double? {
        guard let oldest = pending.values.map(\.first).min(), let newest = pending.values.map(\.last).max() else {
            return fullPassOwed ? -Double.infinity : nil
        }
        return min(newest + settle, oldest + maxWait)
    }

    /// When a pass is due: now or a time to come; nil when nothing waits (block until an event).
    func due() -> Double? {
        guard eachFile else { return allDue }
        let first = pending.values.map(due).min()
        guard fullPassOwed, let all = allDue else { return first }
        return min(all, first ?? all)
    }

    /// Whether a pass is due at `now`.
    func isDue(at now: Double) -> Bool { due().map { $0 <= now } ?? false }

    /// Starts the pass due at `now`: what it takes is its own (events from now on wait for the
    /// next one). A whole pass takes every path that waited; another, those due.
    mutating func startPass(at now: Double) -> Pass {
        if !eachFile || (fullPassOwed && (allDue ?? now) <= now) {
            let pass = Pass(whole: fullPassOwed, paths: pending.keys.sorted())
            pending = [:]
            fullPassOwed = false
            return pass
        }
        let paths = pending.filter { due($0.value) <= now }.keys.sorted()
        for path in paths { pending[path] = nil }
        return Pass(whole: false, paths: paths)
    }
}
