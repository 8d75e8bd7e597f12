import Foundation
import Glibc

/// Every folder of a job's roots under inotify: the tree watched at the start, folders that
/// appear (made or moved in) watched as they do, folders that go dropped. It turns the kernel's
/// records into what `JobWatcher` needs: the paths touched, and whether a full pass is owed.
final class FolderWatch {
    /// What a batch of records says.
    struct Batch {
        var touched: [String] = []
        /// Events were lost (the kernel's queue overflowed) or a folder could not be watched.
        var fullPassOwed = false
        /// The kernel's queue overflowed.
        var overflowed = false
        /// A folder was made or moved in (its files may have come before it was watched).
        var foldersMade = false
        /// Files renamed within the watched folders: an `IN_MOVED_FROM` and an `IN_MOVED_TO` of
        /// one cookie, in the order they came.
        var renames: [(from: String, to: String)] = []
        /// Files deleted, or moved out of the watched folders (an `IN_MOVED_FROM` whose pair never came).
        var removed: [String] = []
    }

    let inotify: Inotify
    private var folders: [Int32: String] = [:]
    private let roots: [String]
    /// Folders never watched: the local bucket and the hooks' output (their writes would start passes).
    private let fenced: Set<String>
    /// Files whose changes start no pass: the journal's own.
    private let ignored: Set<String>
    /// The watch limit was reached, and whether that was said.
    private(set) var limitReached = false
    private var limitSaid = false
    /// Folders the walk could not watch for another reason than the limit, with why, not said yet.
    private var failures: [(folder: String, reason: String)] = []

    init?(roots: [String], fenced: [String], ignoring: [String]) {
        guard let inotify = Inotify() else { return nil }
        self.inotify = inotify
        self.roots = roots
        self.fenced = Set(fenced)
        self.ignored = Set(ignoring)
    }

    var count: Int { folders.count }

    /// True the first time it is asked after the watch limit was reached: it is said once.
    func takeLimitNotice() -> Bool {
        guard limitReached, !limitSaid else { return false }
        limitSaid = true
        return true
    }

    /// The folders that could not be watched since the last call, and why.
    func takeFailures() -> [(folder: String, reason: String)] {
        defer { failures = [] }
        return failures
    }

    /// Watches every folder of every root (a root that is a file: its folder, alone). A missing
    /// root is left out. - Returns: whether every folder could be watched.
    @discardableResult
    func watchAll() -> Bool {
        var complete = true
        for root in roots {
            var info = stat()
            guard stat(root, &info) == 0 else { continue }
            complete = (info.st_mode & S_IFMT == S_IFDIR ? watchTree(root) : add((root as NSString).deletingLastPathComponent)) && complete
        }
        return complete
    }

    /// Watches `folder` and every folder below it (symbolic links not followed).
    func watchTree(_ folder: String) -> Bool {
        guard !fenced.contains(AppendTarget.real(folder)) else { return true }
        guard add(folder) else { return false }
        var complete = true
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        for name in names {
            let path = folder == "/" ? "/" + name : folder + "/" + name
            var info = stat()
            if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { complete = watchTree(path) && complete }
        }
        return complete
    }

    private func add(_ folder: String) -> Bool {
        switch inotify.add(folder) {
        case .success(let watch):
            folders[watch] = folder
            return true
        case .failure(let failure) where failure.limitReached:
            limitReached = true
            return false
        case .failure(let failure):
            // Gone already (made and removed at once): nothing there to watch.
            if failure.errno == ENOENT || failure.errno == ENOTDIR { return true }
            failures.append((folder, String(cString: strerror(failure.errno))))
            return false
        }
    }

    /// Drops the watches on `folder` and below (moved away: their paths are no longer theirs).
    private func drop(_ folder: String) {
        for (watch, path) in folders where path == folder || path.hasPrefix(folder + "/") {
            inotify.remove(watch)
            folders[watch] = nil
        }
    }

    /// The records waiting now, turned into paths touched, renames and removals. The kernel
    /// queues a rename's two records together, so both are read in one batch; a move-from with
    /// no move-to (moved out of the roots) is a removal, a move-to with none (moved in) a touch.
    func take() -> Batch {
        var batch = Batch()
        var movedAway: [UInt32: String] = [:]
        var movedAwayOrder: [UInt32] = []
        for event in inotify.read() {
            if event.overflowed {
                batch.overflowed = true
                batch.fullPassOwed = true
                continue
            }
            guard let folder = folders[event.watch] else { continue }
            if event.watchEnded {
                folders[event.watch] = nil
                continue
            }
            if event.name.isEmpty { continue }   // the folder itself (deleted, moved): its parent says so too
            let path = folder == "/" ? "/" + event.name : folder + "/" + event.name
            if ignored.contains(path) { continue }
            if event.isFolder {
                if event.mask & UInt32(IN_MOVED_FROM) != 0 { drop(path) }
                if event.mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 {
                    batch.foldersMade = true
                    if !watchTree(path) { batch.fullPassOwed = true }
                }
                if event.mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 { batch.removed.append(path) }
            } else if event.mask & UInt32(IN_MOVED_FROM) != 0, event.cookie != 0 {
                if movedAway.updateValue(path, forKey: event.cookie) == nil { movedAwayOrder.append(event.cookie) }
            } else if event.mask & UInt32(IN_MOVED_TO) != 0, let from = movedAway.removeValue(forKey: event.cookie) {
                batch.renames.append((from, path))
            } else if event.mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
                batch.removed.append(path)
            }
            batch.touched.append(path)
        }
        batch.removed += movedAwayOrder.compactMap { movedAway[$0] }
        return batch
    }
}
