import Foundation

/// Where `hoist.append_file` may write: below the one output folder the job declares
/// (`lua.output`), reached without following a symbolic link, and nowhere else.
///
/// An allow-list, not a list of names to refuse: the output folder must hold nothing Hoist reads
/// (the manifest, its envFile, CA bundles, credentials, hook scripts and plugin folders, the
/// journal and its lock, the local bucket, the roots of its file sets, the default state
/// folder), and lie inside none of the folders Hoist reads as a whole. That is checked when the
/// job is read (`Job.checkRoots`, so `hoist validate` says it at `lua.output`) and again when
/// hooks load, with the run's own overrides (`--journal`, `--ca-bundle`). A hook then names a
/// file relative to that folder: no absolute path, no `..`, no symbolic link on the way (each
/// folder opened with `O_NOFOLLOW`, the output folder itself too), no file with another hard link.
struct AppendTarget: Sendable {
    /// The output folder, absolute; nil when the job declares none (then every append is refused).
    let folder: String?

    /// A manifest error at `lua.output`, or nil when the job declares no output folder or it is
    /// clear of everything the job reads.
    /// - Parameter alsoReads: paths a run reads besides the manifest's own (`--journal`, `--ca-bundle`).
    init(job: Job, alsoReads: [String] = []) throws {
        guard let declared = job.manifest.lua.output else {
            folder = nil
            return
        }
        // Checked where it leads; written where it is (a link there is then refused, not followed).
        let declaredPath = URL(fileURLWithPath: job.resolve(declared))
        let output = Self.real(declaredPath.path)
        if let system = Self.systemFolder(containing: output, environment: job.environment) {
            throw job.locatedError("the hook output folder \(output) is \(system): hooks would name files there that the system reads. "
                + "Give hooks a folder of their own, such as logs/ beside the manifest or /var/log/hoist/\(job.manifest.name)", at: ["lua", "output"])
        }
        // The same folder under another name (a bind mount) is found by device and inode: the
        // output folder's, and those of the folders above it, worked out once.
        let outputIdentity = Self.identity(output)
        let outputAncestry = Set(Self.ancestors(of: output).compactMap(Self.identity))
        for (path, what, isTree) in Self.reads(of: job) + alsoReads.map({ (Self.real($0), "a file this run reads", false) }) {
            if path == output || path.hasPrefix(output == "/" ? "/" : output + "/") {
                throw job.locatedError("the hook output folder \(output) holds \(what) (\(path)): hooks could change what the next run reads. "
                    + "Give hooks a folder of their own, such as logs/", at: ["lua", "output"])
            }
            if isTree, output.hasPrefix(path == "/" ? "/" : path + "/") {
                throw job.locatedError("the hook output folder \(output) is inside \(what) (\(path)): hooks could change what the next run reads. "
                    + "Give hooks a folder of their own, outside it", at: ["lua", "output"])
            }
            if let outputIdentity, Self.ancestors(of: path).contains(where: { Self.identity($0) == outputIdentity }) {
                throw job.locatedError("the hook output folder \(output) is the folder that holds \(what) (\(path)), mounted at another path: "
                    + "hooks could change what the next run reads. Give hooks a folder of their own", at: ["lua", "output"])
            }
            if isTree, let tree = Self.identity(path), outputAncestry.contains(tree) {
                throw job.locatedError("the hook output folder \(output) is inside \(what) (\(path)), mounted at another path: "
                    + "hooks could change what the next run reads. Give hooks a folder of their own, outside it", at: ["lua", "output"])
            }
        }
        folder = Self.real(declaredPath.deletingLastPathComponent().path) + "/" + declaredPath.lastPathComponent
    }

    /// Folders whose files the system or the user's tools read as settings, keys or code (cron
    /// tables, CA stores, `ld.so.preload`, `~/.ssh`, shell profiles): an output folder there,
    /// or one holding one of them, is refused whatever the manifest says.
    static func systemFolder(containing output: String, environment: [String: String]) -> String? {
        func inside(_ folder: String) -> Bool { output == folder || output.hasPrefix(folder + "/") }
        for folder in ["/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc", "/sys",
                       "/run", "/var/spool", "/var/lib", "/var/cache", "/opt"] where inside(folder) || inside(real(folder)) {
            return "a system folder (\(folder))"
        }
        var homes = Set(["/root", NSHomeDirectory()])
        if let home = environment["HOME"], home.hasPrefix("/") { homes.insert(home) }
        if let home = ProcessInfo.processInfo.environment["HOME"], home.hasPrefix("/") { homes.insert(home) }
        for home in homes.map(real) where home != "/" {
            if output == home || home.hasPrefix(output + "/") || output == "/" { return "a home folder or holds one (\(home))" }
            if output.hasPrefix(home + "/."), !output.hasPrefix(home + "/./") { return "inside a hidden folder of a home folder (\(home))" }
        }
        if output == "/" || output == "/home" || output == "/var" || output == "/tmp" || output == "/var/tmp" {
            return "a folder every user and tool shares (\(output))"
        }
        return nil
    }

    /// A file's or folder's device and inode (following links), or nil when there is none.
    static func identity(_ path: String) -> [UInt64]? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }

    /// `path` and every folder above it, up to `/`.
    static func ancestors(of path: String) -> [String] {
        var paths = [path]
        var current = path
        while current != "/", !current.isEmpty {
            current = (current as NSString).deletingLastPathComponent
            paths.append(current.isEmpty ? "/" : current)
        }
        return paths
    }

    /// The path with every symbolic link resolved, as far as it exists (the rest as written).
    static func real(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path }

    /// What a run of `job` reads, resolved: each path, what it is, and whether Hoist reads the
    /// whole folder (so the output folder may not lie inside it either).
    static func reads(of job: Job) -> [(path: String, what: String, isTree: Bool)] {
        var reads: [(String, String, Bool)] = [(real(URL(fileURLWithPath: job.file).path), "the manifest", false)]
        if let envFile = job.envFile { reads.append((real(envFile), "the envFile", false)) }
        for hook in job.manifest.hooks { if case .file(let path) = hook { reads.append((real(job.resolve(path)), "a hook script", false)) } }
        for folder in PluginCatalog.directories(for: job, environment: job.environment) { reads.append((real(folder), "a plugin folder", true)) }
        for read in job.manifest.storage.options.reads(in: job.backendContext()) { reads.append((real(read.path), read.what, read.isTree)) }
        // The job's environment (what Hoist's own code reads) and the process's (what the C libraries read).
        for environment in [job.environment, ProcessInfo.processInfo.environment] {
            for read in ProcessReads.reads(in: environment) { reads.append((real(read.path), read.what, true)) }
        }
        let journal = job.journalPath()
        if PostgresLocation.isPostgres(journal) {
            if let root = (try? PostgresLocation(journal, environment: job.environment))?.rootCertificate {
                reads.append((real(URL(fileURLWithPath: root).path), "the journal's CA file (sslrootcert)", false))
            }
        } else {
            let path = real(journal)
            for suffix in ["", "-wal", "-shm", "-journal", ".lock", ".manifest"] { reads.append((path + suffix, "the journal", false)) }
        }
        // Every job's default journal: this job's environment's, and the process's (other jobs').
        for environment in [job.environment, ProcessInfo.processInfo.environment] {
            let state = URL(fileURLWithPath: Journal.defaultPath(job: job.manifest.name, environment: environment)).deletingLastPathComponent().path
            reads.append((real(state), "Hoist's state folder (every job's journal)", true))
        }
        if let bucket = job.localBucketFolder { reads.append((real(bucket), "the local bucket", true)) }
        for set in job.manifest.files { reads.append((real(job.root(of: set)), "a file set's root (what the next run uploads)", true)) }
        return reads
    }

    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// Appends `data` to `path` (relative to the output folder), creating it and its folders.
    func append(_ data: Data, to path: String) throws {
        func refuse(_ why: String) -> Refused { Refused(description: "hoist.append_file: '\(path)' \(why)") }
        guard let folder else {
            throw refuse("cannot be written: this job declares no folder for hook output (set lua.output in the manifest, e.g. `lua: { output: logs/ }`)")
        }
        guard !path.hasPrefix("/") else { throw refuse("must be relative to the job's hook output folder") }
        let relative: String
        do { relative = try normalizedObjectPath(path) } catch { throw refuse("must stay inside the job's hook output folder") }
        let components = relative.split(separator: "/").map(String.init)
        guard !components.isEmpty else { throw refuse("names no file") }

        func failure(_ what: String) -> Refused {
            refuse(errno == ELOOP || errno == ENOTDIR ? "goes through \(what): hooks write only inside the job's hook output folder"
                                                      : "cannot be written: \(String(cString: strerror(errno)))")
        }
        // From the root down, each folder opened without following a link (made when missing):
        // the output folder's path had none when it was checked, and a link swapped in on the
        // way since (a folder above it that another user may rename) is refused, not followed.
        var directory = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw failure("the root folder") }
        defer { close(directory) }
        let outputComponents = folder.split(separator: "/").map(String.init)
        for (index, name) in (outputComponents + components.dropLast()).enumerated() {
            var next = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0, errno == ENOENT {
                guard mkdirat(directory, name, 0o755) == 0 || errno == EEXIST else { throw failure("a folder") }
                next = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard next >= 0 else { throw failure(index < outputComponents.count ? "a symbolic link on the way to the output folder" : "a symbolic link or a file") }
            close(directory)
            directory = next
        }
        let file = openat(directory, components.last!, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o644)
        guard file >= 0 else {
            throw refuse(errno == ELOOP ? "is a symbolic link: hooks write only inside the job's hook output folder"
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
