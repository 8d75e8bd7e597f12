import Foundation
import HoistLua
import HoistYAML

/// Where a job's hooks come from, and their check before a run (`hoist validate`).
public enum HookSources {
    /// The hooks' sources: files relative to the manifest, `inline:` entries (named
    /// `JOB.yaml#hooks[N]`) and plugins by name (named `plugin NAME`), each with the globals it
    /// gets (a plugin's `settings`).
    /// - Throws: `HookError` for a file that cannot be read; `YAMLError`s (each with its line and
    ///   column) for plugins that are not found or settings they do not take.
    public static func of(_ job: Job) throws -> [(name: String, source: String, globals: [String: LuaValue])] {
        var problems: [YAMLError] = []
        var result: [(name: String, source: String, globals: [String: LuaValue])] = []
        for (index, hook) in job.manifest.hooks.enumerated() {
            switch hook {
            case .inline(let source):
                // Its lines are numbered as the manifest's: the script starts on the line after
                // `inline: |` (or on its line, for a one-line value), so an error names the line
                // a user finds in the file.
                let mark = job.mark(at: ["hooks", index, "inline"])
                let indicator = job.sourceLine(mark.line).map { Array($0).dropFirst(max(0, mark.column - 1)).first } ?? nil
                let firstLine = mark.line + (indicator == "|" || indicator == ">" ? 1 : 0)
                result.append(("\(job.file)#hooks[\(index)]", String(repeating: "\n", count: max(0, firstLine - 1)) + source, [:]))
            case .file(let path):
                let resolved = job.resolve(path)
                guard let source = try? String(contentsOfFile: resolved, encoding: .utf8) else {
                    let reason = FileManager.default.fileExists(atPath: resolved) ? "it cannot be read as UTF-8 text" : "there is no such file"
                    throw job.locatedError("cannot read hook \(path) (\(resolved)): \(reason)", at: ["hooks", index])
                }
                result.append((path, source, [:]))
            case .plugin(let name, let given):
                guard let plugin = PluginCatalog.find(name, for: job, environment: job.environment),
                      let source = try? String(contentsOfFile: plugin.path, encoding: .utf8) else {
                    let names = PluginCatalog.all(for: job, environment: job.environment).map(\.name)
                    var message = "no plugin '\(name)'"
                    if let near = names.min(by: { editDistance($0, name) < editDistance($1, name) }), editDistance(near, name) <= 2 {
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
