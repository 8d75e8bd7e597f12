import Foundation
import HoistLua
import HoistYAML

/// Where a job's hooks come from, and their check before a run (`hoist validate`).
public enum HookSources {
    /// The hooks' sources: files relative to the manifest (named as `Job.shown` says), `inline:` entries (named
    /// `JOB.yaml#hooks[N]`) and plugins by name (named `plugin NAME`), each with the globals it
    /// gets (a plugin's `settings`).
    /// - Throws: `HookError` for a file that cannot be read; `YAMLError`s (each with its line and
    ///   column) for plugins that are not found or settings they do not take.
    public static func of(_ job: Job) throws -> [(name: String, source: [UInt8], globals: [String: LuaValue])] {
        var problems: [YAMLError] = []
        var result: [(name: String, source: [UInt8], globals: [String: LuaValue])] = []
        for (index, hook) in job.manifest.hooks.enumerated() {
            switch hook {
            case .inline(let source):
                // Its lines are numbered as the manifest's: the script starts on the line after
                // `inline: |` (or on its line, for a one-line value), so an error names the line
                // a user finds in the file.
                let mark = job.mark(at: ["hooks", index, "inline"])
                let indicator = job.sourceLine(mark.line).map { Array($0).dropFirst(max(0, mark.column - 1)).first } ?? nil
                let firstLine = mark.line + (indicator == "|" || indicator == ">" ? 1 : 0)
                result.append(("\(job.file)#hooks[\(index)]", Array((String(repeating: "\n", count: max(0, firstLine - 1)) + source).utf8), [:]))
            case .file(let path):
                let resolved = job.resolve(path)
                switch readScript(resolved) {
                // Named as the user would open it from where Hoist runs (`Job.shown`): errors,
                // warnings and log lines name `sub/hooks/a.lua`, not `hooks/a.lua`.
                case .success(let source): result.append((job.shown(path), source, [:]))
                case .failure(let problem):
                    throw job.locatedError("cannot read hook \(path) (\(resolved)): \(problem.reason)", at: ["hooks", index])
                }
            case .plugin(let name, let given):
                guard let plugin = PluginCatalog.find(name, for: job, environment: job.environment),
                      case .success(let source) = readScript(plugin.path) else {
                    let names = PluginCatalog.all(for: job, environment: job.environment).map(\.name)
                    var message = "no plugin '\(name)'"
                    if let near = nearest(to: name, in: names) {
                        message += " (did you mean '\(near)'?)"
                    }
                    message += names.isEmpty ? "; no plugins were found (see hoist plugins)" : "; the plugins are \(names.joined(separator: ", "))"
                    problems.append(job.locatedError(message, at: ["hooks", index, "plugin"]))
                    continue
                }
                let (settings, issues) = plugin.convert(given)
                for issue in issues {
                    problems.append(job.locatedError(issue.message, at: issue.key.map { ["hooks", index, "with", $0] } ?? ["hooks", index]))
                }
                result.append(("plugin \(name)", source, ["settings": settings]))
            }
        }
        if !problems.isEmpty { throw YAMLError(combining: problems) }
        return result
    }

    /// The largest hook file read: a script, not data (and never a device that reads forever).
    static let maxScriptBytes = 16 << 20

    struct ReadProblem: Error { let reason: String }

    /// A Lua script's bytes as they are in the file: Lua source is bytes, and older scripts
    /// hold Latin-1 in their string literals. Only a regular file of at most `maxScriptBytes`
    /// is read; any refusal says what is wrong with the file.
    static func readScript(_ path: String) -> Result<[UInt8], ReadProblem> {
        // Opened first, then checked: what is read is what was checked. O_NONBLOCK: a FIFO put
        // there opens at once (and is refused), rather than waiting for a writer.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(ReadProblem(reason: systemReason(errno))) }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return .failure(ReadProblem(reason: systemReason(errno))) }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            return .failure(ReadProblem(reason: (status.st_mode & S_IFMT) == S_IFDIR ? "it is a folder, not a file" : "it is not a regular file"))
        }
        do {
            let data = try handle.read(upToCount: maxScriptBytes + 1) ?? Data()
            guard data.count <= maxScriptBytes else {
                return .failure(ReadProblem(reason: "it is larger than \(maxScriptBytes >> 20) MiB, the most a hook file may be"))
            }
            return .success(Array(data))
        } catch {
            return .failure(ReadProblem(reason: "it cannot be read: \(error.localizedDescription)"))
        }
    }

    private static func systemReason(_ code: Int32) -> String {
        switch code {
        case ENOENT: return "there is no such file"
        case EACCES: return "permission denied"
        case ENOTDIR: return "a folder on its path is a file"
        default: return String(cString: strerror(code)).lowercased()
        }
    }

    /// The global functions a script defines (`function NAME(`, `NAME = function`) that are
    /// no hook but within two edits of one (`on_sucess`, `before_uplod`), each with that hook:
    /// nothing ever calls them, so a veto written there never happens. Read from the source, not
    /// run; a `local function` or a name far from every hook's is the script's own helper.
    public static func misspelledHooks(in source: String) -> [(function: String, hook: String)] {
        var result: [(function: String, hook: String)] = []
        func isNameCharacter(_ character: Character) -> Bool { character.isASCII && (character.isLetter || character.isNumber || character == "_") }
        for line in source.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            let name: Substring
            if trimmed.hasPrefix("function ") {
                let rest = trimmed.dropFirst(9).drop { $0 == " " }
                name = rest.prefix(while: isNameCharacter)
                // `function t.f(` and `function t:f(` define fields, not globals.
                guard rest.dropFirst(name.count).drop(while: { $0 == " " }).first == "(" else { continue }
            } else {
                name = trimmed.prefix(while: isNameCharacter)
                let rest = trimmed.dropFirst(name.count).drop { $0 == " " }
                guard rest.first == "=", rest.dropFirst().drop(while: { $0 == " " }).hasPrefix("function") else { continue }
            }
            let function = String(name)
            guard !function.isEmpty, !HookBus.hookNames.contains(function), !result.contains(where: { $0.function == function }),
                  let near = nearest(to: function, in: HookBus.hookNames) else { continue }
            result.append((function, near))
        }
        return result
    }

    /// Compiles every hook of a job without running it.
    /// - Throws: `HookError` reading `FILE:LINE: message` for the first syntax error; the
    ///   `YAMLError`s of `of(_:)`.
    public static func check(_ job: Job) throws {
        for (name, source, _) in try of(job) {
            do {
                try LuaRuntime.checkSyntax(source, name: name)
            } catch let error as LuaError {
                throw HookError(description: error.description)
            }
        }
    }
}
