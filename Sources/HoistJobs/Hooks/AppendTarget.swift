import Foundation

/// Where `hoist.append_file` may write: files inside the job's folder, reached without
/// following a symbolic link, that Hoist never reads as configuration.
///
/// Refused: absolute paths and `..`; any symbolic link on the way (folders are opened one by one
/// with `O_NOFOLLOW`); a file with more than one hard link; the manifest, its hook scripts, the
/// journal and its lock, the local bucket, the roots of its file sets; and any name ending in `.yaml`, `.yml`, `.lua`,
/// `.sqlite*`, `.db` or `.lock`, or inside a `.hoist` folder, so a hook cannot hand the next
/// run new settings or new code.
struct AppendTarget: Sendable {
    let directory: String
    /// Absolute paths (inside `directory`) that are never written.
    let protected: Set<String>
    /// Folders (inside `directory`) nothing is written under.
    let protectedFolders: [String]

    static let refusedSuffixes = [".yaml", ".yml", ".lua", ".sqlite", ".sqlite-wal", ".sqlite-shm", ".sqlite-journal", ".db", ".lock"]

    init(job: Job) {
        directory = job.directory.resolvingSymlinksInPath().path
        func real(_ path: String) -> String { URL(fileURLWithPath: path).resolvingSymlinksInPath().path }
        var protected: Set<String> = [real(URL(fileURLWithPath: job.file).standardizedFileURL.path)]
        for hook in job.manifest.hooks { if case .file(let path) = hook { protected.insert(real(job.resolve(path))) } }
        let journal = real(job.journalPath())
        for suffix in ["", "-wal", "-shm", "-journal", ".lock"] { protected.insert(journal + suffix) }
        self.protected = protected
        var folders: [String] = []
        if job.manifest.storage.url.hasPrefix("file:") {
            var rest = String(job.manifest.storage.url.dropFirst("file:".count))
            if rest.hasPrefix("//") { rest = String(rest.dropFirst(2)) }
            folders.append(real(job.resolve(rest.removingPercentEncoding ?? rest)))
        }
        // A file set's root inside the job's folder: what a hook wrote there would be uploaded by
        // the next run (a page added to a site). A root at or above the job's folder cannot be
        // kept out this way; the docs say so.
        for set in job.manifest.files {
            let root = real(job.root(of: set))
            if root.hasPrefix(directory + "/") { folders.append(root) }
        }
        protectedFolders = folders
    }

    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// Appends `data` to `path` (relative to the job's folder), creating it and its folders.
    func append(_ data: Data, to path: String) throws {
        func refuse(_ why: String) -> Refused { Refused(description: "hoist.append_file: '\(path)' \(why)") }
        guard !path.hasPrefix("/") else { throw refuse("must be relative to the job's folder") }
        let relative: String
        do { relative = try normalizedObjectPath(path) } catch { throw refuse("must stay inside the job's folder") }
        let absolute = directory + "/" + relative
        let components = relative.split(separator: "/").map(String.init)
        let lowered = relative.lowercased()
        if Self.refusedSuffixes.contains(where: lowered.hasSuffix) || components.contains(".hoist") {
            throw refuse("is a kind of file Hoist reads (manifests, scripts, journals): hooks cannot write it")
        }
        if protected.contains(absolute) { throw refuse("is read by Hoist (the manifest, a hook, the journal): hooks cannot write it") }
        if protectedFolders.contains(where: { absolute.hasPrefix($0 + "/") }) {
            throw refuse("is inside the job's bucket or a folder it uploads: hooks cannot add what the next run would upload")
        }

        var folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw refuse("cannot be written: \(String(cString: strerror(errno)))") }
        defer { close(folder) }
        for name in components.dropLast() {
            var next = openat(folder, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0, errno == ENOENT {
                guard mkdirat(folder, name, 0o755) == 0 || errno == EEXIST else {
                    throw refuse("cannot be written: \(String(cString: strerror(errno)))")
                }
                next = openat(folder, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard next >= 0 else {
                throw refuse(errno == ELOOP || errno == ENOTDIR ? "goes through a symbolic link or a file: hooks write only inside the job's folder"
                                                              : "cannot be written: \(String(cString: strerror(errno)))")
            }
            close(folder)
            folder = next
        }
        let file = openat(folder, components.last!, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else {
            throw refuse(errno == ELOOP ? "is a symbolic link: hooks write only inside the job's folder"
                                        : "cannot be written: \(String(cString: strerror(errno)))")
        }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw refuse("is not a regular file") }
        guard info.st_nlink == 1 else { throw refuse("has other hard links: hooks write only files of their own") }
        do { try FileHandle(fileDescriptor: file, closeOnDealloc: false).write(contentsOf: data) } catch {
            throw refuse("could not be written whole: \(error.localizedDescription)")
        }
    }
}
