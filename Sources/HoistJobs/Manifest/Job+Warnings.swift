import Foundation

extension Job {
    /// What is allowed in the manifest but likely a mistake, printed by `hoist validate` and at
    /// the start of every run: the storage backend's own warnings (`insecureSkipTLSVerify`),
    /// the deprecated `lua.secrets`, a `lua.env` glob that reaches a variable named like a
    /// credential, a variable a hook's header says it reads (`-- reads env:`) that is set
    /// but hidden from it, and a global function named nearly as a hook (`on_sucess`), which
    /// nothing would call.
    public func warnings() -> [String] {
        var warnings = manifest.storage.options.warnings
        let lua = manifest.lua
        if !lua.secrets.isEmpty {
            warnings.append("lua.secrets is deprecated: list the variables in lua.env instead (lua.secrets still grants "
                + "\(lua.secrets.joined(separator: ", ")) to hooks, for now)")
        }
        for glob in lua.env where glob.hasSuffix("*") {
            let reached = environment.keys.filter { $0.hasPrefix(glob.dropLast()) && HookBus.isSecret($0) }.sorted()
            if !reached.isEmpty {
                warnings.append("lua.env grants \(glob), and so \(reached.joined(separator: ", ")), named like credentials: "
                    + "hooks read them whole (name the variables hooks need one by one if not)")
            }
        }
        let visible = HookEnvironment(job: self)
        for (index, hook) in manifest.hooks.enumerated() {
            let what: String, source: String, reads: [PluginInfo.EnvironmentRead], given: Set<String>
            switch hook {
            case .inline(let text):
                (what, source, reads, given) = ("hook \(file)#hooks[\(index)]", text, [], [])
            case .file(let path):
                guard case .success(let bytes) = HookSources.readScript(resolve(path)) else { continue }
                let text = String(decoding: bytes, as: UTF8.self)
                (what, source, reads, given) = ("hook \(shown(path))", text, PluginInfo(name: path, path: resolve(path), source: text).reads, [])
            case .plugin(let name, let settings):
                guard let found = PluginCatalog.find(name, for: self, environment: environment),
                      case .success(let bytes) = HookSources.readScript(found.path) else { continue }
                (what, source, reads, given) = ("plugin \(name)", String(decoding: bytes, as: UTF8.self), found.reads, Set(settings.keys))
            }
            for read in reads where environment[read.name] != nil && visible.visibility(of: read.name) == .hidden {
                if let setting = read.setting, given.contains(setting) { continue }
                warnings.append("\(what) reads \(read.name), which is set but not granted: the hook sees nil "
                    + "(add \(read.name) to lua.env\(read.setting.map { ", or give the setting \($0)" } ?? ""))")
            }
            for (function, hookName) in HookSources.misspelledHooks(in: source) {
                warnings.append("\(what) defines \(function), which is not a hook: nothing calls it (did you mean \(hookName)?)")
            }
        }
        return warnings
    }
}
