import Foundation
import HoistStorage
import Synchronization

/// `move: true`: removes a file set's files once their objects are stored, verified and
/// recorded `done` in the journal (the removal waits for the journal batch holding that row to
/// commit: `JournalRecorder.whenCommitted`), through the removal gate (`RemovalGate`): a file
/// uploaded by this run only while it is still the one that was read (same device, inode, size,
/// mtime and ctime, checked in its folder right before the unlink); a file skipped as unchanged
/// only once its object, read now, was found to hold the file as hashed now (`RunPass` asks
/// `RemovalGate.unprovenStored` first, and uploads it again when that fails). A file that
/// changed is kept (and uploaded again by a later run). Never a vetoed or failed file. With a
/// destination template that can send two files to one object (or several file sets), nothing
/// is removed before the walk has ended without finding two files with one destination.
final class Mover: Sendable {
    private let roots: [RootFolder?]
    private let sets: [FileSet]
    private let observers: [any JobObserver]
    /// Whether removals wait for the walk's end (`holdsUntilWalkEnds`).
    private let waitsForWalk: Bool
    private struct State {
        var moved = 0
        var kept: [(path: String, why: String)] = []
        /// Files that could not be removed (permissions, a read-only file system): failures.
        var failed: [(path: String, destination: String, why: String)] = []
        /// The folders (relative) that held a moved file, for `removeEmptyFolders`.
        var folders: [Int: Set<String>] = [:]
        /// The journal rows (source, destination) of the files removed: marked `moved`.
        var removed: [(source: String, destination: String)] = []
        var hold = Hold.holding([])
    }
    /// Removals while the walk goes on (`waitsForWalk`).
    private enum Hold {
        case holding([(PlanItem, RemovalGate.FileEvidence)])
        /// The walk ended finding no two files for one object.
        case released
        /// The walk found two files for one object: nothing is removed in this run.
        case refused
    }
    private let state = Mutex(State())

    /// - Parameter walks: whether this process walks the tree (a shared run's joining worker does not).
    init(job: Job, roots: [RootFolder?], observers: [any JobObserver], walks: Bool) {
        self.roots = roots
        sets = job.manifest.files
        self.observers = observers
        waitsForWalk = walks && Self.holdsUntilWalkEnds(sets)
    }

    /// Whether a job's removals must wait for its walk to end: some set moves, and either there
    /// are several sets (two roots can name one object) or a moving set's destination is not one
    /// file per relative path (`logs/{name}`: `d1/x.log` and `d2/x.log` are one object), so the
    /// second file of a destination is found before the first is removed.
    static func holdsUntilWalkEnds(_ sets: [FileSet]) -> Bool {
        sets.contains(where: \.move) && (sets.count > 1 || sets.contains { $0.move && !$0.destination.hasRelativePath })
    }

    /// Whether `item`'s file set moves its files.
    func moves(_ item: PlanItem) -> Bool { sets.indices.contains(item.fileSetIndex) && sets[item.fileSetIndex].move }

    /// Removes `item`'s file if it is still the one read or proven stored (call once its `done`
    /// row is durable); held while the walk may still find another file for its object.
    func remove(_ item: PlanItem, evidence: RemovalGate.FileEvidence) {
        let now = state.withLock { state -> Bool in
            guard waitsForWalk else { return true }
            switch state.hold {
            case .released: return true
            case .holding(var held):
                held.append((item, evidence))
                state.hold = .holding(held)
            case .refused:
                state.kept.append((item.file.path, Self.collided))
            }
            return false
        }
        if now { removeNow(item, evidence: evidence) }
    }

    /// Why a file is kept once the walk found two files for one object.
    private static let collided = "kept: two files of this job go to one object, so this run removes none"

    /// The walk ended: held removals go ahead when it found no two files for one object, else
    /// none does, now or later in the run (which fails on the collision): nothing irreversible
    /// was done for either file.
    func walkEnded(collided: Bool) {
        let held = state.withLock { state -> [(PlanItem, RemovalGate.FileEvidence)] in
            guard case .holding(let held) = state.hold else { return [] }
            state.hold = collided ? .refused : .released
            if collided {
                for (item, _) in held { state.kept.append((item.file.path, Self.collided)) }
                return []
            }
            return held
        }
        for (item, evidence) in held { removeNow(item, evidence: evidence) }
    }

    private func removeNow(_ item: PlanItem, evidence: RemovalGate.FileEvidence) {
        let file = item.file
        guard let root = roots.indices.contains(item.fileSetIndex) ? roots[item.fileSetIndex] : nil else {
            state.withLock { $0.failed.append((file.path, item.destination, "cannot remove it: its root is not a folder Hoist holds open")) }
            return
        }
        let outcome = RemovalGate.removeFile(item, from: root)
        if outcome == .removed { for observer in observers { observer.fileRemoved(item, evidence: evidence.name) } }
        state.withLock { state in
            switch outcome {
            case .removed:
                state.moved += 1
                state.removed.append((file.path, item.destination))
                if sets[item.fileSetIndex].removeEmptyFolders, let slash = file.relativePath.lastIndex(of: "/") {
                    state.folders[item.fileSetIndex, default: []].insert(String(file.relativePath[..<slash]))
                }
            case .gone: break
            case .changed: state.kept.append((file.path, "it changed after it was read (or is no longer the file uploaded): kept"))
            case .failed(let reason): state.failed.append((file.path, item.destination, "cannot remove it: \(reason); its object is stored"))
            }
        }
    }

    /// Removes the folders below each root that moving emptied, deepest first (never a root;
    /// a folder that is not empty stays): those of files moved by this run, and, read from the
    /// journal, those of files an earlier run stored and that are gone (a run killed after its
    /// unlinks left their folders). Returns the moved count, the files kept and those that could
    /// not be removed; the journal's rows of the files removed are marked `moved` (not for a
    /// shared run's worker, whose totals count `done` rows: `marksMoved` false).
    func finish(journal: (any JournalStore)?, job: Job, marksMoved: Bool)
        -> (moved: Int, kept: [(path: String, why: String)], failed: [(path: String, destination: String, why: String)])
    {
        var (moved, kept, failed, folders, removed) = state.withLock { ($0.moved, $0.kept, $0.failed, $0.folders, $0.removed) }
        if marksMoved, let journal, !removed.isEmpty {
            do { try journal.apply(try Self.movedRows(removed, in: journal)) } catch {
                kept.append((job.file, "could not record the moved files in the journal: \(error)"))
            }
        }
        for (index, set) in sets.enumerated() where set.move && set.removeEmptyFolders {
            guard let journal else { break }
            do { folders[index, default: []].formUnion(try movedEarlier(below: job.root(of: set), journal: journal)) } catch {
                kept.append((job.root(of: set), "cannot read the journal for folders to remove: \(error)"))
            }
        }
        for (index, relatives) in folders {
            guard let root = roots[index] else { continue }
            var all = Set<String>()
            for relative in relatives {
                var path = Substring(relative)
                while !path.isEmpty {
                    all.insert(String(path))
                    guard let slash = path.lastIndex(of: "/") else { break }
                    path = path[..<slash]
                }
            }
            for folder in all.sorted(by: { $0.split(separator: "/").count > $1.split(separator: "/").count }) {
                if RemovalGate.removeEmptyFolder(folder, from: root) {
                    for observer in observers { observer.folderRemoved(job.root(of: sets[index]) + "/" + folder) }
                }
            }
        }
        return (moved, kept, failed)
    }

    /// The journal's rows of `removed`, marked `moved`.
    private static func movedRows(_ removed: [(source: String, destination: String)], in journal: any JournalStore) throws -> [Journal.Write] {
        let now = Date().timeIntervalSince1970
        return try removed.compactMap { source, destination in
            guard var row = try journal.record(source: source, destination: destination), row.state == .done else { return nil }
            row.state = .moved
            row.updated = now
            return .file(row)
        }
    }

    /// The folders (relative to `root`) of files the journal holds done below `root` that are gone.
    private func movedEarlier(below root: String, journal: any JournalStore) throws -> Set<String> {
        var folders = Set<String>()
        try journal.forEachDoneRow(below: root, includingMoved: true) { row in
            let relative = row.source.dropFirst(root.count + 1)
            guard let slash = relative.lastIndex(of: "/"), !folders.contains(String(relative[..<slash])), isNothingAt(row.source) else { return }
            folders.insert(String(relative[..<slash]))
        }
        return folders
    }
}
