import Foundation
import HoistHTTP

/// One pass of a `JobRunner` over its work: a short loop over its parts. Files come from the
/// work source (the walk's planner, and a shared run's claims), pass the admission step
/// (no-clobber, `before_upload`, the journal again, de-duplication), start in the slots
/// (`UploadSlots`: the large-file lane, deferral), and end in the tally (`RunTally`: counts and
/// which failures stop the run). Used from the runner's task only.
final class RunPass {
    typealias Finished = (item: PlanItem, large: Bool, outcome: UploadOutcome)

    private let runner: JobRunner
    private let observers: [any JobObserver]
    /// Known before the run (`Planner.check()`): observers are not told them again.
    private let totalsKnown: Bool
    private var tally: RunTally
    private var slots: UploadSlots<Admitted>
    /// Files admitted while every slot was busy, being opened and compressed on the CPU workers
    /// (`JobRunner.cpu`) for the next free slots: at most one per worker, so the connections
    /// send while both cores compress, and memory stays bounded (a compressed file of up to
    /// 1 MiB in memory, a larger one in a temporary file).
    private var ahead: [Admitted] = []
    /// Some file set compresses: only then are files taken ahead of the slots (a job that
    /// compresses nothing takes each file as a slot frees, as before).
    private let compresses: Bool

    /// A file admitted for upload, and its preparation when it began ahead of its slot.
    struct Admitted {
        var item: PlanItem
        var prepared: Task<JobRunner.Prepared, Never>?
    }
    private var admission: Admission
    /// The walk; nil for a worker that joined a planned shared run (its files come from claims).
    private var walk: WalkSource?
    private var claims: ClaimSource?
    /// Files a file set's filters left out and another set's root holds: told once the walk
    /// ends, unless another set took them (`LeftOut`).
    private var leftOut: LeftOut
    /// Counts the totals on a thread of its own once the walk waits behind the uploads.
    private let countAhead: CountAhead
    /// `move`: removes files once their `done` rows are durable.
    private let mover: Mover
    /// Objects a `before_upload` hook sent files to instead of their planned ones: a mirror
    /// leaves them too.
    private var redirected = Set<Bytewise>()

    init(runner: JobRunner, observers: [any JobObserver], totalsKnown: Bool) {
        let job = runner.job
        let settings = job.manifest.upload
        self.runner = runner
        self.observers = observers
        self.totalsKnown = totalsKnown
        tally = RunTally(job: job.manifest.name, failFast: settings.failFast, maxErrors: settings.maxErrors)
        slots = UploadSlots(concurrency: settings.concurrency, largeFile: JobRunner.largeFile)
        compresses = job.manifest.files.contains { $0.compress != nil }
        let planner = Planner(job: job, journal: runner.journal, force: runner.force).listing(runner.listedFiles)
        if runner.shared?.plans ?? true { walk = WalkSource(planner: planner) }
        claims = runner.shared.map { ClaimSource(shared: $0, job: job, concurrency: settings.concurrency) }
        leftOut = LeftOut(roots: job.manifest.files.map { job.root(of: $0) })
        countAhead = CountAhead(planner: planner, observers: observers)
        mover = Mover(job: job, roots: runner.roots, observers: observers, walks: walk != nil)
        let hooks = runner.hooks
        admission = Admission(noClobber: settings.noClobber, objectExists: { await runner.exists($0) },
                              beforeUpload: hooks.map { hooks in { try await hooks.beforeUpload($0) } },
                              rewrites: hooks?.defined.contains("before_upload") ?? false,
                              consultJournal: { try planner.consultJournal(&$0) }, isStopping: { runner.isStopping })
    }

    /// Runs the pass to its end: the summary, less what the runner adds once its observers caught up.
    func run() async -> JobSummary {
        await withTaskGroup(of: Finished.self) { group in
            while true {
                await fill(&group)
                if walk?.ended == false, runner.shared == nil, !totalsKnown, slots.running >= slots.concurrency {
                    // The walk waits behind the uploads: the totals are counted ahead of it.
                    countAhead.walkWaits()
                }
                if slots.isIdle {
                    guard await waitForClaims() else { break }
                    continue
                }
                guard let finished = await group.next() else { break }
                ended(finished)
            }
        }
        // Large files still waiting for a slot when the run was interrupted were cancelled, and
        // files made ready ahead never started.
        for _ in slots.deferred + ahead { tally.notStarted(interrupted: runner.isInterrupted) }
        if let walk {
            // Files and folders inside a root that the walk could not read are failures, not skips.
            for problem in walk.problems where problem.isFailure { tally.walkFailed(path: problem.path, message: problem.message) }
            if let error = walk.error { tally.planFailed(manifest: runner.job.file, message: error.message) }
        }
        return tally.summary
    }

    /// What the work source gave.
    private enum Taken {
        case upload(PlanItem)
        /// Dealt with (skipped, failed, planned for a shared run's workers): take the next.
        case handled
        /// Nothing to take now.
        case nothing
    }

    /// Starts uploads while slots are free: deferred large files first, then new work.
    private func fill(_ group: inout TaskGroup<Finished>) async {
        while true {
            switch slots.next(stopping: runner.isStopping) {
            case .awaitUploads:
                await prepareAhead()
                return
            case .start(let admitted, let large):
                start(admitted, large: large, in: &group)
            case .takeWork:
                let admitted: Admitted
                if !ahead.isEmpty {
                    admitted = ahead.removeFirst()
                } else {
                    switch await takeWork() {
                    case .nothing: return
                    case .handled: continue
                    case .upload(let item): admitted = Admitted(item: item)
                    }
                }
                if case .start(let admitted, let large) = slots.admit(admitted, size: admitted.item.file.size) {
                    start(admitted, large: large, in: &group)
                }
            }
        }
    }

    /// Every slot is busy: the walk's next files to compress are admitted and made ready now,
    /// on the CPU workers, one per worker at most; a file that needs no compressing ends it
    /// (opening one ahead saves nothing). Only in a job that compresses, and not in a shared
    /// run, whose claims count what it holds.
    private func prepareAhead() async {
        while compresses, ahead.count < runner.cpu.count, runner.shared == nil, walk?.ended == false, !runner.isStopping,
              ahead.last.map({ $0.item.compression != nil }) ?? true {
            switch await takeWork() {
            case .nothing: return
            case .handled: continue
            case .upload(let item):
                let prepared = item.compression == nil ? nil : Task { [runner] in await runner.prepare(item) }
                ahead.append(Admitted(item: item, prepared: prepared))
            }
        }
    }

    private func start(_ admitted: Admitted, large: Bool, in group: inout TaskGroup<Finished>) {
        group.addTask { [runner] in
            let (outcome, opened) = await runner.upload(admitted.item, prepared: admitted.prepared)
            return (opened, large, outcome)
        }
    }

    private func takeWork() async -> Taken {
        // (No copy of the walk held meanwhile: its iterator's sets stay uniquely referenced, so
        // the walk adds to them in place rather than copying them per file.)
        if walk?.ended == false { return await takeFromWalk() }
        return await takeClaimed()
    }

    private func takeFromWalk() async -> Taken {
        if walk!.shouldYield() { await Task.yield() }
        guard var item = walk!.next(tell: tellProblems) else {
            walkEnded()
            return .handled
        }
        if case .skip(let reason) = item.decision, reason.isFilter {
            if !leftOut.hold(item, reason) { skipped(item, reason) }
            return .handled
        }
        leftOut.taken(item)
        if runner.remoteCheck, item.decision == .skip(.unchanged), await !runner.storedAsJournaled(item) {
            item.decision = .upload
        }
        // (Asked only of a move set's skipped files: no async call per unchanged file.)
        let proven = item.decision == .skip(.unchanged) && mover.moves(item) ? await proveBeforeMove(&item) : false
        // A skipped file no hook can rename needs no admission: no async hop per unchanged file.
        if case .skip(let reason) = item.decision, !admission.rewrites {
            skipped(item, reason, proven: proven)
            return .handled
        }
        guard let shared = runner.shared else { return await admit(item, claimed: false, proven: proven) }
        // Planned for the workers (this one among them), who check no-clobber and run
        // before_upload as they claim it; not started here.
        if case .skip(let reason) = item.decision {
            skipped(item, reason)
        } else {
            if let replaced = item.replacedSession { await runner.endReplacedSession(replaced, of: item) }
            let record = Journal.FileRecord(source: item.file.path, destination: item.destination, size: item.file.size,
                                            mtime: item.file.modified.timeIntervalSince1970, attributes: item.attributesText,
                                            state: item.mayBeStored ? .uploading : .pending, session: item.resumeSession,
                                            runID: shared.runID)
            do { try shared.plan(record, fileSet: item.fileSetIndex, relativePath: item.file.relativePath) } catch { fatal(describe(error)) }
        }
        return .handled
    }

    /// The walk is over: a shared run's plan is in the journal (the workers waiting for it join
    /// now); else observers hear the totals.
    private func walkEnded() {
        guard let walk else { return }
        mover.walkEnded(collided: walk.error != nil)
        for (item, reason) in leftOut.notTaken() { skipped(item, reason) }
        if let shared = runner.shared {
            do {
                if let error = walk.error {
                    try shared.planFailed(error.message)
                } else {
                    try shared.planFinished(skipped: tally.summary.skipped,
                                            failed: tally.summary.failed + walk.problems.filter(\.isFailure).count)
                }
            } catch {
                fatal(describe(error))
            }
            if walk.error != nil { claims?.end() }
        } else if !totalsKnown, walk.error == nil {
            countAhead.walkEnded(files: walk.uploadCount, bytes: walk.uploadBytes)
        }
    }

    private func takeClaimed() async -> Taken {
        guard claims != nil, !(claims?.finished ?? true) else { return .nothing }
        let next: Result<PlanItem, ClaimSource.ClaimRefused>?
        do { next = try claims!.next(running: slots.running, holding: slots.running + slots.deferred.count) } catch {
            fatal(describe(error))
            return .nothing
        }
        switch next {
        case nil:
            return .nothing
        case .failure(let refused)?:
            failBeforeStart(refused.item, refused.message)
            return .handled
        case .success(let item)?:
            var item = item
            let proven = await proveBeforeMove(&item)
            return await admit(item, claimed: true, proven: proven)
        }
    }

    /// - Parameter claimed: a shared run's file: one skipped, or sent elsewhere by a hook (its
    ///   row under the new destination is the one recorded), leaves the run's queue.
    /// - Parameter proven: `move`: `RemovalGate.unprovenStored` found the object holding the file.
    private func admit(_ planned: PlanItem, claimed: Bool, proven: Bool) async -> Taken {
        switch await admission.admit(planned) {
        case .upload(let item):
            if let refusal = otherFilesObject(item) {
                failBeforeStart(item, refusal)
                if claimed { release(planned) }
                return .handled
            }
            if claimed, item.destination != planned.destination { release(planned) }
            if item.destination != planned.destination { redirected.insert(Bytewise(item.destination)) }
            return .upload(item)
        case .skip(let item, let reason):
            skipped(item, reason, proven: proven && item.destination == planned.destination)
            if claimed { release(planned) }
        case .fail(let item, let message):
            failBeforeStart(item, message)
        case .stopped:
            tally.notStarted(interrupted: runner.isInterrupted)
        }
        return .handled
    }

    /// Why `item` must not be uploaded: the journal records its object stored from another file
    /// (a template that sends two files to one object across runs: `logs/{name}` of `d1/x.log`,
    /// then `d2/x.log`), whose bytes may exist nowhere else (a moved file). Nil: it may.
    /// A new version of the same file replaces its object; `--force` overrides the journal.
    private func otherFilesObject(_ item: PlanItem) -> String? {
        guard !runner.force, let journal = runner.journal else { return nil }
        do {
            guard let other = try journal.otherSource(storedAt: item.destination, besides: item.file.path) else { return nil }
            return "'\(printable(item.destination))' holds \(printable(other))'s upload (the journal): not overwritten with another file's "
                + "bytes. Give the destination template a part that tells them apart ({relpath}, {dir}), or force a run to replace it"
        } catch {
            return "the journal could not say which file made '\(printable(item.destination))': \(describe(error)); not uploaded"
        }
    }

    private func release(_ planned: PlanItem) {
        do { try runner.shared?.release(source: planned.file.path, destination: planned.destination) } catch { fatal(describe(error)) }
    }

    /// With nothing in flight: a shared run's worker waits for files others hold (one may die);
    /// false when the pass is over.
    private func waitForClaims() async -> Bool {
        guard let claims, walk?.ended ?? true, !claims.finished, !runner.isStopping else { return false }
        try? await Task.sleep(until: claims.claimAgain)
        return true
    }

    private func ended(_ finished: Finished) {
        slots.finished(large: finished.large)
        claims?.uploadEnded()
        let item = finished.item
        if case .refused(let message) = finished.outcome {
            failBeforeStart(item, message)
        } else {
            apply(tally.uploadEnded(file: item.file.path, destination: item.destination, finished.outcome, stopping: runner.isStopping))
            if case .success = finished.outcome, mover.moves(item) { removeWhenDurable(item, .uploaded) }
        }
        if tally.summary.fatal == nil, let failure = runner.recorder?.failure {
            // Without a journal, done work would be forgotten and failures unrecorded: stop.
            fatal(failure.message)
        }
    }

    /// - Parameter proven: `move`: its object was read and found holding the file as hashed
    ///   now (`proveBeforeMove`), so it goes (an earlier run stored it and was killed before it
    ///   removed it, or the file was put back).
    private func skipped(_ item: PlanItem, _ reason: SkipReason, proven: Bool = false) {
        if reason == .unchanged, proven, mover.moves(item) { removeWhenDurable(item, .storedNow) }
        tally.skipped(reason)
        for observer in observers { observer.fileSkipped(item, reason: reason.description) }
    }

    /// `move`: a file skipped as unchanged is removed only when its object, read now, holds the
    /// file as hashed now (the journal says what to check, not that it is done); else it is
    /// uploaded again, and removed once that upload is verified. Whether it was proven.
    private func proveBeforeMove(_ item: inout PlanItem) async -> Bool {
        guard item.decision == .skip(.unchanged), mover.moves(item) else { return false }
        guard let why = await RemovalGate.unprovenStored(item, runner: runner) else { return true }
        item.decision = .upload
        item.mayBeStored = false
        for observer in observers { observer.walkWarning(path: item.file.path, message: "uploading it again before it is moved: \(why)") }
        return false
    }

    /// `move`: the file goes once the journal holds its `done` row (at once without a journal:
    /// the object was verified before its upload succeeded).
    private func removeWhenDurable(_ item: PlanItem, _ evidence: RemovalGate.FileEvidence) {
        guard let recorder = runner.recorder else { return mover.remove(item, evidence: evidence) }
        recorder.whenCommitted { [mover] in mover.remove(item, evidence: evidence) }
    }

    /// After the uploads (and their observers): `move`'s last removals and emptied folders, then
    /// `mirror`'s deletions, only when every upload of the run succeeded. The summary.
    func afterUploads() async -> JobSummary {
        runner.recorder?.commitNow()
        let (moved, kept, unremoved) = mover.finish(journal: runner.journal, job: runner.job, marksMoved: runner.shared == nil)
        tally.moved(moved)
        for (path, why) in kept { for observer in observers { observer.walkWarning(path: path, message: why) } }
        // A file a move cannot remove is a failure (exit 1, said even with -q): a disk fills.
        for (path, destination, why) in unremoved { tally.afterUploadsFailed(manifest: path, destination: destination, message: why) }
        // A pass of listed files (`hoist watch`'s settled ones) saw no other file: it deletes
        // nothing a mirror would, and leaves stale uploads to whole passes.
        guard runner.listedFiles == nil else { return tally.summary }
        if runner.job.manifest.files.contains(where: { $0.mirror != .off }) {
            switch runner.mirrorTurn {
            case .now:
                await mirror()
            case .later:
                break
            case .withheld:
                for observer in observers {
                    observer.walkWarning(path: runner.job.file, message: "mirror: nothing deleted, as not every upload of the watch window "
                        + "succeeded (tried again after the next window)")
                }
            }
        }
        await endStaleUploads()
        return tally.summary
    }

    /// How old an unfinished upload under the job's prefix must be for a run to end it: a day,
    /// as `rclone cleanup` (an upload that old is no run's, and what a journal holds of one is
    /// sent again if asked for).
    static let staleUploadAge: TimeInterval = 24 * 3600

    /// Uploads killed runs began and no run continued (S3: multipart uploads whose parts are
    /// billed until ended) are ended by a later run that was not interrupted, and said so; not
    /// by a shard or a shared run's worker, beside which others may still be sending. Only
    /// those the journal records (`unfinishedSessions`): another application's upload in the
    /// same bucket is not the job's to end.
    private func endStaleUploads() async {
        guard !runner.isInterrupted, !runner.isStopping, runner.shared == nil, runner.job.shard == nil,
              let ended = await RemovalGate.abortStaleUploads(olderThan: Self.staleUploadAge, runner: runner), !ended.isEmpty
        else { return }
        let names = ended.prefix(3).map { "'\(printable($0))'" }.joined(separator: ", ") + (ended.count > 3 ? ", ..." : "")
        for observer in observers {
            for key in ended { observer.uploadAborted(object: key, evidence: "stale") }
            observer.walkWarning(path: runner.job.file, message: "ended \(ended.count) unfinished upload\(ended.count == 1 ? "" : "s") "
                + "that earlier runs left over a day ago (\(names))")
        }
    }

    private func mirror() async {
        let job = runner.job
        let summary = tally.summary
        guard summary.failed == 0, summary.fatal == nil, !runner.isInterrupted, !runner.isStopping,
              runner.recorder?.failure == nil else {
            if !runner.isInterrupted, summary.fatal == nil {
                for observer in observers {
                    observer.walkWarning(path: job.file, message: "mirror: nothing deleted, as not every upload of the run succeeded")
                }
            }
            return
        }
        guard runner.shared == nil else {
            for observer in observers {
                observer.walkWarning(path: job.file, message: "mirror: a shared run's workers delete nothing; run the job alone to mirror")
            }
            return
        }
        let walk = self.walk
        let redirected = self.redirected
        let runner = self.runner
        let mirror = MirrorPlan(job: job, journal: runner.journal, backend: runner.storage.backend,
                                planned: { walk?.planned($0) == true || redirected.contains(Bytewise($0)) },
                                isStopping: { runner.isStopping }, force: runner.force,
                                walked: walk.map { walk in { walk.files(inSet: $0) } })
        let found: MirrorPlan.Found
        do { found = try await mirror.deletions() } catch {
            tally.afterUploadsFailed(manifest: job.file, message: "mirror: \(describe(error)): nothing deleted")
            return
        }
        // The roots' file systems, as the mirror found them: a later run on another deletes nothing.
        for (root, device) in found.roots {
            do { try runner.journal?.recordRoot(root, device: device) } catch {
                for observer in observers { observer.walkWarning(path: root, message: "mirror could not record its root's file system: \(describe(error))") }
            }
        }
        if let refusal = found.refusal(maxDelete: job.manifest.upload.maxDelete) {
            tally.deletionsRefused(found.deletions.count, manifest: job.file, message: refusal + ": nothing deleted")
            return
        }
        await MirrorDeletes(runner: runner, observers: observers).run(found.deletions) { deletion, outcome in
            self.tally.deletion(outcome)
            if case .failed(let message) = outcome {
                self.tally.afterUploadsFailed(manifest: deletion.source ?? job.file, destination: deletion.object,
                                              message: "mirror could not delete \(deletion.object): \(message)")
            }
        }
    }

    /// A file that failed before its upload started (a claimed one: recorded so, the run does not wait for it).
    private func failBeforeStart(_ item: PlanItem, _ message: String) {
        if let shared = runner.shared {
            do { try shared.failed(source: item.file.path, destination: item.destination, message: message) } catch { fatal(describe(error)) }
        }
        let (failed, stop) = tally.failedBeforeStart(file: item.file.path, destination: item.destination, message: message,
                                                     interrupted: runner.isInterrupted)
        if failed {
            for observer in observers {
                observer.fileFailed(path: item.file.path, destination: item.destination, size: item.file.size, message: message)
            }
        }
        apply(stop)
    }

    /// Files and folders the walk could not take, and what it left out, told as they are found.
    private func tellProblems(_ problems: [WalkProblem]) {
        for problem in problems {
            for observer in observers {
                if problem.isFailure {
                    observer.fileFailed(path: problem.path, destination: "", size: 0, message: problem.message)
                } else {
                    observer.walkWarning(path: problem.path, message: problem.message)
                }
            }
        }
    }

    private func fatal(_ message: String) { apply(tally.fatal(message)) }

    private func apply(_ action: StopAction) {
        switch action {
        case .goOn: break
        case .stopStarting: runner.stopStarting()
        case .stopAll:
            runner.stopStarting()
            runner.cancelInFlight()
        }
    }
}
