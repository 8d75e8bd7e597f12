/// When the paths events touched have settled, for `hoist watch`: pure bookkeeping on times the
/// caller gives (seconds on a monotonic clock), so it is tested without a file system.
///
/// A pass runs when every touched path has gone `settle` seconds without an event, or when the
/// oldest one has waited `maxWait` (a file that keeps changing is uploaded anyway). Waiting for
/// all of them, not each, keeps a file still being written out of a pass another file's settling
/// starts: the pass is the job's whole (journal-driven) pass, which would read it half-written.
struct SettleClock {
    let settle: Double
    let maxWait: Double
    /// Each touched path's first and last event since the last pass.
    private(set) var pending: [String: (first: Double, last: Double)] = [:]
    /// A full pass is owed (an overflow, a watch that could not be added, a periodic rescan).
    private(set) var fullPassOwed = false

    init(settle: Double, maxWait: Double) {
        self.settle = settle
        self.maxWait = maxWait
    }

    /// A clock with new durations (a manifest reloaded) and what `earlier` still waits for.
    init(settle: Double, maxWait: Double, carrying earlier: SettleClock) {
        self.init(settle: settle, maxWait: maxWait)
        pending = earlier.pending
        fullPassOwed = earlier.fullPassOwed
    }

    /// When the oldest path waiting was first touched; nil when none waits.
    var oldestFirst: Double? { pending.values.map(\.first).min() }

    mutating func touch(_ path: String, at now: Double) {
        if let seen = pending[path] { pending[path] = (seen.first, now) } else { pending[path] = (now, now) }
    }

    /// Asks for a pass as soon as nothing is waiting to settle.
    mutating func owePass() { fullPassOwed = true }

    var isIdle: Bool { pending.isEmpty && !fullPassOwed }

    /// When a pass is due: now or a time to come; nil when nothing waits (block until an event).
    func due() -> Double? {
        guard let oldest = pending.values.map(\.first).min(), let newest = pending.values.map(\.last).max() else {
            return fullPassOwed ? -Double.infinity : nil
        }
        return min(newest + settle, oldest + maxWait)
    }

    /// Whether a pass is due at `now`.
    func isDue(at now: Double) -> Bool { due().map { $0 <= now } ?? false }

    /// Starts a pass: what was pending is its to take (events from now on wait for the next one).
    /// - Returns: the paths the pass is for.
    mutating func startPass() -> [String] {
        let paths = pending.keys.sorted()
        pending = [:]
        fullPassOwed = false
        return paths
    }
}
