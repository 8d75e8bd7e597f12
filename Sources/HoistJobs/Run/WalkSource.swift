/// The files of a run's walk: the job's planner, one item at a time, with the problems the walk
/// met told as they are found. A long stretch of items gives the executor a turn (on the HTTP
/// engine's thread, the uploads in flight are served between stretches).
struct WalkSource {
    let planner: Planner
    private var iterator: Planner.Iterator
    private var problemsTold = 0
    private var walkedSinceYield = 0
    /// The walk reached its end (or stopped at a plan error).
    private(set) var ended = false

    init(planner: Planner) {
        self.planner = planner
        iterator = planner.makeIterator()
    }

    /// The next planned file, or nil at the end of the walk. Problems the walk met since the
    /// last call (folders it could not list, links not followed) go to `tell` first.
    /// (Not async: a hop per walked file cost more than the walk of a no-change run; the caller
    /// yields every `stretch` files, `shouldYield`.)
    mutating func next(tell: ([WalkProblem]) -> Void) -> PlanItem? {
        let item = iterator.next()
        if iterator.problems.count > problemsTold {
            tell(Array(iterator.problems.dropFirst(problemsTold)))
            problemsTold = iterator.problems.count
        }
        if item == nil { ended = true }
        return item
    }

    /// Whether the caller should give the executor a turn now (once every 256 files).
    mutating func shouldYield() -> Bool {
        walkedSinceYield += 1
        guard walkedSinceYield == 256 else { return false }
        walkedSinceYield = 0
        return true
    }

    /// What stopped the plan, if something did.
    var error: PlanError? { iterator.error }
    var problems: [WalkProblem] { iterator.problems }
    /// Files and bytes the walk found to upload.
    var uploadCount: Int { iterator.uploadCount }
    var uploadBytes: Int64 { iterator.uploadBytes }
    /// The files of file set `index` the walk planned (not those its filters left out).
    func files(inSet index: Int) -> Int { iterator.filesPerSet.indices.contains(index) ? iterator.filesPerSet[index] : 0 }
    /// Whether a file of the walk went to `destination`.
    func planned(_ destination: String) -> Bool { iterator.planned(destination) }
}
