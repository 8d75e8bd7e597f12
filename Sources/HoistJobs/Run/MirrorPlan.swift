import Foundation
import HoistHTTP
import HoistStorage

/// One object a file set's `mirror` deletes (or, in a plan, would).
public struct Deletion: Sendable {
    /// The object's path in the bucket.
    public let object: String
    /// The generation the delete is conditional on: the journal's (`gone`) or the listing's (`stray`).
    public let generation: Int64
    /// The file it was stored from, for an object the journal knows; nil for a stray.
    public let source: String?
    public let fileSetIndex: Int

    /// `gone` (its file is gone) or `stray` (a listing found it, and no file of the run went there).
    public var reason: String { source == nil ? "stray" : "gone" }
}

/// What became of a deletion.
public enum DeletionOutcome: Sendable, Equatable {
    case deleted
    /// Nothing was there any more.
    case absent
    /// Another writer replaced the object since (another generation): left alone.
    case changed
    /// A `before_delete` hook kept it.
    case vetoed
    /// The removal gate's check at the moment of the delete failed (its file came back): kept.
    case kept
    case failed(String)

    /// As events and hooks name it.
    public var name: String {
        switch self {
        case .deleted: "deleted"
        case .absent: "absent"
        case .changed: "changed"
        case .vetoed: "vetoed"
        case .kept: "kept"
        case .failed: "failed"
        }
    }
}

/// Finds what a run's `mirror` file sets delete: objects the journal knows this job stored
/// whose files are gone (`mirror: true`), and with `mirror: listed` the objects a listing of the
/// set's destination prefix finds that no file of the run went to. A candidate must be the
/// mirror's own (`RemovalGate.isMirrorCandidate`: byte for byte under the set's fixed
/// destination prefix, no empty, `.` or `..` segment, no folder marker, a name the set's template
/// could make, and none under another file set's prefix), never an object a file of this run
/// went to (`planned`), never one whose file is still there (`lstat`: a file left out by a
/// filter keeps its object, as rclone's filters do). A set whose root is missing deletes
/// nothing; one whose root is empty while the journal holds files stored from it (a volume not
/// mounted) refuses the whole mirror. Listings are de-duplicated and stop on a page token that
/// repeats, past `maxPages`, or when the run stops.
public struct MirrorPlan {
    let job: Job
    let journal: (any JournalStore)?
    /// Lists the bucket (`mirror: listed`); nil in a plan that cannot reach the storage.
    let backend: (any StorageBackend)?
    /// Whether some file of this run went to an object (its destination hashed as the walk planned it).
    let planned: (String) -> Bool
    /// Whether the run is stopping (SIGTERM, SIGINT): a listing ends at its next page.
    let isStopping: () -> Bool
    /// The most pages one listing reads (a server whose tokens never end is not followed for ever).
    let maxPages: Int
    /// `--force`: a root's file system may differ from the one recorded (a run that uploads
    /// everything again takes the new one for the root's).
    let force: Bool
    /// How many files of a set the run's walk found (not those its filters left out); nil
    /// where no walk ran (a plan): then a root must be an empty folder to count as empty.
    let walked: ((Int) -> Int)?

    public init(job: Job, journal: (any JournalStore)?, backend: (any StorageBackend)?, planned: @escaping (String) -> Bool,
                isStopping: @escaping () -> Bool = { false }, maxPages: Int = 100_000, force: Bool = false,
                walked: ((Int) -> Int)? = nil) {
        self.force = force
        self.walked = walked
        self.job = job
        self.journal = journal
        self.backend = backend
        self.planned = planned
        self.isStopping = isStopping
        self.maxPages = maxPages
    }

    /// What a mirror found: its deletions, and what a limit on them is taken of.
    public struct Found: Sendable {
        public var deletions: [Deletion] = []
        /// The objects the journal records as stored under the mirrored prefixes, and the strays
        /// a listing found (each once): what `maxDelete: N%` is of. A listing's other keys count
        /// for nothing: a listing is not trusted for counts.
        public var objects = 0
        /// The objects the journal records as stored under the mirrored prefixes.
        public var journaled = 0
        /// Each mirrored root whose file system the journal does not record as the one it is on
        /// now, and that one: recorded once the mirror ran.
        public var roots: [(path: String, device: UInt64)] = []

        /// Why the deletions must not happen under `maxDelete` (nil: they may). Without an
        /// explicit `upload.maxDelete`, at most half the objects the journal records (at least one).
        public func refusal(maxDelete: DeleteLimit?) -> String? {
            if let limit = maxDelete {
                guard !limit.allows(deletions.count, of: objects) else { return nil }
                return "mirror would delete \(deletions.count) of \(objects) objects, more than upload.maxDelete (\(limit.description))"
            }
            let most = max(1, journaled / 2)
            guard deletions.count > most else { return nil }
            return "mirror would delete \(deletions.count) objects, more than half of the \(journaled) the journal records stored "
                + "(the limit without upload.maxDelete; set it, e.g. maxDelete: 100%, to allow more)"
        }
    }

    /// Why the mirror refuses to delete anything, thrown by `deletions()`.
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The deletions, and how many objects the mirrored sets hold.
    public func deletions() async throws -> Found {
        var found = Found()
        var seen = Set<Bytewise>()
        for (index, set) in job.manifest.files.enumerated() where set.mirror != .off {
            let root = job.root(of: set)
            var info = stat()
            // A root that is gone (an optional set, a mount that went away) deletes nothing.
            guard lstat(root, &info) == 0 || stat(root, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { continue }
            let candidates = RemovalGate.MirrorCandidates(set: index, of: job.manifest.files)
            var followed = stat()
            let device = stat(root, &followed) == 0 ? UInt64(followed.st_dev) : UInt64(info.st_dev)
            let recorded = try journal?.rootDevice(root)
            if recorded != device { found.roots.append((root, device)) }   // written only when it changes
            if !force, let recorded, recorded != device {
                throw Refusal(description: "\(root) is on another file system than when this job last mirrored it (device \(recorded), "
                    + "now \(device): a volume that is not mounted?): nothing deleted. If it is the right one, a forced run (every file uploaded again) records it")
            }
            if let journal {
                let known = try gone(set: index, root: root, candidates: candidates, journal: journal)
                if known.objects > 0, walked.map({ $0(index) == 0 }) ?? Self.isEmptyFolder(root) {
                    throw Refusal(description: "\(root) is empty, but the journal records \(known.objects) objects stored from it "
                        + "(a volume that is not mounted? no file of the set is there, or only files it leaves out): nothing deleted")
                }
                found.journaled += known.objects
                found.objects += known.objects
                for deletion in known.deletions where seen.insert(Bytewise(deletion.object)).inserted { found.deletions.append(deletion) }
            }
            if set.mirror == .listed {
                guard let backend else {
                    throw StorageFailure(.invalidArgument, "mirror: listed needs the storage to list \(candidates.prefix)")
                }
                let strays = try await strays(set: set, index: index, root: root, candidates: candidates, backend: backend, known: seen)
                for deletion in strays where seen.insert(Bytewise(deletion.object)).inserted {
                    found.deletions.append(deletion)
                    found.objects += 1
                }
            }
        }
        return found
    }

    /// Whether the folder at `path` holds nothing at all.
    static func isEmptyFolder(_ path: String) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: path) else { return false }
        return entries.isEmpty
    }

    /// The journal's `done` rows of files below `root` that are gone, for the set's `candidates`;
    /// `objects`: the rows of candidates.
    private func gone(set index: Int, root: String, candidates: RemovalGate.MirrorCandidates, journal: any JournalStore) throws
        -> (deletions: [Deletion], objects: Int)
    {
        var deletions: [Deletion] = []
        var objects = 0
        try journal.forEachDoneRow(below: root) { row in
            guard candidates.contains(row.destination) else { return }
            objects += 1
            if let shard = job.shard, !shard.contains(String(decoding: row.source.utf8.dropFirst(root.utf8.count + 1), as: UTF8.self)) { return }
            guard !planned(row.destination), isGone(row.source),
                  let generation = try journal.record(source: row.source, destination: row.destination)?.generation else { return }
            deletions.append(Deletion(object: row.destination, generation: generation, source: row.source, fileSetIndex: index))
        }
        return (deletions, objects)
    }

    /// The listed objects under `prefix` that no file of the run went to, and whose file (for a
    /// `PREFIX{relpath}` destination) is not there or left out by the set's filters; each key once.
    private func strays(set: FileSet, index: Int, root: String, candidates: RemovalGate.MirrorCandidates, backend: any StorageBackend,
                        known: Set<Bytewise>) async throws -> [Deletion]
    {
        var deletions: [Deletion] = []
        let prefix = candidates.prefix
        var listed = Set<Bytewise>()
        var tokens = Set<String>()
        var page: String?
        var pages = 0
        repeat {
            if isStopping() { throw Refusal(description: "the run was stopped while it listed \(prefix)") }
            let listing = try await backend.list(prefix: prefix, page: page)
            pages += 1
            for object in listing.objects where listed.insert(Bytewise(object.path)).inserted {
                guard candidates.contains(object.path),
                      !planned(object.path), !known.contains(Bytewise(object.path)), let generation = object.generation else { continue }
                // An object the journal records as some file's upload (another set's, a moved
                // file's only copy, one a hook sent elsewhere) is no stray.
                if let journal, try journal.otherSource(storedAt: object.path, besides: "") != nil { continue }
                if set.destination.isPrefixThenRelativePath {
                    let relative = String(object.path.utf8.dropFirst(prefix.utf8.count))!
                    if let shard = job.shard, !shard.contains(relative) { continue }
                    // A file that is there (left out by a filter, or too young) keeps its object.
                    if !isGone(root + "/" + relative) || leftOut(relative, by: set) { continue }
                }
                deletions.append(Deletion(object: object.path, generation: generation, source: nil, fileSetIndex: index))
            }
            page = listing.next
            if let next = page, !tokens.insert(next).inserted {
                throw Refusal(description: "the listing of \(prefix) gave the page token '\(printable(String(next.prefix(64))))' twice")
            }
            if page != nil, pages >= maxPages {
                throw Refusal(description: "the listing of \(prefix) did not end within \(maxPages) pages")
            }
        } while page != nil
        return deletions
    }

    /// Whether the set's `include`/`exclude` leave out a file at `relative`: its object is not the mirror's.
    private func leftOut(_ relative: String, by set: FileSet) -> Bool {
        (!set.include.isEmpty && !set.include.contains { $0.matches(relative) }) || set.exclude.contains { $0.matches(relative) }
            || (!set.hidden && relative.split(separator: "/").contains { $0.hasPrefix(".") })
    }

    private func isGone(_ path: String) -> Bool { isNothingAt(path) }
}

/// Nothing is at `path` (not found, or a file where a folder was): an error reading it is not "gone".
func isNothingAt(_ path: String) -> Bool {
    var info = stat()
    guard lstat(path, &info) != 0 else { return false }
    return errno == ENOENT || errno == ENOTDIR
}

extension JournalStore {
    /// Each `done` row (and `moved` one, `includingMoved`) of a file below `root`, in walk order, a
    /// thousand rows a query.
    func forEachDoneRow(below root: String, includingMoved: Bool = false, _ body: (Journal.KnownRow) throws -> Void) throws {
        var after: (source: String, destination: String)?
        while true {
            let rows = try self.rows(from: root + "/", below: root + "0", after: after, limit: 1000)
            for row in rows where row.known.state == .done || (includingMoved && row.known.state == .moved) { try body(row) }
            guard rows.count == 1000, let last = rows.last else { return }
            after = (last.source, last.destination)
        }
    }
}

/// Carries out a mirror's deletions: each asked of `before_delete` (a veto, or a hook's
/// error, keeps the object), then deleted only while it is still the generation found
/// (`StorageReference.delete(ifGeneration:)`), `upload.concurrency` at a time. Observers hear
/// each outcome; the journal's rows of objects deleted, gone, or replaced by another writer are
/// marked `deleted`, so no later run tries again (a vetoed or failed one is asked again next run).
struct MirrorDeletes {
    let runner: JobRunner
    let observers: [any JobObserver]

    func run(_ deletions: [Deletion], ended: (Deletion, DeletionOutcome) -> Void) async {
        var marks: [Journal.Write] = []
        await withTaskGroup(of: (Deletion, DeletionOutcome).self) { group in
            var next = deletions.makeIterator()
            var running = 0
            func startNext(_ group: inout TaskGroup<(Deletion, DeletionOutcome)>) -> Bool {
                guard let deletion = next.next() else { return false }
                group.addTask { [runner] in (deletion, await Self.delete(deletion, runner: runner)) }
                return true
            }
            while running < runner.job.manifest.upload.concurrency, startNext(&group) { running += 1 }
            while let (deletion, outcome) = await group.next() {
                running -= 1
                for observer in observers { observer.objectDeleted(deletion, outcome) }
                ended(deletion, outcome)
                if let mark = mark(deletion, outcome) { marks.append(mark) }
                if !runner.isStopping, startNext(&group) { running += 1 }
            }
        }
        guard !marks.isEmpty, let journal = runner.journal else { return }
        do { try journal.apply(marks) } catch {
            for observer in observers {
                observer.walkWarning(path: runner.job.file, message: "mirror could not record its deletions in the journal: \(describe(error))")
            }
        }
    }

    private static func delete(_ deletion: Deletion, runner: JobRunner) async -> DeletionOutcome {
        if let hooks = runner.hooks {
            do {
                guard try await hooks.beforeDelete(deletion) else { return .vetoed }
            } catch {
                return .failed(error.description)
            }
        }
        do {
            switch try await RemovalGate.deleteObject(deletion, runner: runner) {
            case .deleted?: return .deleted
            case .absent?: return .absent
            case .changed?: return .changed
            case nil: return .kept
            }
        } catch {
            return .failed(describe(error))
        }
    }

    /// The journal row of a deleted (or replaced, or gone) object, marked so.
    private func mark(_ deletion: Deletion, _ outcome: DeletionOutcome) -> Journal.Write? {
        guard let source = deletion.source, [.deleted, .absent, .changed].contains(outcome),
              var row = (try? runner.journal?.record(source: source, destination: deletion.object)) ?? nil else { return nil }
        row.state = .deleted
        row.error = outcome == .changed ? "another writer replaced the object: kept" : nil
        row.updated = Date().timeIntervalSince1970
        return .file(row)
    }
}
