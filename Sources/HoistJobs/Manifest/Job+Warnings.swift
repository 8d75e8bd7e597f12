import Foundation

extension Job {
    /// What is allowed in the manifest but likely a mistake, printed by `hoist validate` and at
    /// the start of every run: the storage backend's own warnings (`insecureSkipTLSVerify`),
    /// the deprecated `lua.secrets`, a `lua.env` glob that reaches a variable named like a
    /// credential, and a variable a hook's header says it reads (`-- reads env:`) that is set
    /// but hidden from it.
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
        for hook in manifest.hooks {
            let info: PluginInfo, what: String, given: Set<String>
            switch hook {
            case .inline: continue
            case .file(let path):
                guard case .success(let bytes) = HookSources.readScript(resolve(path)) else { continue }
                info = PluginInfo(name: path, path: resolve(path), source: String(decoding: bytes, as: UTF8.self))
                (what, given) = ("hook \(path)", [])
            case .plugin(let name, let settings):
                guard let found = PluginCatalog.find(name, for: self, environment: environment) else { continue }
                info = found
                (what, given) = ("plugin \(name)", Set(settings.keys))
            }
            for read in info.reads where environment[read.name] != nil && visible.visibility(of: read.name) == .hidden {
                if let setting = read.setting, given.contains(setting) { continue }
                warnings.append("\(what) reads \(read.name), which is set but not granted: the hook sees nil "
                    + "(add \(read.name) to lua.env\(read.setting.map { ", or give the setting \($0)" } ?? ""))")
            }
        }
        return warnings
    }
}
