import Foundation
import HoistLua

/// A plugin: a Lua hook found by name, documented by its header comment.
///
/// ```lua
/// -- webhook.lua: POSTs a JSON summary of the run to a webhook when the job ends.
/// --
/// -- setting url (string): where to POST (default: $HOIST_WEBHOOK_URL).
/// -- setting events (list): when to post: "success", "failure" (default: both).
/// -- reads env: HOIST_WEBHOOK_URL (default of setting url)
/// ```
/// Each `-- setting NAME (TYPE[, required]): help` line declares what `with:` may give it
/// (`string`, `number`, `boolean` or `list`); the script reads them from its global `settings`.
/// Each `-- reads env: NAME[ (default of setting SETTING)]` line declares a variable it reads
/// with `os.getenv`: a declaration grants nothing (only the manifest's `lua.env` does), and
/// `hoist validate` warns of one the job does not let it see (`Job.warnings`).
public struct PluginInfo: Sendable, Equatable {
    public struct Setting: Sendable, Equatable {
        public let name: String
        public let type: String
        public let required: Bool
        public let help: String
    }

    /// A variable the plugin reads, and the setting that, given, stands for it.
    public struct EnvironmentRead: Sendable, Equatable {
        public let name: String
        public let setting: String?
    }

    public let name: String
    public let path: String
    /// The first line of the header, after `NAME.lua: `.
    public let summary: String
    public let settings: [Setting]
    /// The variables its header says it reads (`-- reads env:` lines).
    public let reads: [EnvironmentRead]

    public init(name: String, path: String, source: String) {
        self.name = name
        self.path = path
        var summary = ""
        var settings: [Setting] = []
        var reads: [EnvironmentRead] = []
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("--") else { break }
            let text = line.dropFirst(2).trimmingCharacters(in: .whitespaces)
            if summary.isEmpty, let colon = text.range(of: ".lua: ") { summary = String(text[colon.upperBound...]) }
            if let match = text.wholeMatch(of: /setting ([A-Za-z_][A-Za-z0-9_]*) \((string|number|boolean|list)(, required)?\): (.*)/) {
                settings.append(Setting(name: String(match.1), type: String(match.2), required: match.3 != nil, help: String(match.4)))
            }
            if let match = text.wholeMatch(of: /reads env: ([A-Za-z_][A-Za-z0-9_]*)(?: \(default of setting ([A-Za-z_][A-Za-z0-9_]*)\))?/) {
                reads.append(EnvironmentRead(name: String(match.1), setting: match.2.map(String.init)))
            }
        }
        self.summary = summary
        self.settings = settings
        self.reads = reads
    }

    /// Checks `with:` values against the settings and turns them into the script's `settings`.
    /// - Returns: the table, or the problems, each with the setting it is about (nil: the entry).
    func convert(_ given: [String: PluginSetting]) -> (value: LuaValue, problems: [(key: String?, message: String)]) {
        var table: [String: LuaValue] = [:]
        var problems: [(key: String?, message: String)] = []
        let known = Dictionary(uniqueKeysWithValues: settings.map { ($0.name, $0) })
        for (key, value) in given.sorted(by: { $0.key < $1.key }) {
            guard let setting = known[key] else {
                var message = "plugin \(name) has no setting '\(key)'"
                let names = settings.map(\.name)
                if let near = nearest(to: key, in: names) {
                    message += " (did you mean '\(near)'?)"
                }
                message += names.isEmpty ? "; it takes none" : "; it takes \(names.joined(separator: ", "))"
                problems.append((key, message))
                continue
            }
            switch (setting.type, value) {
            case ("list", .list(let items)): table[key] = .array(items.map(LuaValue.string))
            case ("list", .scalar(let text)):
                problems.append((key, "setting \(key) of plugin \(name) takes a list, such as [\(text)]"))
            case (_, .list):
                problems.append((key, "setting \(key) of plugin \(name) takes a \(setting.type), not a list"))
            case ("number", .scalar(let text)):
                if let integer = Int64(text) { table[key] = .integer(integer) } else if let number = Double(text) { table[key] = .number(number) } else {
                    problems.append((key, "setting \(key) of plugin \(name) takes a number, not '\(text)'"))
                }
            case ("boolean", .scalar(let text)):
                switch text {
                case "true", "yes", "on": table[key] = .boolean(true)
                case "false", "no", "off": table[key] = .boolean(false)
                default: problems.append((key, "setting \(key) of plugin \(name) takes true or false, not '\(text)'"))
                }
            case (_, .scalar(let text)): table[key] = .string(text)
            }
        }
        for setting in settings where setting.required && given[setting.name] == nil {
            problems.append((nil, "plugin \(name) needs the setting '\(setting.name)' (\(setting.help))"))
        }
        return (.table(table), problems)
    }
}

/// Where plugins named in `hooks: [{ plugin: NAME }]` are found, in order: each folder of
/// `$HOIST_PLUGIN_PATH` (colon-separated), `plugins/` beside the manifest, `share/hoist/plugins`
/// beside the `hoist` binary's folder, the `plugins/` of the source checkout the binary was
/// built in (for `swift run`), `/usr/local/share/hoist/plugins` and `/usr/share/hoist/plugins`.
public enum PluginCatalog {
    public static func directories(for job: Job?, environment: [String: String]) -> [String] {
        var folders = (environment["HOIST_PLUGIN_PATH"] ?? "").split(separator: ":").map(String.init)
        if let job { folders.append(job.directory.appendingPathComponent("plugins").path) }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        folders.append(executable.deletingLastPathComponent().appendingPathComponent("share/hoist/plugins").path)
        var folder = executable
        for _ in 0..<5 {
            folder = folder.deletingLastPathComponent()
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent("Package.swift").path) {
                folders.append(folder.appendingPathComponent("plugins").path)
                break
            }
        }
        folders += ["/usr/local/share/hoist/plugins", "/usr/share/hoist/plugins"]
        var seen = Set<String>()
        return folders.filter { seen.insert($0).inserted }
    }

    /// Every plugin in the search path, by name (the first found wins).
    public static func all(for job: Job?, environment: [String: String]) -> [PluginInfo] {
        var found: [String: PluginInfo] = [:]
        for folder in directories(for: job, environment: environment) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            for file in names.sorted() where file.hasSuffix(".lua") {
                let name = String(file.dropLast(4))
                guard found[name] == nil else { continue }
                let path = folder + "/" + file
                guard let source = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
                found[name] = PluginInfo(name: name, path: path, source: source)
            }
        }
        return found.values.sorted { $0.name < $1.name }
    }

    /// The plugin called `name`, or nil.
    public static func find(_ name: String, for job: Job?, environment: [String: String]) -> PluginInfo? {
        guard !name.contains("/"), !name.hasPrefix(".") else { return nil }
        for folder in directories(for: job, environment: environment) {
            let path = folder + "/" + name + ".lua"
            if let source = try? String(contentsOfFile: path, encoding: .utf8) {
                return PluginInfo(name: name, path: path, source: source)
            }
        }
        return nil
    }
}

/// The name of `names` nearest to `name`, when within two edits of it: a did-you-mean.
func nearest(to name: String, in names: [String]) -> String? {
    guard let near = names.min(by: { editDistance($0, name) < editDistance($1, name) }), editDistance(near, name) <= 2 else { return nil }
    return near
}

/// Levenshtein distance, for did-you-mean.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.lowercased()), b = Array(b.lowercased())
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
