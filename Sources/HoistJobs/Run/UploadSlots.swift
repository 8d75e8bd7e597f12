/// The upload slots of a run, as a value: how many uploads are in flight, which of them are
/// large files, and the large files waiting for a slot of their lane. It does no I/O: the runner
/// asks it what to do next, does that, and tells it what happened (`UploadSlotsTests` feeds it
/// events and checks the actions it returns).
///
/// - At most `concurrency` uploads run at once.
/// - Files over `largeFile` bytes run in at most `concurrency - 1` slots (one when `concurrency`
///   is 1), so small files are never all stuck behind large ones: a large file with no lane slot
///   free waits (deferred) while small files pass it.
/// - A deferred file starts before new work is taken, as soon as a lane slot is free.
/// - At most `deferLimit` files wait: then no new work is taken until one starts.
struct UploadSlots<Item> {
    let concurrency: Int
    let largeSlots: Int
    let largeFile: Int64
    private(set) var running = 0
    private(set) var runningLarge = 0
    private(set) var deferred: [Item] = []
    static var deferLimit: Int { 256 }

    init(concurrency: Int, largeFile: Int64) {
        self.concurrency = max(1, concurrency)
        largeSlots = max(1, self.concurrency - 1)
        self.largeFile = largeFile
    }

    /// What the runner does next.
    enum Action {
        /// Start this upload now (a slot is taken for it).
        case start(Item, large: Bool)
        /// A slot is free: take the next file from the work source (then `admit` it).
        case takeWork
        /// Start nothing: every slot is busy, the run is stopping, or too many files wait.
        case awaitUploads
    }

    /// The next thing to do. Nothing starts once the run is stopping (deferred files stay unstarted).
    mutating func next(stopping: Bool) -> Action {
        guard running < concurrency, !stopping else { return .awaitUploads }
        if runningLarge < largeSlots, !deferred.isEmpty {
            return take(deferred.removeFirst(), large: true)
        }
        return deferred.count >= Self.deferLimit ? .awaitUploads : .takeWork
    }

    /// A file the run decided to upload: start it, or (a large file, its lane full) defer it.
    /// - Returns: `.start`, or `.awaitUploads` when it was deferred.
    mutating func admit(_ item: Item, size: Int64) -> Action {
        let large = size > largeFile
        if large, runningLarge >= largeSlots {
            deferred.append(item)
            return .awaitUploads
        }
        return take(item, large: large)
    }

    /// An upload ended: its slot is free.
    mutating func finished(large: Bool) {
        precondition(running > 0 && (!large || runningLarge > 0), "an upload ended that never started")
        running -= 1
        if large { runningLarge -= 1 }
    }

    /// No upload in flight.
    var isIdle: Bool { running == 0 }

    private mutating func take(_ item: Item, large: Bool) -> Action {
        running += 1
        if large { runningLarge += 1 }
        return .start(item, large: large)
    }
}
