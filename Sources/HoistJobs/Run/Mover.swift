import Foundation
import HoistStorage
import Synchronization

/// `move: true`: removes a file set's files once their objects are stored, verified and
/// recorded `done` in the journal (the removal waits for the journal batch holding that row to
/// commit: `JournalRecorder.whenCommitted`), and only while each file is still the one that was
/// read: same device, inode, size and modification time, checked in its folder right before the
/// unlink (`ByteSource.RootFolder.remove`). A file that changed is kept (and uploaded again by a
/// later run). A file the journal knows done and unchanged (a run killed between the journal's
/// write and the unlink) is removed without uploading it again. Never a vetoed or failed file:
/// only uploads that succeeded and files skipped as unchanged come here.
final class Mover: Sendable {
    private let roots: [ByteSource.RootFolder?]
    private let sets: [FileSet]
    private struct State {
        var moved = 0
        var kept: [(path: String, why: String)] = []
        /// The folders (relative) that held a moved file, for `removeEmptyFolders`.
        var folders: [Int: Set<String>] = [:]
    }
    private let state = Mutex(State())

    init(job: Job, roots: [ByteSource.RootFolder?]) {
        self.roots = roots
        sets = job.manifest.files
    }

    /// Whether `item`'s file set moves its files.
    func moves(_ item: PlanItem) -> Bool { sets.indices.contains(item.fileSetIndex) && sets[item.fileSetIndex].move }

    /// Removes `item`'s file if it is still the one read (call once its `done` row is durable).
    func remove(_ item: PlanItem) {
        let file = item.file
        guard let root = roots.indices.contains(item.fileSetIndex) ? roots[item.fileSetIndex] : nil else {
            state.withLock { $0.kept.append((file.path, "its root is not a folder Hoist holds open")) }
            return
        }
        let outcome = root.remove(file.relativePath, ifStill: (file.device, file.inode, file.size, file.modified.timeIntervalSince1970))
        state.withLock { state in
            switch outcome {
            case .removed:
                state.moved += 1
                if sets[item.fileSetIndex].removeEmptyFolders, let slash = file.relativePath.lastIndex(of: "/") {
                    state.folders[item.fileSetIndex, default: []].insert(String(file.relativePath[..<slash]))
                }
            case .gone: break
            case .changed: state.kept.append((file.path, "it changed after it was read (or is no longer the file uploaded): kept"))
            case .failed(let reason): state.kept.append((file.path, "cannot remove it: \(reason)"))
            }
        }
    }

    /// Removes the folders below each root that moving emptied, deepest first (never a root;
    /// a folder that is not empty stays): those of files moved by this run, and, read from the
    /// journal, those of files an earlier run stored and that are gone (a run killed after its
    /// unlinks left their folders). Returns the moved count and the files kept.
    func finish(journal: (any JournalStore)?, job: Job) -> (moved: Int, kept: [(path: String, why: String)]) {
        var (moved, kept, folders) = state.withLock { ($0.moved, $0.kept, $0.folders) }
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
                root.removeEmptyFolder(folder)
            }
        }
        return (moved, kept)
    }

    /// The folders (relative to `root`) of files the journal holds done below `root` that are gone.
    private func movedEarlier(below root: String, journal: any JournalStore) throws -> Set<String> {
        var folders = Set<String>()
        try journal.forEachDoneRow(below: root) { row in
            let relative = row.source.dropFirst(root.count + 1)
            guard let slash = relative.lastIndex(of: "/"), !folders.contains(String(relative[..<slash])), isNothingAt(row.source) else { return }
            folders.insert(String(relative[..<slash]))
        }
        return folders
    }
}
