import Foundation
import HoistStorage
import HoistYAML

/// A manifest read from its file, with what it needs from around it: its folder (roots and
/// hooks are relative to it) and the environment (`${VAR}`, `{env:VAR}`, credentials).
public struct Job: Sendable {
    public let manifest: JobManifest
    /// The manifest's path as given.
    public let file: String
    /// The folder holding the manifest, absolute.
    public let directory: URL
    public let environment: [String: String]
    /// The manifest's `envFile:`, absolute, when it names one.
    public let envFile: String?
    /// The variables the `envFile:` sets: hooks see none of them unless `lua.env` grants it.
    public let envFileNames: Set<String>
    /// The static shard this process plans and uploads (`--shard K/N`), or nil for every file.
    public var shard: Shard?
    /// The manifest's text, to locate problems found after reading it (a missing root).
    private let text: String

    /// Reads and checks a manifest.
    /// - Throws: `YAMLError` (`FILE:LINE:COL: message` with the line and a caret) for anything wrong in it.
    public init(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            var isFolder: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: file, isDirectory: &isFolder)
            let reason = !exists ? "there is no such file (from \(FileManager.default.currentDirectoryPath))"
                : isFolder.boolValue ? "it is a folder, not a manifest" : "it cannot be read as UTF-8 text (\(error.localizedDescription))"
            throw YAMLError(file: file, mark: YAMLMark(line: 1, column: 1), message: "cannot read the manifest: \(reason)")
        }
        try self.init(text: text, file: file, environment: environment)
    }

    /// Reads and checks a manifest's text. The job's environment is `environment` with the
    /// manifest's `env:` over it (its values may use `${VAR}` of `environment`); the rest of the
    /// manifest is read with that environment. Top-level keys starting with `x-` are ignored
    /// (a place for YAML anchors).
    public init(text: String, file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        var decoder = YAMLDecoder(environment: environment)
        decoder.ignoredTopLevelPrefix = "x-"
        var jobEnvironment = environment
        var envFile: String?
        var envFileNames = Set<String>()
        let raw = try decoder.composeUninterpolated(text, file: file)
        if let node = raw?["envFile"], node.scalar != nil {
            let folder = URL(fileURLWithPath: file).standardizedFileURL.deletingLastPathComponent()
            let name = try decoder.substitute(node, file: file, text: text)
            let path = name.hasPrefix("/") ? name : folder.appendingPathComponent(name).standardizedFileURL.path
            let contents: String
            do { contents = try String(contentsOfFile: path, encoding: .utf8) } catch {
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
                throw YAMLError(file: file, mark: node.mark, message: Self.envFileProblem(name, at: path),
                    sourceLine: lines.indices.contains(node.mark.line - 1) ? String(lines[node.mark.line - 1]) : nil)
            }
            for (key, value) in try Self.parseEnvFile(contents, file: path) {
                jobEnvironment[key] = value
                envFileNames.insert(key)
            }
            envFile = path
            decoder.environment = jobEnvironment
        }
        if let section = raw?["env"], case .mapping(let pairs) = section.kind {
            for pair in pairs {
                guard let name = pair.key.scalar, pair.value.scalar != nil else { continue }
                jobEnvironment[name] = try decoder.substitute(pair.value, file: file, text: text)
            }
        }
        decoder.environment = jobEnvironment
        manifest = try decoder.decode(JobManifest.self, from: text, file: file)
        self.text = text
        self.file = file
        directory = URL(fileURLWithPath: file).standardizedFileURL.deletingLastPathComponent()
        self.environment = jobEnvironment
        self.envFile = envFile
        self.envFileNames = envFileNames
        try checkTemplateVariables()
    }

    /// A job made in code (`hoist cp`): `file` names it in messages, `directory` resolves its
    /// relative paths.
    public init(manifest: JobManifest, file: String, directory: URL, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.manifest = manifest
        self.file = file
        self.directory = directory.standardizedFileURL
        self.environment = environment
        envFile = nil
        envFileNames = []
        text = ""
    }

    /// Why the envFile `name` (as written; `path` where it was looked for) cannot be read, in words.
    static func envFileProblem(_ name: String, at path: String) -> String {
        let looked = name == path ? "" : " (looked for \(path): a relative envFile is read from the manifest's folder)"
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return "envFile \(name) does not exist\(looked)" }
        if isFolder.boolValue { return "envFile \(name) is a folder, not a file of KEY=VALUE lines\(looked)" }
        return access(path, R_OK) != 0 ? "envFile \(name) cannot be read: permission denied\(looked)"
            : "envFile \(name) is not UTF-8 text: give a file of KEY=VALUE lines\(looked)"
    }

    /// `KEY=VALUE` lines (as systemd's `EnvironmentFile=` and Compose's `.env`): blank lines and
    /// `#` comments are skipped, `export ` before a key is allowed, a value in single or double
    /// quotes is taken as written between them.
    /// - Throws: `YAMLError` at a line that is not `KEY=VALUE`.
    static func parseEnvFile(_ text: String, file: String) throws -> [(String, String)] {
        var result: [(String, String)] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = String(line.dropFirst(7)).trimmingCharacters(in: .whitespaces) }
            guard let equals = line.firstIndex(of: "="),
                  case let key = line[..<equals].trimmingCharacters(in: .whitespaces),
                  !key.isEmpty, !key.first!.isNumber, key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
            else {
                throw YAMLError(file: file, mark: YAMLMark(line: number + 1, column: 1),
                                message: "expected KEY=VALUE (a variable name, '=', its value)", sourceLine: String(raw))
            }
            var value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            result.append((key, value))
        }
        return result
    }

    /// Every `{env:VAR}` of a destination or metadata template names a variable that is set.
    /// - Throws: `YAMLError` at each template that uses an unset one.
    private func checkTemplateVariables() throws {
        var errors: [YAMLError] = []
        func check(_ template: Template?, _ path: [any Sendable]) {
            guard let template else { return }
            for case .env(let variable) in template.parts where environment[variable] == nil {
                errors.append(locatedError("environment variable \(variable) is not set (used by {env:\(variable)}): "
                    + "set it, or give it to the job in the manifest's env: section", at: path))
            }
        }
        func check(_ metadata: MetadataSettings?, _ path: [any Sendable]) {
            guard let metadata else { return }
            for field in MetadataSettings.fields { check(metadata[keyPath: field.template], path + [field.name]) }
            for (key, value) in (metadata.customMetadata ?? [:]).sorted(by: { $0.key < $1.key }) {
                check(value, path + ["customMetadata", key])
            }
        }
        for (index, set) in manifest.files.enumerated() {
            check(set.destination, ["files", index, "destination"])
            check(set.metadata, ["files", index, "metadata"])
            for (rule, item) in set.rules.enumerated() { check(item.metadata, ["files", index, "rules", rule, "metadata"]) }
        }
        if !errors.isEmpty { throw YAMLError(combining: errors) }
    }

    /// A file set's root, absolute.
    /// What workers of one shared run must agree on: the manifest's text and where its roots
    /// are (a hash; equal for the same manifest on machines that mount the files alike).
    public var fingerprint: String {
        let roots = manifest.files.map { root(of: $0) }.joined(separator: "\u{0}")
        return String(Shard.hash(text + "\u{0}" + roots), radix: 16)
    }

    public func root(of set: FileSet) -> String {
        resolve(set.root)
    }

    /// Whether the file at `path`, of the file set at `index`, is read following a link at its
    /// end: in a set that follows links, and for the set's root itself (a file the manifest
    /// names, as `root: latest.log` names a link to the day's log: followed as a folder root
    /// is). Elsewhere a link found where a file was leads nowhere.
    func followsLinks(at path: String, inSet index: Int) -> Bool {
        guard manifest.files.indices.contains(index) else { return false }
        let set = manifest.files[index]
        return set.followSymlinks || path == root(of: set)
    }

    /// Checks that every file set's root is a folder Hoist can read, so that a mount that went
    /// away, a typo or a permission change stops the job instead of uploading nothing "successfully";
    /// and what the backend's options can check before it is made (`BackendOptions.check`: the
    /// GCS backend's `credentials` key file can be read).
    /// - Returns: notes for optional file sets whose root is missing (they are skipped).
    /// - Throws: `YAMLError` at the `root:` of the first file set whose root is missing (and not
    ///   `optional: true`) or not a readable folder; at the `storage:` key a backend's check names
    ///   (for a job made in code, the message alone: `mistake(_:at:)`).
    @discardableResult
    public func checkRoots() throws -> [String] {
        var notes: [String] = []
        for (index, set) in manifest.files.enumerated() {
            let root = root(of: set)
            var status = stat()
            let problem: String
            if stat(root, &status) != 0 {
                if set.optional {
                    notes.append("\(root) does not exist; file set \(index + 1) is optional and was skipped")
                    continue
                }
                problem = "root \(root) does not exist (\(String(cString: strerror(errno)))). A mount that went away? "
                    + "Fix the path, or mark the file set `optional: true` to run without it"
            } else if (status.st_mode & S_IFMT) == S_IFREG {
                // A file set of one file.
                guard access(root, R_OK) != 0 else { continue }
                problem = "root \(root) cannot be read (\(String(cString: strerror(errno)))): give the job's user read access"
            } else if (status.st_mode & S_IFMT) != S_IFDIR {
                problem = "root \(root) is not a folder or a file"
            } else if access(root, R_OK | X_OK) != 0 {
                problem = "root \(root) cannot be read (\(String(cString: strerror(errno)))): give the job's user read access"
            } else {
                continue
            }
            throw mistake(problem, at: ["files", index, "root"])
        }
        do { try manifest.storage.options.check(in: backendContext()) } catch let error as BackendOptionError {
            throw mistake(error.message, at: ["storage", error.key])
        }
        _ = try AppendTarget(job: self)
        return notes
    }

    /// An error at the manifest node that `path` (keys and indices) leads to, or as near as it gets.
    func locatedError(_ message: String, at path: [any Sendable]) -> YAMLError {
        let mark = self.mark(at: path)
        return YAMLError(file: file, mark: mark, message: message, sourceLine: sourceLine(mark.line))
    }

    /// The error for a mistake at `path`: located in the manifest, or for a job made in code
    /// (`hoist cp`'s, which has no manifest text) the message alone, with no line to point at.
    func mistake(_ message: String, at path: [any Sendable]) -> any Error {
        text.isEmpty ? MistakeWithoutManifest(description: message) : locatedError(message, at: path)
    }

    /// Where the manifest node that `path` leads to starts, or as near as it gets (1:1 for a job
    /// made in code).
    func mark(at path: [any Sendable]) -> YAMLMark {
        var node = try? YAMLDecoder(environment: environment).compose(text, file: file)
        var mark = node?.mark ?? YAMLMark(line: 1, column: 1)
        for step in path {
            switch (node?.kind, step) {
            case (.mapping, let key as String): node = node?[key]
            case (.sequence(let items), let index as Int) where items.indices.contains(index): node = items[index]
            default: node = nil
            }
            guard let found = node else { break }
            mark = found.mark
        }
        return mark
    }

    /// The manifest's text at `line` (1-based), if it has one.
    func sourceLine(_ line: Int) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return line >= 1 && line <= lines.count ? String(lines[line - 1]) : nil
    }

    /// A path from the manifest as messages show it: as the user would type it where they ran
    /// Hoist, as a manifest error shows the manifest. An absolute one as it is; a relative one
    /// joined to the manifest's path as given (`sub/job.yaml` and `hooks/a.lua` give
    /// `sub/hooks/a.lua`; `/srv/job.yaml` gives `/srv/hooks/a.lua`), `..` left as written (a
    /// folder on the way may be a link).
    public func shown(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var relative = Substring(path)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2).drop { $0 == "/" } }
        let folder = (file as NSString).deletingLastPathComponent
        if folder.isEmpty || folder == "." { return String(relative) }
        return (folder.hasSuffix("/") ? folder : folder + "/") + relative
    }

    /// A path from the manifest, made absolute against the manifest's folder.
    public func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        return directory.appendingPathComponent(path).standardizedFileURL.path
    }

    /// The folder of a storage whose objects are files of this machine (`file:`), absolute;
    /// nil for a bucket on a server.
    public var localBucketFolder: String? {
        let location = manifest.storage.location
        return manifest.storage.registration.urlForm == .folder ? location.directory(relativeTo: directory.path) : nil
    }

    /// Folders a followed link in a root may not lead into (links resolved): the local bucket
    /// and the hooks' output folder (`lua.output`), so what a hook wrote is never uploaded.
    var fencedOffFolders: [String] {
        [localBucketFolder, manifest.lua.output.map(resolve)].compactMap { $0 }.map(AppendTarget.real)
    }

    /// The journal's path: `override`, else `journal:` in the manifest, else the default.
    /// A `postgres://` URL is a shared journal's, taken as it is.
    public func journalPath(override: String? = nil) -> String {
        if let override { return PostgresLocation.isPostgres(override) ? override : URL(fileURLWithPath: override).standardizedFileURL.path }
        if let path = manifest.journal { return PostgresLocation.isPostgres(path) ? path : resolve(path) }
        return Journal.defaultPath(job: manifest.name, environment: environment)
    }

    /// What the storage's backend is made from: the location and options of `storage:`, the
    /// job's environment, its folder for relative paths. A job that moves (it removes the only
    /// other copy) or mirrors (its deletes are conditional on the generation recorded) has its
    /// objects read back where an upload's answer does not say all a read would.
    func backendContext(caBundle: String? = nil) -> BackendContext {
        BackendContext(location: manifest.storage.location, options: manifest.storage.options, environment: environment,
                       directory: directory.path, caBundle: caBundle, concurrency: manifest.upload.concurrency,
                       readsBackUploads: manifest.files.contains { $0.mirror != .off || $0.move })
    }

    /// The storage the job uploads to, configured from `storage:` and `upload:`.
    /// - Parameter caBundle: a CA bundle that wins over the backend's options and the
    ///   environment (`hoist run --ca-bundle`).
    /// - Throws: `YAMLError` at the `storage:` key of an option that cannot be used (a file it
    ///   names cannot be read); the backend's `StorageFailure`.
    public func makeStorage(caBundle: String? = nil) throws -> Storage {
        let backend: any StorageBackend
        do {
            backend = try manifest.storage.registration.factory(backendContext(caBundle: caBundle))
        } catch let error as BackendOptionError {
            throw mistake(error.message, at: ["storage", error.key])
        }
        let storage = Storage(url: manifest.storage.url, backend: backend)
        storage.maxUploadRetryTime = manifest.upload.retryTime.seconds
        storage.maxUploadRetries = manifest.upload.retries
        if let rate = manifest.upload.bandwidth { storage.bandwidthLimiter = BandwidthLimiter(bytesPerSecond: rate.bytesPerSecond) }
        return storage
    }
}

/// A mistake in a job made in code (`hoist cp`): its message alone, as there is no manifest line to show.
struct MistakeWithoutManifest: Error, CustomStringConvertible {
    let description: String
}
