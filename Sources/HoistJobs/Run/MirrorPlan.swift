import Foundation
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
    case failed(String)

    /// As events and hooks name it.
    public var name: String {
        switch self {
        case .deleted: "deleted"
        case .absent: "absent"
        case .changed: "changed"
        case .vetoed: "vetoed"
        case .failed: "failed"
        }
    }
}

/// Finds what a run's `mirror` file sets delete: objects the journal knows this job stored
/// whose files are gone (`mirror: true`), and with `mirror: listed` the objects a listing of the
/// set's destination prefix finds that no file of the run went to. Only under the set's fixed
/// destination prefix (`Template.literalPrefix`), never an object a file of this run went to
/// (`planned`), never one whose file is still there (`lstat`: a file left out by a filter keeps
/// its object, as rclone's filters do), and for a set whose root is missing, nothing.
public struct MirrorPlan {
    let job: Job
    let journal: (any JournalStore)?
    /// Lists the bucket (`mirror: listed`); nil in a plan that cannot reach the storage.
    let backend: (any StorageBackend)?
    /// Whether some file of this run went to an object (its destination hashed as the walk planned it).
    let planned: (String) -> Bool

    public init(job: Job, journal: (any JournalStore)?, backend: (any StorageBackend)?, planned: @escaping (String) -> Bool) {
        self.job = job
        self.journal = journal
        self.backend = backend
        self.planned = planned
    }

    /// The deletions, and how many objects the mirrored sets hold (what `maxDelete: N%` is of).
    public func deletions() async throws -> (deletions: [Deletion], objects: Int) {
        var deletions: [Deletion] = []
        var objects = 0
        var found = Set<Bytewise>()
        for (index, set) in job.manifest.files.enumerated() where set.mirror != .off {
            let root = job.root(of: set)
            var info = stat()
            // A root that is gone (an optional set, a mount that went away) deletes nothing.
            guard lstat(root, &info) == 0 || stat(root, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { continue }
            let prefix = set.destination.literalPrefix
            var held = 0
            if let journal {
                let known = try gone(set: index, root: root, prefix: prefix, journal: journal)
                held = known.objects
                for deletion in known.deletions where found.insert(Bytewise(deletion.object)).inserted { deletions.append(deletion) }
            }
            if set.mirror == .listed {
                guard let backend else { throw StorageFailure(.invalidArgument, "mirror: listed needs the storage to list \(prefix)") }
                let listed = try await strays(set: set, index: index, root: root, prefix: prefix, backend: backend, known: found)
                held = max(held, listed.objects)
                for deletion in listed.deletions where found.insert(Bytewise(deletion.object)).inserted { deletions.append(deletion) }
            }
            objects += held
        }
        return (deletions, objects)
    }

    /// The journal's `done` rows of files below `root` that are gone, for objects under `prefix`.
    private func gone(set index: Int, root: String, prefix: String, journal: any JournalStore) throws
        -> (deletions: [Deletion], objects: Int)
    {
        var deletions: [Deletion] = []
        var objects = 0
        try journal.forEachDoneRow(below: root) { row in
            guard row.destination.hasPrefix(prefix) else { return }
            objects += 1
            let relative = String(row.source.dropFirst(root.count + 1))
            if let shard = job.shard, !shard.contains(relative) { return }
            guard !planned(row.destination), isGone(row.source),
                  let generation = try journal.record(source: row.source, destination: row.destination)?.generation else { return }
            deletions.append(Deletion(object: row.destination, generation: generation, source: row.source, fileSetIndex: index))
        }
        return (deletions, objects)
    }

    /// The listed objects under `prefix` that no file of the run went to, and whose file (for a
    /// `PREFIX{relpath}` destination) is not there or left out by the set's filters.
    private func strays(set: FileSet, index: Int, root: String, prefix: String, backend: any StorageBackend, known: Set<Bytewise>)
        async throws -> (deletions: [Deletion], objects: Int)
    {
        var deletions: [Deletion] = []
        var objects = 0
        var page: String?
        var pages = 0
        repeat {
            let listing = try await backend.list(prefix: prefix, page: page)
            pages += 1
            for object in listing.objects where object.path.hasPrefix(prefix) {
                objects += 1
                guard !planned(object.path), !known.contains(Bytewise(object.path)), let generation = object.generation else { continue }
                if set.destination.isPrefixThenRelativePath {
                    let relative = String(object.path.dropFirst(prefix.count))
                    if let shard = job.shard, !shard.contains(relative) { continue }
                    // A file that is there (left out by a filter, or too young) keeps its object.
                    if !isGone(root + "/" + relative) || leftOut(relative, by: set) { continue }
                }
                deletions.append(Deletion(object: object.path, generation: generation, source: nil, fileSetIndex: index))
            }
            page = listing.next
        } while page != nil && pages < 1_000_000
        return (deletions, objects)
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
    /// Each `done` row of a file below `root`, in walk order, a thousand rows a query.
    func forEachDoneRow(below root: String, _ body: (Journal.KnownRow) throws -> Void) throws {
        var after: (source: String, destination: String)?
        while true {
            let rows = try self.rows(from: root + "/", below: root + "0", after: after, limit: 1000)
            for row in rows where row.known.state == .done { try body(row) }
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
            switch try await runner.storage.reference(withPath: deletion.object).delete(ifGeneration: deletion.generation) {
            case .deleted: return .deleted
            case .absent: return .absent
            case .changed: return .changed
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
