import Foundation
import HoistStorage

/// The files of a shared run (`SharedRun`) this worker claims from the journal, a batch at a
/// time: about a second's worth at this worker's rate (at least one per free slot, at most 256),
/// so small files go in big batches (fewer queries) and no worker holds files others could be
/// sending. Each claimed row is made a plan item from this worker's own manifest (`planItem`).
struct ClaimSource {
    let shared: SharedRun
    let job: Job
    let concurrency: Int
    /// Claimed files not yet handed out: a plan item, or why the row makes none.
    private var queue: [Result<PlanItem, ClaimRefused>] = []
    /// No claim before this, after one found nothing to take.
    private(set) var claimAgain = ContinuousClock.now
    /// The run has no unfinished file (or its plan failed): nothing more to claim.
    private(set) var finished = false
    /// Files this worker finished since its first claim.
    private var claimsStarted: ContinuousClock.Instant?
    private var finishedSinceClaims = 0
    /// The key (source, destination) of every row this worker claimed in this run.
    private var claimedKeys = Set<Bytewise>()

    /// A claimed row this worker's manifest does not make: that file fails, unread.
    struct ClaimRefused: Error {
        let item: PlanItem
        let message: String
    }

    init(shared: SharedRun, job: Job, concurrency: Int) {
        self.shared = shared
        self.job = job
        self.concurrency = concurrency
    }

    /// The next claimed file, claiming a batch when none is left (and the last claim allows):
    /// nil when there is none now.
    /// - Parameter running: uploads in flight; `holding`: files this worker took and has not
    ///   finished (in flight, or waiting for a slot).
    /// - Throws: the journal's error (the run cannot go on).
    mutating func next(running: Int, holding: Int) throws -> Result<PlanItem, ClaimRefused>? {
        if queue.isEmpty, !finished, ContinuousClock.now >= claimAgain { try claim(running: running, holdingNone: holding == 0) }
        return queue.isEmpty ? nil : queue.removeFirst()
    }

    /// An upload of this worker ended (its rate sizes the next claims).
    mutating func uploadEnded() {
        if claimsStarted != nil { finishedSinceClaims += 1 }
    }

    /// Nothing more will be claimed (the run's plan failed).
    mutating func end() { finished = true }

    private mutating func claim(running: Int, holdingNone: Bool) throws {
        let start = claimsStarted ?? .now
        claimsStarted = start
        let seconds = max(0.001, (ContinuousClock.now - start) / .seconds(1))
        let limit = min(256, max(concurrency - running, Int(Double(finishedSinceClaims) / seconds)))
        switch try shared.claim(limit: limit) {
        case .files(let files):
            for file in files {
                claimedKeys.insert(Self.key(file.source, file.destination))
                do { queue.append(.success(try Self.planItem(file, job: job, started: shared.started))) } catch {
                    let item = PlanItem(file: WalkedFile(path: file.source, relativePath: file.relativePath, size: file.size,
                                                         modified: Date(timeIntervalSince1970: file.mtime)),
                                        destination: file.destination, attributes: ObjectResource(), decision: .upload,
                                        fileSetIndex: file.fileSetIndex)
                    queue.append(.failure(ClaimRefused(item: item, message: "\(error)")))
                }
            }
        case .wait:
            // A quarter second: a worker waiting while others hold the run's last files leaves
            // (or takes a dead one's) soon after, at one indexed query per poll.
            claimAgain = .now + .milliseconds(Int(min(250, shared.lease * 100)))
            guard holdingNone else { break }
            // Holding nothing, this worker may yet be named by rows it never claimed: rows edited
            // after its claim (their path or destination), so its writes went to the keys it
            // took. Nobody would finish those, and the run would wait for ever
            // (`SharedRunFencingTests`). They go back to the queue, to be judged as claimed.
            // (Rows it did claim may just be waiting for the journal's next batch: left alone.)
            let foreign = try shared.heldRows().filter { !claimedKeys.contains(Self.key($0.source, $0.destination)) }
            if !foreign.isEmpty {
                try shared.giveBack(foreign)
                claimAgain = .now
            }
        case .finished:
            finished = true
        }
    }

    private static func key(_ source: String, _ destination: String) -> Bytewise { .row(source: source, destination: destination) }

    /// The plan item of a claimed file, made from this worker's own manifest: the row must name
    /// a file of one of its file sets (inside its root, by its path below the root, not left out
    /// by its filters), and the destination and metadata are the manifest's, which the row must
    /// match. So whoever can write to the journal can make a worker read no other file, and
    /// write no other object or metadata, than the manifest says.
    static func planItem(_ file: Journal.ClaimedFile, job: Job, started: Date) throws -> PlanItem {
        let sets = job.manifest.files
        guard sets.indices.contains(file.fileSetIndex) else {
            throw PlanError(message: "the shared run's plan names file set \(file.fileSetIndex + 1) and this worker's manifest has "
                + "\(sets.count): run every worker with the same manifest")
        }
        let set = sets[file.fileSetIndex]
        let root = job.root(of: set)
        let parts = file.relativePath.split(separator: "/", omittingEmptySubsequences: false)
        let inside = file.source == (root == "/" ? "" : root) + "/" + file.relativePath
            && !parts.contains { $0.isEmpty || $0 == "." || $0 == ".." }
        let notOurs = "the shared run's plan names \(file.source), which is not a file of this worker's file set \(file.fileSetIndex + 1) "
            + "(root \(root))"
        guard inside || file.source == root else { throw PlanError(message: notOurs + ": not uploaded. Run every worker with the same manifest") }
        // The row says which file, nothing else: filters and templates are judged on the file
        // as it is (its size and time, hidden or a link), as a walk would find it. Its device and
        // inode go with it, so the upload opens that very file.
        if !set.hidden, parts.contains(where: { $0.hasPrefix(".") }) {
            throw PlanError(message: notOurs + " to upload (a hidden file, which the file set leaves out): not uploaded")
        }
        var info = stat()
        guard lstat(file.source, &info) == 0 else {
            throw PlanError(message: "\(file.source) cannot be read: \(String(cString: strerror(errno)))")
        }
        if (info.st_mode & S_IFMT) == S_IFLNK {
            guard set.followSymlinks, stat(file.source, &info) == 0 else {
                throw PlanError(message: notOurs + " to upload (a symbolic link, which the file set does not follow): not uploaded")
            }
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw PlanError(message: "\(file.source) is not a regular file: not uploaded") }
        var walked = WalkedFile(path: file.source, relativePath: file.relativePath, size: 0, modified: Date())
        walked.update(from: info)
        var item: PlanItem
        switch Planner(job: job, now: started).item(for: walked, set: file.fileSetIndex) {
        case .success(let planned): item = planned
        case .failure(let error): throw error
        }
        if case .skip(let reason) = item.decision { throw PlanError(message: notOurs + " to upload (\(reason)): not uploaded") }
        guard item.destination == file.destination, item.attributesText == file.attributes else {
            throw PlanError(message: "the shared run's plan sends \(file.source) to '\(file.destination)' with other metadata or "
                + "to another object than this worker's manifest ('\(item.destination)'): not uploaded. Run every worker with the same manifest")
        }
        item.resumeSession = file.session
        item.mayBeStored = file.takenOver
        return item
    }
}
